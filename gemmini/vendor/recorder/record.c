/* Record the RoCC command stream that Gemmini's C library (gemmini.h) issues
 * for one or more library calls, on the host.
 *
 * Build (done by gemmini/vendor/record.py):
 *   cc -std=gnu11 -O0 -I<this dir>/shim -I<gemmini-rocc-tests checkout> record.c -lm
 * The shim directory comes first, so the library's RoCC macros call
 * gemmini_record_command() below.  Inline assembly is neutralised (see the two
 * #defines before the library's headers): `asm volatile("fence")` becomes a
 * call that records the pseudo-command FENCE (funct 128); any other asm string
 * is recorded as funct 129 (none is expected on the paths we call).
 *
 * Input (stdin), one directive per line:
 *   arena BASE BYTES           map BYTES at address BASE (MAP_FIXED_NOREPLACE)
 *   buffer NAME OFFSET         a buffer at BASE + OFFSET (up to 16 buffers)
 *   call FN ARG...             call library function FN with its arguments in
 *                              the function's own parameter order; a pointer
 *                              argument is NAME+BYTES or 0 (NULL), a float is
 *                              written as %a/%g text, everything else an integer
 * Output (stdout): {"stream": [[funct, rs1, rs2], ...]} with decimal integers.
 * A library assertion prints its message and exits 1, as on the target. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <math.h>
#include <limits.h>
#include <stdbool.h>
#include <errno.h>
#include <sys/mman.h>

#ifndef MAP_FIXED_NOREPLACE /* older kernels and other systems: a hint, checked below */
#define MAP_FIXED_NOREPLACE 0
#endif

#define RECORD_FENCE 128u
#define RECORD_OTHER_ASM 129u

static uint64_t *rec_cmds;
static size_t rec_len, rec_cap;

void gemmini_record_command(unsigned funct, uint64_t rs1, uint64_t rs2) {
  if (rec_len == rec_cap) {
    rec_cap = rec_cap ? 2 * rec_cap : 4096;
    rec_cmds = realloc(rec_cmds, rec_cap * 3 * sizeof(uint64_t));
    if (!rec_cmds) { fprintf(stderr, "recorder: out of memory\n"); exit(3); }
  }
  rec_cmds[3 * rec_len] = funct;
  rec_cmds[3 * rec_len + 1] = rs1;
  rec_cmds[3 * rec_len + 2] = rs2;
  rec_len++;
}

static void gemmini_record_asm(const char *text) {
  gemmini_record_command(strcmp(text, "\"fence\"") == 0 ? RECORD_FENCE : RECORD_OTHER_ASM, 0, 0);
}

/* `asm volatile("fence")` -> ` gemmini_record_asm("\"fence\"")`.  `volatile` is only
 * replaced where a parenthesis follows it (a function-like macro), so type
 * qualifiers stay as they are.  All system headers are included above. */
#define asm
#define volatile(...) gemmini_record_asm(#__VA_ARGS__)

#include "include/gemmini.h"
#include "include/gemmini_nn.h"

#undef asm
#undef volatile

/* ------------------------------------------------------------------------ */

#define MAX_BUFFERS 16
#define MAX_ARGS 64
static char buf_names[MAX_BUFFERS][64];
static uint64_t buf_offsets[MAX_BUFFERS];
static int n_buffers;
static uint64_t arena_base;

static void fail(const char *what, const char *detail) {
  fprintf(stderr, "recorder: %s: %s\n", what, detail);
  exit(2);
}

static void *parse_ptr(const char *tok) {
  if (strcmp(tok, "0") == 0) return NULL;
  const char *plus = strchr(tok, '+');
  if (!plus) fail("pointer argument must be NAME+BYTES or 0", tok);
  size_t len = (size_t)(plus - tok);
  for (int i = 0; i < n_buffers; i++)
    if (strlen(buf_names[i]) == len && strncmp(buf_names[i], tok, len) == 0)
      return (void *)(uintptr_t)(arena_base + buf_offsets[i] + strtoull(plus + 1, NULL, 10));
  fail("unknown buffer", tok);
  return NULL;
}

static long long I(char **a, int k) { return strtoll(a[k], NULL, 10); }
static float F(char **a, int k) { return strtof(a[k], NULL); }
static void *P(char **a, int k) { return parse_ptr(a[k]); }

static void need(int got, int want, const char *fn) {
  if (got != want) {
    char msg[128];
    snprintf(msg, sizeof msg, "%s takes %d arguments, got %d", fn, want, got);
    fail("bad call", msg);
  }
}

