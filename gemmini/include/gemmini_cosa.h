/*
 * gemmini_cosa.h -- Gemmini commands with the encodings of gemmini/isa.py.
 *
 * Every command is a RoCC instruction: opcode custom-3 (0x7B), funct3 = 3
 * (two source registers, no destination), funct7 = the command number, and
 * two 64-bit operands rs1, rs2.  The field layout is documented in
 * gemmini/isa.py; a test compiles this header and checks that every encoder
 * here produces the same (funct, rs1, rs2) as isa.py.
 *
 * On RISC-V (__riscv defined) the commands are real RoCC instructions and
 * gemmini_cosa_fence() is the core's `fence`.  Elsewhere every command calls
 * the host hook gemmini_host_issue(funct, rs1, rs2) and the fence calls
 * gemmini_host_fence(), which the including program defines: a command
 * logger for tests, or the driver of an RTL co-simulation.  On the host,
 * main-memory addresses are host pointers (GEMMINI_COSA_PTR).
 *
 * Usage: encoders gemmini_cosa_enc_*() return a gemmini_cosa_cmd_t without
 * issuing it; the matching gemmini_cosa_*() issue it.
 */
#ifndef GEMMINI_COSA_H
#define GEMMINI_COSA_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* funct7 numbers */
#define GEMMINI_COSA_CONFIG 0
#define GEMMINI_COSA_MVIN2 1
#define GEMMINI_COSA_MVIN 2
#define GEMMINI_COSA_MVOUT 3
#define GEMMINI_COSA_COMPUTE_PRELOADED 4
#define GEMMINI_COSA_COMPUTE_ACCUMULATED 5
#define GEMMINI_COSA_PRELOAD 6
#define GEMMINI_COSA_FLUSH 7
#define GEMMINI_COSA_MVIN3 14
/* loop instructions: configuration words held until their start word (LOOP_WS 8, LOOP_CONV_WS 15) */
#define GEMMINI_COSA_LOOP_WS_CONFIG_BOUNDS 9
#define GEMMINI_COSA_LOOP_WS_CONFIG_ADDRS_AB 10
#define GEMMINI_COSA_LOOP_WS_CONFIG_ADDRS_DC 11
#define GEMMINI_COSA_LOOP_WS_CONFIG_STRIDES_AB 12
#define GEMMINI_COSA_LOOP_WS_CONFIG_STRIDES_DC 13
#define GEMMINI_COSA_LOOP_WS 8
#define GEMMINI_COSA_LOOP_CONV_WS_CONFIG_1 16
#define GEMMINI_COSA_LOOP_CONV_WS_CONFIG_2 17
#define GEMMINI_COSA_LOOP_CONV_WS_CONFIG_3 18
#define GEMMINI_COSA_LOOP_CONV_WS_CONFIG_4 19
#define GEMMINI_COSA_LOOP_CONV_WS_CONFIG_5 20
#define GEMMINI_COSA_LOOP_CONV_WS_CONFIG_6 21
#define GEMMINI_COSA_LOOP_CONV_WS 15
/* pseudo-command number of a fence in a command log (outside funct7) */
#define GEMMINI_COSA_FENCE 128

/* config sub-commands in rs1[1:0] */
#define GEMMINI_COSA_CONFIG_EX 0
#define GEMMINI_COSA_CONFIG_LD 1
#define GEMMINI_COSA_CONFIG_ST 2

/* dataflows and activations */
#define GEMMINI_COSA_OS 0
#define GEMMINI_COSA_WS 1
#define GEMMINI_COSA_ACT_NONE 0
#define GEMMINI_COSA_ACT_RELU 1

/* local addresses: bit 31 accumulator, bit 30 accumulate, bit 29 full-width read, [28:0] row */
#define GEMMINI_COSA_ACC_BIT 0x80000000u
#define GEMMINI_COSA_ACCUMULATE_BIT 0x40000000u
#define GEMMINI_COSA_FULL_BIT 0x20000000u
#define GEMMINI_COSA_ROW_MASK 0x1FFFFFFFu
#define GEMMINI_COSA_GARBAGE 0xFFFFFFFFu

#define GEMMINI_COSA_PTR(p) ((uint64_t)(uintptr_t)(p))

typedef struct {
  uint64_t funct;
  uint64_t rs1;
  uint64_t rs2;
} gemmini_cosa_cmd_t;

