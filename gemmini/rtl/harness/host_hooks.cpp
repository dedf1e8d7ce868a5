// Host hooks of gemmini_cosa.h for a natively compiled Gemmini C program:
// every command goes into the Verilated model, every fence runs it until
// idle, and main-memory addresses are the program's own pointers.
// Environment: COSA_RTL_REPORT (report path; default stderr),
// COSA_RTL_MEM_LATENCY, COSA_RTL_MAX_CYCLES.  On an RTL error or the cycle
// limit the program stops with exit status 3 or 4 after writing the report.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cosim.h"
#include "verilated.h"

static Cosim* g_sim = nullptr;

static std::string report_path() {
  const char* p = std::getenv("COSA_RTL_REPORT");
  return p ? std::string(p) : std::string();
}

static void finish() {
  if (!g_sim) return;
  g_sim->fence();
  g_sim->write_report(report_path());
}

static void stop_run() {
  std::fprintf(stderr, "gemmini-rtl: %s\n", g_sim->error_message().c_str());
  g_sim->write_report(report_path());
  std::_Exit(g_sim->exit_code());
}

static Cosim& sim() {
  if (!g_sim) {
    CosimOptions options;
    if (const char* v = std::getenv("COSA_RTL_MEM_LATENCY")) options.mem_latency = std::strtoull(v, nullptr, 0);
    if (const char* v = std::getenv("COSA_RTL_MAX_CYCLES")) options.max_cycles = std::strtoull(v, nullptr, 0);
    g_sim = new Cosim(nullptr, 0, options);
    std::atexit(finish);
  }
  return *g_sim;
}

extern "C" void gemmini_host_issue(uint64_t funct, uint64_t rs1, uint64_t rs2) {
  if (!sim().issue(funct, rs1, rs2)) stop_run();
}

// Run until idle without issuing a command (for drivers that read results back).
extern "C" void gemmini_rtl_drain(void) {
  if (!sim().fence()) stop_run();
}

extern "C" void gemmini_host_fence(void) {
  if (!sim().issue(128, 0, 0) || !sim().fence()) stop_run();
}
