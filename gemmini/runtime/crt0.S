/*
 * Start-up code for bare-metal RV64 Gemmini programs (our own; see gemmini/runtime/README.md).
 *
 * Hart 0 sets the global pointer, the stack and the thread pointer (picolibc keeps errno in
 * thread-local storage), turns on the FPU and the accelerator (mstatus.FS and mstatus.XS: Rocket
 * refuses RoCC instructions while XS is off), zeroes .bss and .tbss, runs main() and leaves through
 * exit(), which reports the status to the host over HTIF.  Any other hart waits forever.  A trap
 * (an illegal instruction, a bad access) ends the run with status 128 + mcause (130: an illegal instruction), never a hang.
 */
  .section .text.init, "ax", @progbits
  .globl _start
_start:
  .option push
  .option norelax
  la gp, __global_pointer$
  .option pop
  csrr t0, mhartid
  bnez t0, .Lpark
  la t0, .Ltrap
  csrw mtvec, t0
  li t0, 0x00018000 | 0x00006000      /* mstatus.XS = 3 (bits 16:15), mstatus.FS = 3 (bits 14:13) */
  csrs mstatus, t0
  csrwi fcsr, 0
  la sp, __stack_top
  la tp, __tls_base
  la t0, __tbss_start                 /* zero .tbss and .bss */
  la t1, __tbss_end
1:
  bgeu t0, t1, 2f
  sd zero, 0(t0)
  addi t0, t0, 8
  j 1b
2:
  la t0, __bss_start
  la t1, __bss_end
3:
  bgeu t0, t1, 4f
  sd zero, 0(t0)
  addi t0, t0, 8
  j 3b
4:
  li a0, 0
  li a1, 0
  call main
  call exit
.Lpark:
  wfi
  j .Lpark

  .align 2
.Ltrap:
  csrr a0, mcause
  addi a0, a0, 0x80
  call _exit
