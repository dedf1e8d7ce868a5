/*
 * gemmini_cosa_net.h -- the host's operators of a whole int8 network program (cosa build gemmini
 * MODEL.int8.onnx), in C, with the integer semantics of gemmini/network_ops.py (ONNX Runtime's CPU
 * kernels), so that the program's output equals the functional model's bit for bit.
 *
 * Four-dimensional activations are NHWC (Gemmini's library reads and writes convolutions so); the model's
 * NCHW shapes are given as (n, c, h, w).  Every requantization is float32 arithmetic rounded half to even
 * (cosa_net_rint), then saturated.  Build with -ffp-contract=off: a fused
 * multiply-add would round once where ONNX Runtime rounds twice.
 */
#ifndef GEMMINI_COSA_NET_H
#define GEMMINI_COSA_NET_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* rint of a float32 to an integer, ties to even, saturated to int32 (the callers saturate further).  On
 * RISC-V one fcvt.w.s with the rne rounding mode (a library rintf costs tens of instructions); elsewhere
 * rintf, clamped. */
static inline int32_t cosa_net_rint(float x) {
#ifdef __riscv
  int32_t r;
  __asm__("fcvt.w.s %0, %1, rne" : "=r"(r) : "f"(x));
  return r;
#else
  float r = rintf(x);
  return r < -2147483648.0f ? INT32_MIN : r >= 2147483648.0f ? INT32_MAX : (int32_t)r;
#endif
}

static inline int8_t cosa_net_saturate8i(int64_t v) {
  return (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
}

/* QuantizeLinear: q = saturate(rint(x / scale) + zero_point). */
static void cosa_net_quantize(const float *x, int8_t *q, long count, float scale, int zero_point) {
  for (long i = 0; i < count; i++) q[i] = cosa_net_saturate8i((int64_t)cosa_net_rint(x[i] / scale) + zero_point);
}

/* DequantizeLinear: x = (q - zero_point) * scale. */
static void cosa_net_dequantize(const int8_t *q, float *x, long count, float scale, int zero_point) {
  for (long i = 0; i < count; i++) x[i] = (float)(q[i] - zero_point) * scale;
}

static void cosa_net_relu_i8(const int8_t *x, int8_t *y, long count) {
  for (long i = 0; i < count; i++) y[i] = x[i] > 0 ? x[i] : 0;
}

static void cosa_net_relu_f32(const float *x, float *y, long count) {
  for (long i = 0; i < count; i++) y[i] = x[i] > 0.0f ? x[i] : 0.0f;
}

/* QLinearAdd with zero points 0, as ONNX Runtime's x86-64 AVX2 kernel: rint(fma(a, ratio_a, float(b * ratio_b)))
   + zero_out, saturated; relu: a fused ReLU. */
static void cosa_net_qlinear_add(const int8_t *a, const int8_t *b, int8_t *y, long count, float ratio_a,
                                 float ratio_b, int zero_out, int relu) {
  for (long i = 0; i < count; i++) {
    float pb = (float)b[i] * ratio_b;                     /* rounded to float32 */
    float sum = fmaf((float)a[i], ratio_a, pb);           /* a * ratio_a + pb, rounded once */
    int8_t v = cosa_net_saturate8i((int64_t)cosa_net_rint(sum) + zero_out);
    y[i] = relu && v < zero_out ? (int8_t)zero_out : v;
  }
}

/* MaxPool of an NHWC int8 tensor; positions in the padding are never the maximum. */
static void cosa_net_max_pool(const int8_t *x, int8_t *y, int n, int c, int h, int w, int kh, int kw, int sh,
                              int sw, int ph, int pw, int dh, int dw, int oh, int ow) {
  for (int b = 0; b < n; b++)
    for (int oy = 0; oy < oh; oy++)
      for (int ox = 0; ox < ow; ox++)
        for (int ch = 0; ch < c; ch++) {
          int best = -128;
          for (int i = 0; i < kh; i++) {
            int iy = oy * sh - ph + i * dh;
            if (iy < 0 || iy >= h) continue;
            for (int j = 0; j < kw; j++) {
              int ix = ox * sw - pw + j * dw;
              if (ix < 0 || ix >= w) continue;
              int v = x[(((long)b * h + iy) * w + ix) * c + ch];
              if (v > best) best = v;
            }
          }
          y[(((long)b * oh + oy) * ow + ox) * c + ch] = (int8_t)best;
        }
}

/* QLinearGlobalAveragePool of an NHWC int8 tensor -> [n, c]: the int32 sum of each channel times the
 * float32 scale (x_scale / (y_scale * pixels)), rounded half to even, saturated to int32, plus the output
 * zero point, saturated to int8. */
static void cosa_net_qlinear_global_average_pool(const int8_t *x, int8_t *y, int n, int c, long pixels, float scale,
                                                 int zero_in, int zero_out) {
  for (int b = 0; b < n; b++)
    for (int ch = 0; ch < c; ch++) {
      int64_t sum = 0;
      for (long p = 0; p < pixels; p++) sum += x[((long)b * pixels + p) * c + ch];
      sum -= (int64_t)zero_in * pixels;
      y[(long)b * c + ch] = cosa_net_saturate8i((int64_t)cosa_net_rint((float)sum * scale) + zero_out);
    }
}

/* float32 GlobalAveragePool of an NHWC tensor -> [n, c] in the order ONNX Runtime's x86 kernel (MLAS) sums:
 * pixel p of the first 4 * (pixels / 4) into lane p % 4, the lanes as (l0 + l2) + (l1 + l3), the rest one
 * after the other, then divided by the pixel count; all float32. */
static void cosa_net_global_average_pool(const float *x, float *y, int n, int c, long pixels) {
  long body = pixels / 4 * 4;
  for (int b = 0; b < n; b++)
    for (int ch = 0; ch < c; ch++) {
      const float *at = x + (long)b * pixels * c + ch;
      float lane[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      for (long p = 0; p < body; p++) lane[p % 4] += at[p * c];
      float sum = (lane[0] + lane[2]) + (lane[1] + lane[3]);
      for (long p = body; p < pixels; p++) sum += at[p * c];
      y[(long)b * c + ch] = sum / (float)pixels;
    }
}

/* Flatten of an NHWC tensor into the model's NCHW order: y[b][ch * pixels + p] = x[b][p][ch]. */
static void cosa_net_flatten_nhwc(const uint8_t *x, uint8_t *y, int n, int c, long pixels, int elem_bytes) {
  for (int b = 0; b < n; b++)
    for (long p = 0; p < pixels; p++)
      for (int ch = 0; ch < c; ch++)
        memcpy(y + (((long)b * c + ch) * pixels + p) * elem_bytes, x + (((long)b * pixels + p) * c + ch) * elem_bytes,
               (size_t)elem_bytes);
}

#endif
