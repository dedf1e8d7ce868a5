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

#ifdef __cplusplus
}
#endif

#endif /* GEMMINI_COSA_H */
