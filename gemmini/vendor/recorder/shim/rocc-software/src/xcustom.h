/* Recording stand-in for the RoCC instruction macros that Gemmini's C library
 * includes as "rocc-software/src/xcustom.h".  Put this directory ahead of the
 * library's own checkout on the include path: every RoCC command the library
 * issues becomes a call to gemmini_record_command(funct, rs1, rs2) instead of
 * an instruction.  rs1 and rs2 are converted to uint64_t.  On the paths the
 * recorder calls, every operand the library passes is already 64 bits wide
 * (a pointer, a size_t or a uint64_t expression), so this is the value the
 * RISC-V register would hold.
 * Written for the cosa-framework recorder; not part of Gemmini. */
#ifndef COSA_RECORDER_XCUSTOM_H
#define COSA_RECORDER_XCUSTOM_H

#include <stdint.h>

void gemmini_record_command(unsigned funct, uint64_t rs1, uint64_t rs2);

/* A block, not an expression: the library sometimes omits the semicolon. */
#define ROCC_INSTRUCTION_0_R_R(x, rs1, rs2, funct) \
  { gemmini_record_command((funct), (uint64_t)(rs1), (uint64_t)(rs2)); }

/* Counter reads (rd is written): recorded, and rd reads as 0. */
#define ROCC_INSTRUCTION(x, rd, rs1, rs2, funct) \
  { gemmini_record_command((funct), (uint64_t)(rs1), 0); (rd) = 0; }

#endif
