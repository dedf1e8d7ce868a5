// Co-simulation harness for the Gemmini-compatible RTL.
//
// Cosim drives the Verilated model one clock at a time: it presents a
// command on the command port until the front end takes it, serves the DMA
// port from main memory (reads return after a fixed latency, in order;
// writes are applied at once), and at a fence runs the clock until the
// accelerator is idle.  Main memory is either a byte image (addresses are
// offsets into it and the RTL checks spans against its size) or the host
// process itself (addresses are host pointers).  Every run has a cycle limit.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <string>

class Vgemmini_top;

struct CosimOptions {
  uint64_t mem_latency = 16;      // cycles from a DMA read request to its data
  uint64_t max_cycles = 200000000;  // the run stops (error) beyond this
};

class Cosim {
 public:
  // image == nullptr: main-memory addresses are host pointers.
  Cosim(uint8_t* image, uint64_t image_bytes, const CosimOptions& options);
  ~Cosim();

  // Push one command into the model; returns false once the run has stopped.
  bool issue(uint64_t funct, uint64_t rs1, uint64_t rs2);
  // Run until the accelerator is idle; returns false once the run has stopped.
  bool fence();

  bool stopped() const { return stop_code_ != 0; }
  // Write the JSON report (cycles, busy cycles per unit, commands, error).
  void write_report(const std::string& path) const;
  std::string error_message() const { return error_message_; }
  int exit_code() const { return stop_code_; }

 private:
  bool tick(bool offer_command);  // one clock; returns whether the command was taken
  bool check_stop();
  uint8_t* host(uint64_t addr) const { return image_ ? image_ + addr : reinterpret_cast<uint8_t*>(addr); }

  struct Response {
    uint64_t due;
    uint8_t data[16];
  };

  Vgemmini_top* top_;
  uint8_t* image_;
  uint64_t image_bytes_;
  CosimOptions options_;
  std::deque<Response> responses_;
  uint64_t cycles_ = 0;
  uint64_t busy_[3] = {0, 0, 0};
  uint64_t commands_ = 0;
  uint64_t dma_read_bytes_ = 0;
  uint64_t dma_write_bytes_ = 0;
  int stop_code_ = 0;  // 0 running, 3 RTL error, 4 cycle limit
  uint64_t error_index_ = 0;
  int error_code_ = 0;
  std::string error_message_;
  double wall_seconds_ = 0.0;
};