static void do_call(const char *fn, char **a, int n) {
  if (strcmp(fn, "tiled_matmul_auto") == 0) {
    need(n, 24, fn);
    tiled_matmul_auto(I(a,0), I(a,1), I(a,2), P(a,3), P(a,4), P(a,5), P(a,6),
        I(a,7), I(a,8), I(a,9), I(a,10), F(a,11), F(a,12), (scale_acc_t)F(a,13),
        I(a,14), F(a,15), F(a,16), I(a,17), I(a,18), I(a,19), I(a,20), I(a,21), I(a,22),
        (enum tiled_matmul_type_t)I(a,23));
  } else if (strcmp(fn, "tiled_matmul_nn_auto") == 0) {
    need(n, 12, fn);
    tiled_matmul_nn_auto(I(a,0), I(a,1), I(a,2), P(a,3), P(a,4), P(a,5), P(a,6),
        I(a,7), F(a,8), I(a,9), (enum tiled_matmul_type_t)I(a,10), I(a,11), "layer");
  } else if (strcmp(fn, "tiled_conv_auto") == 0) {
    need(n, 27, fn);
    tiled_conv_auto(I(a,0), I(a,1), I(a,2), I(a,3), I(a,4), I(a,5), I(a,6),
        I(a,7), I(a,8), I(a,9), I(a,10), I(a,11),
        I(a,12), I(a,13), I(a,14), I(a,15), I(a,16),
        P(a,17), P(a,18), P(a,19), P(a,20),
        I(a,21), F(a,22), I(a,23), I(a,24), I(a,25), (enum tiled_matmul_type_t)I(a,26));
  } else if (strcmp(fn, "tiled_conv_stride_auto") == 0) {
    need(n, 30, fn);
    tiled_conv_stride_auto(I(a,0), I(a,1), I(a,2), I(a,3), I(a,4), I(a,5), I(a,6),
        I(a,7), I(a,8), I(a,9), I(a,10), I(a,11),
        I(a,12), I(a,13), I(a,14),
        I(a,15), I(a,16), I(a,17), I(a,18), I(a,19),
        P(a,20), P(a,21), P(a,22), P(a,23),
        I(a,24), F(a,25), I(a,26), I(a,27), I(a,28), (enum tiled_matmul_type_t)I(a,29));
  } else if (strcmp(fn, "tiled_conv_dw_auto") == 0) {
    need(n, 19, fn);
    tiled_conv_dw_auto(I(a,0), I(a,1), I(a,2), I(a,3), I(a,4), I(a,5), I(a,6), I(a,7), I(a,8),
        P(a,9), P(a,10), P(a,11), P(a,12),
        I(a,13), F(a,14), I(a,15), I(a,16), I(a,17), (enum tiled_matmul_type_t)I(a,18));
  } else if (strcmp(fn, "tiled_conv_downsample") == 0) {
    need(n, 17, fn);
    tiled_conv_downsample(I(a,0), I(a,1), I(a,2), I(a,3), I(a,4), I(a,5), I(a,6),
        I(a,7), I(a,8), I(a,9),
        P(a,10), P(a,11), P(a,12), P(a,13),
        I(a,14), F(a,15), (enum tiled_matmul_type_t)I(a,16));
  } else {
    fail("unknown library function", fn);
  }
}

int main(void) {
  static char line[8192];
  while (fgets(line, sizeof line, stdin)) {
    char *toks[MAX_ARGS + 2];
    int n = 0;
    for (char *t = strtok(line, " \t\r\n"); t && n < MAX_ARGS + 2; t = strtok(NULL, " \t\r\n")) toks[n++] = t;
    if (n == 0) continue;
    if (strcmp(toks[0], "arena") == 0 && n == 3) {
      arena_base = strtoull(toks[1], NULL, 0);
      size_t bytes = strtoull(toks[2], NULL, 0);
      bytes = (bytes + 4095) & ~(size_t)4095;
      void *p = mmap((void *)(uintptr_t)arena_base, bytes ? bytes : 4096, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED || (uint64_t)(uintptr_t)p != arena_base) fail("cannot map the arena", strerror(errno));
    } else if (strcmp(toks[0], "buffer") == 0 && n == 3) {
      if (n_buffers == MAX_BUFFERS) fail("too many buffers", toks[1]);
      snprintf(buf_names[n_buffers], sizeof buf_names[0], "%s", toks[1]);
      buf_offsets[n_buffers++] = strtoull(toks[2], NULL, 0);
    } else if (strcmp(toks[0], "call") == 0 && n >= 2) {
      if (!arena_base) fail("call before arena", toks[1]);
      do_call(toks[1], toks + 2, n - 2);
    } else {
      fail("unknown directive", toks[0]);
    }
  }
  printf("{\"stream\": [");
  for (size_t i = 0; i < rec_len; i++)
    printf("%s[%llu, %llu, %llu]", i ? ", " : "", (unsigned long long)rec_cmds[3 * i],
           (unsigned long long)rec_cmds[3 * i + 1], (unsigned long long)rec_cmds[3 * i + 2]);
  printf("]}\n");
  return 0;
}
