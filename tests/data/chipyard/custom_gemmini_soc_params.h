// Gemmini parameters of the Chipyard 1.10.0 SoC "CustomGemminiSoCConfig" (Gemmini f13847e, default
// configuration), in gemmini_params.h form.  Written by hand from the facts of its generated Verilog
// (github Lefteris-B/DualCore-Small-gemmini @ 5060110): a 16x16 mesh of int8 PEs (256 PE instances);
// scratchpad: 4 banks (spad_mems_0..3) of 4096 rows x 128 bits = 256 KiB; accumulator: 2 banks
// (acc_mems_0..1) of 512 rows x 512 bits (16 x int32) = 64 KiB; LoopMatmul and LoopConv present.
#ifndef GEMMINI_PARAMS_H
#define GEMMINI_PARAMS_H

#include <stdint.h>

#define DIM 16
#define BANK_NUM 4
#define BANK_ROWS 4096
#define ACC_ROWS 1024   // both accumulator banks
#define MAX_BYTES 64
#define MAX_BLOCK_LEN (MAX_BYTES/(DIM*1))
#define MAX_BLOCK_LEN_ACC (MAX_BYTES/(DIM*4))

typedef int8_t elem_t;
typedef int32_t acc_t;

#define ROW_ALIGN(x) (x)

#endif
