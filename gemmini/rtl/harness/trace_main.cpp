// Runs a command log on a main-memory image:
//   trace_sim COMMANDS MEMORY_IN MEMORY_OUT REPORT [MEM_LATENCY [MAX_CYCLES]]
// COMMANDS: one "funct rs1 rs2" per line (integers, 0x-hex allowed); funct 128 is a fence.
// The memory image is read, updated by the run, and written back.  A final
// fence drains the accelerator.  Exit status: 0 ok, 3 RTL error, 4 cycle limit, 2 bad arguments.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "cosim.h"
#include "verilated.h"

int main(int argc, char** argv) {
  Verilated::commandArgs(1, argv);
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s COMMANDS MEMORY_IN MEMORY_OUT REPORT [MEM_LATENCY [MAX_CYCLES]]\n", argv[0]);
    return 2;
  }
  CosimOptions options;
  if (argc > 5) options.mem_latency = std::strtoull(argv[5], nullptr, 0);
  if (argc > 6) options.max_cycles = std::strtoull(argv[6], nullptr, 0);

  FILE* mf = std::fopen(argv[2], "rb");
  if (!mf) { std::perror(argv[2]); return 2; }
  std::fseek(mf, 0, SEEK_END);
  long size = std::ftell(mf);
  std::fseek(mf, 0, SEEK_SET);
  std::vector<uint8_t> image(static_cast<size_t>(size) + 64, 0);  // slack: beats never read past a span
  if (size > 0 && std::fread(image.data(), 1, static_cast<size_t>(size), mf) != static_cast<size_t>(size)) {
    std::perror(argv[2]);
    return 2;
  }
  std::fclose(mf);

  FILE* cf = std::fopen(argv[1], "r");
  if (!cf) { std::perror(argv[1]); return 2; }
  Cosim sim(image.data(), static_cast<uint64_t>(size), options);
  char line[512];
  while (std::fgets(line, sizeof line, cf)) {
    unsigned long long funct, rs1, rs2;
    if (std::sscanf(line, "%lli %lli %lli", &funct, &rs1, &rs2) != 3) continue;
    if (!sim.issue(funct, rs1, rs2)) break;
    if (funct == 128 && !sim.fence()) break;
  }
  std::fclose(cf);
  sim.fence();
  sim.write_report(argv[4]);
  FILE* of = std::fopen(argv[3], "wb");
  if (!of) { std::perror(argv[3]); return 2; }
  if (size > 0) std::fwrite(image.data(), 1, static_cast<size_t>(size), of);
  std::fclose(of);
  if (sim.stopped()) std::fprintf(stderr, "gemmini-rtl: %s\n", sim.error_message().c_str());
  return sim.exit_code();
}