static inline uint32_t gemmini_cosa_sp(uint32_t row) { return row & GEMMINI_COSA_ROW_MASK; }

static inline uint32_t gemmini_cosa_acc(uint32_t row, int accumulate, int full) {
  return GEMMINI_COSA_ACC_BIT | (accumulate ? GEMMINI_COSA_ACCUMULATE_BIT : 0u) |
         (full ? GEMMINI_COSA_FULL_BIT : 0u) | (row & GEMMINI_COSA_ROW_MASK);
}

/* IEEE-754 bits of a float32 scale */
static inline uint64_t gemmini_cosa_f32_bits(float value) {
  union {
    float f;
    uint32_t u;
  } bits;
  bits.f = value;
  return (uint64_t)bits.u;
}

/* [31:0] local address, [47:32] columns, [63:48] rows */
static inline uint64_t gemmini_cosa_local_operand(uint32_t local, uint32_t rows, uint32_t cols) {
  return ((uint64_t)(rows & 0xFFFFu) << 48) | ((uint64_t)(cols & 0xFFFFu) << 32) | (uint64_t)local;
}

static inline gemmini_cosa_cmd_t gemmini_cosa_cmd(uint64_t funct, uint64_t rs1, uint64_t rs2) {
  gemmini_cosa_cmd_t cmd;
  cmd.funct = funct;
  cmd.rs1 = rs1;
  cmd.rs2 = rs2;
  return cmd;
}

