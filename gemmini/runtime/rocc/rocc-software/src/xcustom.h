/*
 * RoCC instruction macros for building against Gemmini's library (include/gemmini.h of
 * ucb-bar/gemmini-rocc-tests) when its checkout lacks the rocc-software submodule.  Our own
 * definitions, written from the RoCC instruction format: opcode custom-0..3 selected by `x`,
 * funct3 = (xd, xs1, xs2) flags, funct7 = the command.  The build adds this directory to the include
 * path only when <checkout>/rocc-software/src/xcustom.h is missing.  Each macro is a block statement, as
 * gemmini.h expects (it uses some without a trailing semicolon).
 */
#ifndef GEMMINI_COSA_XCUSTOM_H
#define GEMMINI_COSA_XCUSTOM_H

#include <stdint.h>

#define XCUSTOM_ACC 3
/* the major opcode of custom-0..3 */
#define GEMMINI_COSA_CUSTOM_OPCODE(x) ((x) == 0 ? 0x0B : (x) == 1 ? 0x2B : (x) == 2 ? 0x5B : 0x7B)

/* no destination, two sources (funct3 = 3) */
#define ROCC_INSTRUCTION_0_R_R(x, rs1, rs2, funct)                                                  \
  {                                                                                                \
    uint64_t gemmini_cosa_rs1_ = (uint64_t)(rs1), gemmini_cosa_rs2_ = (uint64_t)(rs2);             \
    __asm__ volatile(".insn r %2, 3, %3, x0, %0, %1"                                               \
                     :                                                                            \
                     : "r"(gemmini_cosa_rs1_), "r"(gemmini_cosa_rs2_), "i"(GEMMINI_COSA_CUSTOM_OPCODE(x)), \
                       "i"(funct)                                                                 \
                     : "memory");                                                                 \
  }

/* a destination and two sources (funct3 = 7) */
#define ROCC_INSTRUCTION(x, rd, rs1, rs2, funct)                                                    \
  {                                                                                                \
    uint64_t gemmini_cosa_rs1_ = (uint64_t)(rs1), gemmini_cosa_rs2_ = (uint64_t)(rs2);             \
    __asm__ volatile(".insn r %3, 7, %4, %0, %1, %2"                                               \
                     : "=r"(rd)                                                                   \
                     : "r"(gemmini_cosa_rs1_), "r"(gemmini_cosa_rs2_), "i"(GEMMINI_COSA_CUSTOM_OPCODE(x)), \
                       "i"(funct)                                                                 \
                     : "memory");                                                                 \
  }

#endif
