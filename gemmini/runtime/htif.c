/*
 * HTIF console and exit for bare-metal Gemmini programs (our own).
 *
 * The host (Spike's front end, or fesvr under a Chipyard simulator) watches the words `tohost` and
 * `fromhost`, found by name in the ELF.  Exit: tohost = (status << 1) | 1.  Console: a write system
 * call through the front end's syscall proxy (device 0, command 0): tohost holds the address of four
 * 64-bit words {64 (SYS_write), fd, buffer, length}; the host performs the write and sets fromhost.
 * stdout is a picolibc stream that buffers a line and writes it in one proxy call (one host round trip
 * per line, which matters on an RTL simulator); _exit() writes what is left.
 */
#include <stdint.h>
#include <stdio.h>

volatile uint64_t tohost __attribute__((section(".tohost"), aligned(64)));
volatile uint64_t fromhost __attribute__((section(".tohost"), aligned(64)));

#define HTIF_SYS_WRITE 64

static void htif_syscall(uint64_t number, uint64_t a0, uint64_t a1, uint64_t a2) {
  static volatile uint64_t magic[8] __attribute__((aligned(64)));
  magic[0] = number;
  magic[1] = a0;
  magic[2] = a1;
  magic[3] = a2;
  __asm__ volatile("fence" ::: "memory");
  while (tohost) {
  }
  tohost = (uint64_t)(uintptr_t)magic;
  while (!fromhost) {
  }
  fromhost = 0;
  __asm__ volatile("fence" ::: "memory");
}

static int htif_flush(FILE *file);

void _exit(int status) {
  htif_flush(stdout);
  __asm__ volatile("fence" ::: "memory");
  for (;;) {
    tohost = ((uint64_t)(unsigned)status << 1) | 1u;
  }
}

static char line[128];
static unsigned line_len;

static int htif_flush(FILE *file) {
  (void)file;
  if (line_len) {
    htif_syscall(HTIF_SYS_WRITE, 1, (uint64_t)(uintptr_t)line, line_len);
    line_len = 0;
  }
  return 0;
}

static int htif_putc(char c, FILE *file) {
  line[line_len++] = c;
  if (c == '\n' || line_len == sizeof line) htif_flush(file);
  return (unsigned char)c;
}

static FILE htif_stdout = FDEV_SETUP_STREAM(htif_putc, NULL, htif_flush, _FDEV_SETUP_WRITE);
FILE *const stdout = &htif_stdout;
FILE *const stderr = &htif_stdout;
FILE *const stdin = NULL;