/* ---- encoders (argument order as in gemmini/isa.py) ---- */
static inline gemmini_cosa_cmd_t gemmini_cosa_enc_config_ex(int dataflow, int activation, int a_transpose,
                                                            int b_transpose, uint32_t a_stride, float acc_scale,
                                                            uint32_t c_stride, uint32_t os_shift) {
  uint64_t rs1 = (gemmini_cosa_f32_bits(acc_scale) << 32) | ((uint64_t)(a_stride & 0xFFFFu) << 16) |
                 ((uint64_t)(b_transpose & 1) << 9) | ((uint64_t)(a_transpose & 1) << 8) |
                 ((uint64_t)(activation & 3) << 3) | ((uint64_t)(dataflow & 1) << 2) | GEMMINI_COSA_CONFIG_EX;
  uint64_t rs2 = ((uint64_t)(c_stride & 0xFFFFu) << 48) | (uint64_t)os_shift;
  return gemmini_cosa_cmd(GEMMINI_COSA_CONFIG, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_config_ld(uint64_t stride_bytes, float scale, int shrunk, int id,
                                                            uint32_t local_stride) {
  uint64_t rs1 = (gemmini_cosa_f32_bits(scale) << 32) | ((uint64_t)(local_stride & 0xFFFFu) << 16) |
                 ((uint64_t)(id & 3) << 3) | ((uint64_t)(shrunk & 1) << 2) | GEMMINI_COSA_CONFIG_LD;
  return gemmini_cosa_cmd(GEMMINI_COSA_CONFIG, rs1, stride_bytes);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_config_st(uint32_t stride_bytes, int activation, float acc_scale) {
  uint64_t rs1 = ((uint64_t)(activation & 3) << 2) | GEMMINI_COSA_CONFIG_ST;
  uint64_t rs2 = (gemmini_cosa_f32_bits(acc_scale) << 32) | (uint64_t)stride_bytes;
  return gemmini_cosa_cmd(GEMMINI_COSA_CONFIG, rs1, rs2);
}

/* id 0, 1, 2: mvin, mvin2, mvin3 */
static inline gemmini_cosa_cmd_t gemmini_cosa_enc_mvin(uint64_t dram_addr, uint32_t local, uint32_t rows,
                                                       uint32_t cols, int id) {
  uint64_t funct = id == 1 ? GEMMINI_COSA_MVIN2 : (id == 2 ? GEMMINI_COSA_MVIN3 : GEMMINI_COSA_MVIN);
  return gemmini_cosa_cmd(funct, dram_addr, gemmini_cosa_local_operand(local, rows, cols));
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_mvout(uint64_t dram_addr, uint32_t local, uint32_t rows,
                                                        uint32_t cols) {
  return gemmini_cosa_cmd(GEMMINI_COSA_MVOUT, dram_addr, gemmini_cosa_local_operand(local, rows, cols));
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_preload(uint32_t bd_local, uint32_t c_local, uint32_t bd_rows,
                                                          uint32_t bd_cols, uint32_t c_rows, uint32_t c_cols) {
  return gemmini_cosa_cmd(GEMMINI_COSA_PRELOAD, gemmini_cosa_local_operand(bd_local, bd_rows, bd_cols),
                          gemmini_cosa_local_operand(c_local, c_rows, c_cols));
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_compute_preloaded(uint32_t a_local, uint32_t bd_local,
                                                                    uint32_t a_rows, uint32_t a_cols,
                                                                    uint32_t bd_rows, uint32_t bd_cols) {
  return gemmini_cosa_cmd(GEMMINI_COSA_COMPUTE_PRELOADED, gemmini_cosa_local_operand(a_local, a_rows, a_cols),
                          gemmini_cosa_local_operand(bd_local, bd_rows, bd_cols));
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_compute_accumulated(uint32_t a_local, uint32_t bd_local,
                                                                      uint32_t a_rows, uint32_t a_cols,
                                                                      uint32_t bd_rows, uint32_t bd_cols) {
  return gemmini_cosa_cmd(GEMMINI_COSA_COMPUTE_ACCUMULATED, gemmini_cosa_local_operand(a_local, a_rows, a_cols),
                          gemmini_cosa_local_operand(bd_local, bd_rows, bd_cols));
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_flush(int skip) {
  return gemmini_cosa_cmd(GEMMINI_COSA_FLUSH, (uint64_t)(skip & 1), 0);
}

/* loop words, arguments in bit order (gemmini.h's gemmini_loop_ws / gemmini_loop_conv_ws layouts, see
 * gemmini/isa_loops.py); fields are truncated to their widths here, gemmini/isa_loops.py refuses overflow */
static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_ws_config_bounds(uint32_t pad_I, uint32_t pad_J,
                                                                        uint32_t pad_K, uint32_t I, uint32_t J,
                                                                        uint32_t K) {
  uint64_t rs1 = (uint64_t)(pad_I & 0xFFFFu) | ((uint64_t)(pad_J & 0xFFFFu) << 16) |
    ((uint64_t)(pad_K & 0xFFFFu) << 32);
  uint64_t rs2 = (uint64_t)(I & 0xFFFFu) | ((uint64_t)(J & 0xFFFFu) << 16) | ((uint64_t)(K & 0xFFFFu) << 32);
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_WS_CONFIG_BOUNDS, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_ws_config_addrs_ab(uint64_t A, uint64_t B) {
  uint64_t rs1 = A;
  uint64_t rs2 = B;
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_WS_CONFIG_ADDRS_AB, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_ws_config_addrs_dc(uint64_t D, uint64_t C) {
  uint64_t rs1 = D;
  uint64_t rs2 = C;
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_WS_CONFIG_ADDRS_DC, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_ws_config_strides_ab(uint64_t A_stride, uint64_t B_stride) {
  uint64_t rs1 = A_stride;
  uint64_t rs2 = B_stride;
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_WS_CONFIG_STRIDES_AB, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_ws_config_strides_dc(uint64_t D_stride, uint64_t C_stride) {
  uint64_t rs1 = D_stride;
  uint64_t rs2 = C_stride;
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_WS_CONFIG_STRIDES_DC, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_ws_start(uint32_t ex_accumulate, uint32_t full_C,
                                                                uint32_t low_D, uint32_t act, uint32_t b_spad_id,
                                                                uint32_t a_spad_id, uint32_t A_transpose,
                                                                uint32_t B_transpose, uint32_t is_resadd) {
  uint64_t rs1 = (uint64_t)(ex_accumulate & 0x1u) | ((uint64_t)(full_C & 0x1u) << 1) |
    ((uint64_t)(low_D & 0x1u) << 2) | ((uint64_t)(act & 0xFFu) << 8) | ((uint64_t)(b_spad_id & 0x3u) << 16) |
    ((uint64_t)(a_spad_id & 0x3u) << 18);
  uint64_t rs2 = (uint64_t)(A_transpose & 0x1u) | ((uint64_t)(B_transpose & 0x1u) << 1) |
    ((uint64_t)(is_resadd & 0x1u) << 2);
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_WS, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_conv_ws_config_1(uint32_t batch_size, uint32_t in_row_dim,
                                                                        uint32_t in_channels, uint32_t out_channels,
                                                                        uint32_t out_row_dim,
                                                                        uint32_t pool_out_row_dim,
                                                                        uint32_t out_col_dim, uint32_t stride,
                                                                        uint32_t padding) {
  uint64_t rs1 = (uint64_t)(batch_size & 0xFFFFu) | ((uint64_t)(in_row_dim & 0xFFFFu) << 16) |
    ((uint64_t)(in_channels & 0xFFFFu) << 32) | ((uint64_t)(out_channels & 0xFFFFu) << 48);
  uint64_t rs2 = (uint64_t)(out_row_dim & 0xFFFFu) | ((uint64_t)(pool_out_row_dim & 0xFFFFu) << 16) |
    ((uint64_t)(out_col_dim & 0xFFFFu) << 32) | ((uint64_t)(stride & 0xFFu) << 48) |
    ((uint64_t)(padding & 0xFFu) << 56);
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_CONV_WS_CONFIG_1, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_conv_ws_config_2(uint32_t pool_padding, uint32_t pool_stride,
                                                                        uint32_t pool_size,
                                                                        uint32_t pool_out_col_dim,
                                                                        uint32_t kernel_dim, uint32_t pochs,
                                                                        uint32_t pocols, uint32_t porows,
                                                                        uint32_t batches) {
  uint64_t rs1 = (uint64_t)(pool_padding & 0xFFu) | ((uint64_t)(pool_stride & 0xFFu) << 8) |
    ((uint64_t)(pool_size & 0xFFFFu) << 16) | ((uint64_t)(pool_out_col_dim & 0xFFFFu) << 32) |
    ((uint64_t)(kernel_dim & 0xFFFFu) << 48);
  uint64_t rs2 = (uint64_t)(pochs & 0xFFFFu) | ((uint64_t)(pocols & 0xFFFFu) << 16) |
    ((uint64_t)(porows & 0xFFFFu) << 32) | ((uint64_t)(batches & 0xFFFFu) << 48);
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_CONV_WS_CONFIG_2, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_conv_ws_config_3(uint32_t lpad, uint32_t kchs,
                                                                        uint32_t kcols, uint32_t krows,
                                                                        uint32_t in_col_dim, uint32_t plpad,
                                                                        uint32_t dpad, uint32_t upad,
                                                                        uint32_t rpad) {
  uint64_t rs1 = (uint64_t)(lpad & 0xFFFFu) | ((uint64_t)(kchs & 0xFFFFu) << 16) |
    ((uint64_t)(kcols & 0xFFFFu) << 32) | ((uint64_t)(krows & 0xFFFFu) << 48);
  uint64_t rs2 = (uint64_t)(in_col_dim & 0xFFFFu) | ((uint64_t)(plpad & 0xFFu) << 16) |
    ((uint64_t)(dpad & 0xFFu) << 24) | ((uint64_t)(upad & 0xFFFFu) << 32) | ((uint64_t)(rpad & 0xFFFFu) << 48);
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_CONV_WS_CONFIG_3, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_conv_ws_config_4(uint32_t kernel_dilation, uint32_t pdpad,
                                                                        uint32_t pupad, uint32_t prpad,
                                                                        uint32_t orows, uint32_t ocols,
                                                                        uint32_t out_stride, uint32_t weight_stride,
                                                                        uint32_t in_stride) {
  uint64_t rs1 = (uint64_t)(kernel_dilation & 0x3FFu) | ((uint64_t)(pdpad & 0x7FFu) << 10) |
    ((uint64_t)(pupad & 0x7FFu) << 21) | ((uint64_t)(prpad & 0xFFFFu) << 32) | ((uint64_t)(orows & 0xFFFFu) << 48);
  uint64_t rs2 = (uint64_t)(ocols & 0xFFFFu) | ((uint64_t)(out_stride & 0xFFFFu) << 16) |
    ((uint64_t)(weight_stride & 0xFFFFu) << 32) | ((uint64_t)(in_stride & 0xFFFFu) << 48);
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_CONV_WS_CONFIG_4, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_conv_ws_config_5(uint64_t weights, uint64_t output) {
  uint64_t rs1 = weights;
  uint64_t rs2 = output;
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_CONV_WS_CONFIG_5, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_conv_ws_config_6(uint64_t bias, uint64_t input) {
  uint64_t rs1 = bias;
  uint64_t rs2 = input;
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_CONV_WS_CONFIG_6, rs1, rs2);
}

static inline gemmini_cosa_cmd_t gemmini_cosa_enc_loop_conv_ws_start(uint32_t no_bias, uint32_t wrot180,
                                                                     uint32_t trans_output_1203,
                                                                     uint32_t trans_weight_1203,
                                                                     uint32_t trans_weight_0132,
                                                                     uint32_t trans_input_3120, uint32_t dw,
                                                                     uint32_t max_pixels_per_row,
                                                                     uint32_t b_spad_id, uint32_t a_spad_id,
                                                                     uint32_t no_pool, uint32_t downsample,
                                                                     uint32_t input_dilated, uint32_t activation) {
  uint64_t rs1 = (uint64_t)(no_bias & 0x1u) | ((uint64_t)(wrot180 & 0x1u) << 1) |
    ((uint64_t)(trans_output_1203 & 0x1u) << 2) | ((uint64_t)(trans_weight_1203 & 0x1u) << 3) |
    ((uint64_t)(trans_weight_0132 & 0x1u) << 4) | ((uint64_t)(trans_input_3120 & 0x1u) << 5) |
    ((uint64_t)(dw & 0x1u) << 6) | ((uint64_t)(max_pixels_per_row & 0xFFu) << 8) |
    ((uint64_t)(b_spad_id & 0x3u) << 16) | ((uint64_t)(a_spad_id & 0x3u) << 18);
  uint64_t rs2 = (uint64_t)(no_pool & 0x1u) | ((uint64_t)(downsample & 0x1u) << 1) |
    ((uint64_t)(input_dilated & 0x1u) << 2) | ((uint64_t)(activation & 0x3u) << 3);
  return gemmini_cosa_cmd(GEMMINI_COSA_LOOP_CONV_WS, rs1, rs2);
}

/* ---- issuing ---- */
#if defined(__riscv)

/* funct7 must be an assembler constant, hence one asm statement per command */
#define GEMMINI_COSA_ROCC_(funct, rs1, rs2) \
  __asm__ volatile(".insn r CUSTOM_3, 3, " #funct ", x0, %0, %1" : : "r"(rs1), "r"(rs2) : "memory")
#define GEMMINI_COSA_ROCC(funct, rs1, rs2) GEMMINI_COSA_ROCC_(funct, rs1, rs2)

static inline void gemmini_cosa_issue(gemmini_cosa_cmd_t cmd) {
  uint64_t rs1 = cmd.rs1, rs2 = cmd.rs2;
  switch (cmd.funct) {
    case GEMMINI_COSA_CONFIG: GEMMINI_COSA_ROCC(0, rs1, rs2); break;
    case GEMMINI_COSA_MVIN2: GEMMINI_COSA_ROCC(1, rs1, rs2); break;
    case GEMMINI_COSA_MVIN: GEMMINI_COSA_ROCC(2, rs1, rs2); break;
    case GEMMINI_COSA_MVOUT: GEMMINI_COSA_ROCC(3, rs1, rs2); break;
    case GEMMINI_COSA_COMPUTE_PRELOADED: GEMMINI_COSA_ROCC(4, rs1, rs2); break;
    case GEMMINI_COSA_COMPUTE_ACCUMULATED: GEMMINI_COSA_ROCC(5, rs1, rs2); break;
    case GEMMINI_COSA_PRELOAD: GEMMINI_COSA_ROCC(6, rs1, rs2); break;
    case GEMMINI_COSA_FLUSH: GEMMINI_COSA_ROCC(7, rs1, rs2); break;
    case GEMMINI_COSA_MVIN3: GEMMINI_COSA_ROCC(14, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_WS: GEMMINI_COSA_ROCC(8, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_WS_CONFIG_BOUNDS: GEMMINI_COSA_ROCC(9, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_WS_CONFIG_ADDRS_AB: GEMMINI_COSA_ROCC(10, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_WS_CONFIG_ADDRS_DC: GEMMINI_COSA_ROCC(11, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_WS_CONFIG_STRIDES_AB: GEMMINI_COSA_ROCC(12, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_WS_CONFIG_STRIDES_DC: GEMMINI_COSA_ROCC(13, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_CONV_WS: GEMMINI_COSA_ROCC(15, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_CONV_WS_CONFIG_1: GEMMINI_COSA_ROCC(16, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_CONV_WS_CONFIG_2: GEMMINI_COSA_ROCC(17, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_CONV_WS_CONFIG_3: GEMMINI_COSA_ROCC(18, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_CONV_WS_CONFIG_4: GEMMINI_COSA_ROCC(19, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_CONV_WS_CONFIG_5: GEMMINI_COSA_ROCC(20, rs1, rs2); break;
    case GEMMINI_COSA_LOOP_CONV_WS_CONFIG_6: GEMMINI_COSA_ROCC(21, rs1, rs2); break;
    case GEMMINI_COSA_FENCE: __asm__ volatile("fence" : : : "memory"); break;
    default: break; /* not a command this header emits */
  }
}

static inline void gemmini_cosa_fence(void) { __asm__ volatile("fence" : : : "memory"); }

#else

/* defined by the including program: a logger, a functional model or an RTL co-simulation */
extern void gemmini_host_issue(uint64_t funct, uint64_t rs1, uint64_t rs2);
extern void gemmini_host_fence(void);

static inline void gemmini_cosa_issue(gemmini_cosa_cmd_t cmd) {
  if (cmd.funct == GEMMINI_COSA_FENCE)
    gemmini_host_fence();
  else
    gemmini_host_issue(cmd.funct, cmd.rs1, cmd.rs2);
}

static inline void gemmini_cosa_fence(void) { gemmini_host_fence(); }

#endif

/* ---- commands ---- */
static inline void gemmini_cosa_config_ex(int dataflow, int activation, int a_transpose, int b_transpose,
                                          uint32_t a_stride, float acc_scale, uint32_t c_stride, uint32_t os_shift) {
  gemmini_cosa_issue(gemmini_cosa_enc_config_ex(dataflow, activation, a_transpose, b_transpose, a_stride, acc_scale,
                                                c_stride, os_shift));
}

static inline void gemmini_cosa_config_ld(uint64_t stride_bytes, float scale, int shrunk, int id,
                                          uint32_t local_stride) {
  gemmini_cosa_issue(gemmini_cosa_enc_config_ld(stride_bytes, scale, shrunk, id, local_stride));
}

static inline void gemmini_cosa_config_st(uint32_t stride_bytes, int activation, float acc_scale) {
  gemmini_cosa_issue(gemmini_cosa_enc_config_st(stride_bytes, activation, acc_scale));
}

static inline void gemmini_cosa_mvin(uint64_t dram_addr, uint32_t local, uint32_t rows, uint32_t cols, int id) {
  gemmini_cosa_issue(gemmini_cosa_enc_mvin(dram_addr, local, rows, cols, id));
}

static inline void gemmini_cosa_mvout(uint64_t dram_addr, uint32_t local, uint32_t rows, uint32_t cols) {
  gemmini_cosa_issue(gemmini_cosa_enc_mvout(dram_addr, local, rows, cols));
}

static inline void gemmini_cosa_preload(uint32_t bd_local, uint32_t c_local, uint32_t bd_rows, uint32_t bd_cols,
                                        uint32_t c_rows, uint32_t c_cols) {
  gemmini_cosa_issue(gemmini_cosa_enc_preload(bd_local, c_local, bd_rows, bd_cols, c_rows, c_cols));
}

static inline void gemmini_cosa_compute_preloaded(uint32_t a_local, uint32_t bd_local, uint32_t a_rows,
                                                  uint32_t a_cols, uint32_t bd_rows, uint32_t bd_cols) {
  gemmini_cosa_issue(gemmini_cosa_enc_compute_preloaded(a_local, bd_local, a_rows, a_cols, bd_rows, bd_cols));
}

static inline void gemmini_cosa_compute_accumulated(uint32_t a_local, uint32_t bd_local, uint32_t a_rows,
                                                    uint32_t a_cols, uint32_t bd_rows, uint32_t bd_cols) {
  gemmini_cosa_issue(gemmini_cosa_enc_compute_accumulated(a_local, bd_local, a_rows, a_cols, bd_rows, bd_cols));
}

static inline void gemmini_cosa_flush(int skip) { gemmini_cosa_issue(gemmini_cosa_enc_flush(skip)); }

/* ---- loop instructions ---- */
static inline void gemmini_cosa_loop_ws_config_bounds(uint32_t pad_I, uint32_t pad_J, uint32_t pad_K, uint32_t I,
                                                      uint32_t J, uint32_t K) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_ws_config_bounds(pad_I, pad_J, pad_K, I, J, K));
}

static inline void gemmini_cosa_loop_ws_config_addrs_ab(uint64_t A, uint64_t B) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_ws_config_addrs_ab(A, B));
}

static inline void gemmini_cosa_loop_ws_config_addrs_dc(uint64_t D, uint64_t C) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_ws_config_addrs_dc(D, C));
}

static inline void gemmini_cosa_loop_ws_config_strides_ab(uint64_t A_stride, uint64_t B_stride) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_ws_config_strides_ab(A_stride, B_stride));
}

static inline void gemmini_cosa_loop_ws_config_strides_dc(uint64_t D_stride, uint64_t C_stride) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_ws_config_strides_dc(D_stride, C_stride));
}

static inline void gemmini_cosa_loop_ws_start(uint32_t ex_accumulate, uint32_t full_C, uint32_t low_D, uint32_t act,
                                              uint32_t b_spad_id, uint32_t a_spad_id, uint32_t A_transpose,
                                              uint32_t B_transpose, uint32_t is_resadd) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_ws_start(ex_accumulate, full_C, low_D, act, b_spad_id, a_spad_id,
    A_transpose, B_transpose, is_resadd));
}

static inline void gemmini_cosa_loop_conv_ws_config_1(uint32_t batch_size, uint32_t in_row_dim,
                                                      uint32_t in_channels, uint32_t out_channels,
                                                      uint32_t out_row_dim, uint32_t pool_out_row_dim,
                                                      uint32_t out_col_dim, uint32_t stride, uint32_t padding) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_conv_ws_config_1(batch_size, in_row_dim, in_channels, out_channels,
    out_row_dim, pool_out_row_dim, out_col_dim, stride, padding));
}

static inline void gemmini_cosa_loop_conv_ws_config_2(uint32_t pool_padding, uint32_t pool_stride,
                                                      uint32_t pool_size, uint32_t pool_out_col_dim,
                                                      uint32_t kernel_dim, uint32_t pochs, uint32_t pocols,
                                                      uint32_t porows, uint32_t batches) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_conv_ws_config_2(pool_padding, pool_stride, pool_size, pool_out_col_dim,
    kernel_dim, pochs, pocols, porows, batches));
}

static inline void gemmini_cosa_loop_conv_ws_config_3(uint32_t lpad, uint32_t kchs, uint32_t kcols, uint32_t krows,
                                                      uint32_t in_col_dim, uint32_t plpad, uint32_t dpad,
                                                      uint32_t upad, uint32_t rpad) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_conv_ws_config_3(lpad, kchs, kcols, krows, in_col_dim, plpad, dpad, upad,
    rpad));
}

static inline void gemmini_cosa_loop_conv_ws_config_4(uint32_t kernel_dilation, uint32_t pdpad, uint32_t pupad,
                                                      uint32_t prpad, uint32_t orows, uint32_t ocols,
                                                      uint32_t out_stride, uint32_t weight_stride,
                                                      uint32_t in_stride) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_conv_ws_config_4(kernel_dilation, pdpad, pupad, prpad, orows, ocols,
    out_stride, weight_stride, in_stride));
}

static inline void gemmini_cosa_loop_conv_ws_config_5(uint64_t weights, uint64_t output) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_conv_ws_config_5(weights, output));
}

static inline void gemmini_cosa_loop_conv_ws_config_6(uint64_t bias, uint64_t input) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_conv_ws_config_6(bias, input));
}

static inline void gemmini_cosa_loop_conv_ws_start(uint32_t no_bias, uint32_t wrot180, uint32_t trans_output_1203,
                                                   uint32_t trans_weight_1203, uint32_t trans_weight_0132,
                                                   uint32_t trans_input_3120, uint32_t dw,
                                                   uint32_t max_pixels_per_row, uint32_t b_spad_id,
                                                   uint32_t a_spad_id, uint32_t no_pool, uint32_t downsample,
                                                   uint32_t input_dilated, uint32_t activation) {
  gemmini_cosa_issue(gemmini_cosa_enc_loop_conv_ws_start(no_bias, wrot180, trans_output_1203, trans_weight_1203,
    trans_weight_0132, trans_input_3120, dw, max_pixels_per_row, b_spad_id, a_spad_id, no_pool, downsample,
    input_dilated, activation));
}

/* every word of gemmini.h's gemmini_loop_ws(...): the same arguments in the same order */
static inline void gemmini_cosa_loop_ws(uint32_t I, uint32_t J, uint32_t K, uint32_t pad_I, uint32_t pad_J,
                                        uint32_t pad_K, uint64_t A, uint64_t B, uint64_t D, uint64_t C,
                                        uint64_t A_stride, uint64_t B_stride, uint64_t D_stride, uint64_t C_stride,
                                        uint32_t A_transpose, uint32_t B_transpose, uint32_t full_C, uint32_t low_D,
                                        uint32_t ex_accumulate, uint32_t act, uint32_t a_spad_id,
                                        uint32_t b_spad_id, uint32_t is_resadd) {
  gemmini_cosa_loop_ws_config_bounds(pad_I, pad_J, pad_K, I, J, K);
  gemmini_cosa_loop_ws_config_addrs_ab(A, B);
  gemmini_cosa_loop_ws_config_addrs_dc(D, C);
  gemmini_cosa_loop_ws_config_strides_ab(A_stride, B_stride);
  gemmini_cosa_loop_ws_config_strides_dc(D_stride, C_stride);
  gemmini_cosa_loop_ws_start(ex_accumulate, full_C, low_D, act, b_spad_id, a_spad_id, A_transpose, B_transpose,
    is_resadd);
}

/* every word of gemmini.h's gemmini_loop_conv_ws(...): the same arguments in the same order */
static inline void gemmini_cosa_loop_conv_ws(uint32_t batch_size, uint32_t in_row_dim, uint32_t in_col_dim,
                                             uint32_t in_channels, uint32_t out_channels, uint32_t out_row_dim,
                                             uint32_t out_col_dim, uint32_t pool_out_row_dim,
                                             uint32_t pool_out_col_dim, uint32_t stride, uint32_t padding,
                                             uint32_t kernel_dim, uint32_t kernel_dilation, uint32_t pool_size,
                                             uint32_t pool_stride, uint32_t pool_padding, uint32_t batches,
                                             uint32_t porows, uint32_t pocols, uint32_t pochs, uint32_t krows,
                                             uint32_t kcols, uint32_t kchs, uint32_t lpad, uint32_t rpad,
                                             uint32_t upad, uint32_t dpad, uint32_t plpad, uint32_t prpad,
                                             uint32_t pupad, uint32_t pdpad, uint32_t orows, uint32_t ocols,
                                             uint64_t weights, uint64_t output, uint64_t bias, uint64_t input,
                                             uint32_t no_bias, uint32_t no_pool, uint32_t downsample,
                                             uint32_t wrot180, uint32_t input_dilated, uint32_t activation,
                                             uint32_t trans_output_1203, uint32_t trans_weight_1203,
                                             uint32_t trans_weight_0132, uint32_t trans_input_3120,
                                             uint32_t max_pixels_per_row, uint32_t in_stride,
                                             uint32_t weight_stride, uint32_t out_stride, uint32_t dw,
                                             uint32_t a_spad_id, uint32_t b_spad_id) {
  gemmini_cosa_loop_conv_ws_config_1(batch_size, in_row_dim, in_channels, out_channels, out_row_dim,
    pool_out_row_dim, out_col_dim, stride, padding);
  gemmini_cosa_loop_conv_ws_config_2(pool_padding, pool_stride, pool_size, pool_out_col_dim, kernel_dim, pochs,
    pocols, porows, batches);
  gemmini_cosa_loop_conv_ws_config_3(lpad, kchs, kcols, krows, in_col_dim, plpad, dpad, upad, rpad);
  gemmini_cosa_loop_conv_ws_config_4(kernel_dilation, pdpad, pupad, prpad, orows, ocols, out_stride, weight_stride,
    in_stride);
  gemmini_cosa_loop_conv_ws_config_5(weights, output);
  gemmini_cosa_loop_conv_ws_config_6(bias, input);
  gemmini_cosa_loop_conv_ws_start(no_bias, wrot180, trans_output_1203, trans_weight_1203, trans_weight_0132,
    trans_input_3120, dw, max_pixels_per_row, b_spad_id, a_spad_id, no_pool, downsample, input_dilated, activation);
}

#ifdef __cplusplus
}
#endif

#endif /* GEMMINI_COSA_H */
