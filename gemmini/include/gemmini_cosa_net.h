/*
 * gemmini_cosa_net.h -- the host's operators of a whole int8 network program (cosa build gemmini
 * MODEL.int8.onnx), in C, with the integer semantics of gemmini/network_ops.py (ONNX Runtime's CPU
 * kernels), so that the program's output equals the functional model's bit for bit.
 *
 * Four-dimensional activations are NHWC (Gemmini's library reads and writes convolutions so); the model's
 * NCHW shapes are given as (n, c, h, w).  Every requantization is float32 arithmetic rounded half to even
 * (rintf in the default rounding mode), then saturated.  Build with -ffp-contract=off: a fused
 * multiply-add would round once where ONNX Runtime rounds twice.
 */
#ifndef GEMMINI_COSA_NET_H
#define GEMMINI_COSA_NET_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline int8_t cosa_net_saturate8(double v) {
  return (int8_t)(v < -128.0 ? -128 : v > 127.0 ? 127 : (int)v);
}

/* QuantizeLinear: q = saturate(rint(x / scale) + zero_point). */
static void cosa_net_quantize(const float *x, int8_t *q, long count, float scale, int zero_point) {
  for (long i = 0; i < count; i++) q[i] = cosa_net_saturate8((double)rintf(x[i] / scale) + zero_point);
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

/* QLinearAdd with zero points 0: rint(a * ratio_a + b * ratio_b) + zero_out, saturated; relu: a fused ReLU. */
static void cosa_net_qlinear_add(const int8_t *a, const int8_t *b, int8_t *y, long count, float ratio_a,
                                 float ratio_b, int zero_out, int relu) {
  for (long i = 0; i < count; i++) {
    float pa = (float)a[i] * ratio_a;
    float pb = (float)b[i] * ratio_b;
    int8_t v = cosa_net_saturate8((double)rintf(pa + pb) + zero_out);
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
      double r = (double)rintf((float)sum * scale);
      r = r < -2147483648.0 ? -2147483648.0 : r > 2147483647.0 ? 2147483647.0 : r;
      y[(long)b * c + ch] = cosa_net_saturate8((double)(int64_t)r + zero_out);
    }
}

/* float32 GlobalAveragePool of an NHWC tensor -> [n, c]: each channel's pixels summed in order, in float32,
 * then divided by the pixel count. */
static void cosa_net_global_average_pool(const float *x, float *y, int n, int c, long pixels) {
  for (int b = 0; b < n; b++)
    for (int ch = 0; ch < c; ch++) {
      float sum = 0.0f;
      for (long p = 0; p < pixels; p++) sum += x[((long)b * pixels + p) * c + ch];
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
