#include "cosim.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "Vgemmini_top.h"
#include "verilated.h"

// gemmini.numerics.scale_round: float32(value) * float32(scale) in float32,
// round half to even, saturate to a signed out_bits-bit integer.
extern "C" int gemmini_scale_round(int value, int scale_bits, int out_bits) {
  float scale;
  uint32_t bits = static_cast<uint32_t>(scale_bits);
  std::memcpy(&scale, &bits, sizeof scale);
  volatile float product = static_cast<float>(value) * scale;  // stays float32
  double rounded = std::nearbyint(static_cast<double>(product));  // default mode: half to even
  double lo = -std::ldexp(1.0, out_bits - 1), hi = std::ldexp(1.0, out_bits - 1) - 1.0;
  if (std::isnan(rounded)) rounded = 0.0;
  if (rounded < lo) rounded = lo;
  if (rounded > hi) rounded = hi;
  return static_cast<int>(static_cast<int64_t>(rounded));
}

static const char* reason_of(int code) {
  switch (code) {
    case 1: return "unknown or unsupported funct";
    case 2: return "rows outside 1..DIM";
    case 3: return "columns outside the limit";
    case 4: return "local address range outside the scratchpad/accumulator";
    case 5: return "unit used before its config command";
    case 6: return "unsupported configuration";
    case 7: return "the garbage address is not allowed here";
    case 8: return "scratchpad address with accumulator flag bits";
    case 9: return "main-memory span outside the memory";
    case 10: return "compute without a preceding preload";
    case 11: return "two preloads without a compute in between";
    case 12: return "compute_accumulated before the array was loaded";
    default: return "unknown error";
  }
}

Cosim::Cosim(uint8_t* image, uint64_t image_bytes, const CosimOptions& options)
    : top_(new Vgemmini_top), image_(image), image_bytes_(image_bytes), options_(options) {
  top_->mem_limit = image ? image_bytes : ~0ull;
  top_->cmd_valid = 0;
  top_->mem_req_ready = 1;
  top_->mem_resp_valid = 0;
  top_->reset = 1;
  for (int i = 0; i < 4; i++) {
    top_->clk = 0;
    top_->eval();
    top_->clk = 1;
    top_->eval();
  }
  top_->reset = 0;
  top_->clk = 0;
  top_->eval();
}

Cosim::~Cosim() {
  top_->final();
  delete top_;
}

bool Cosim::tick(bool offer_command) {
  auto start = std::chrono::steady_clock::now();
  // inputs of this cycle
  top_->cmd_valid = offer_command;
  if (!responses_.empty() && responses_.front().due <= cycles_) {
    top_->mem_resp_valid = 1;
    std::memcpy(&top_->mem_resp_data, responses_.front().data, 16);
    responses_.pop_front();
  } else {
    top_->mem_resp_valid = 0;
  }
  top_->clk = 0;
  top_->eval();
  // outputs before the edge
  bool taken = offer_command && top_->cmd_ready;
  if (top_->mem_req_valid) {
    uint64_t addr = top_->mem_req_addr;
    unsigned len = top_->mem_req_len;
    if (top_->mem_req_write) {
      std::memcpy(host(addr), &top_->mem_req_data, len);
      dma_write_bytes_ += len;
    } else {
      Response r;
      r.due = cycles_ + options_.mem_latency;
      std::memset(r.data, 0, sizeof r.data);
      std::memcpy(r.data, host(addr), len);
      responses_.push_back(r);
      dma_read_bytes_ += len;
    }
  }
  busy_[0] += top_->busy_load;
  busy_[1] += top_->busy_execute;
  busy_[2] += top_->busy_store;
  top_->clk = 1;
  top_->eval();
  cycles_++;
  wall_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return taken;
}

bool Cosim::check_stop() {
  if (stop_code_) return true;
  if (top_->error) {
    stop_code_ = 3;
    error_index_ = top_->error_index;
    error_code_ = top_->error_code;
    char buf[256];
    std::snprintf(buf, sizeof buf, "command %llu: %s (RTL error code %d)",
                  static_cast<unsigned long long>(error_index_), reason_of(error_code_), error_code_);
    error_message_ = buf;
    return true;
  }
  if (cycles_ >= options_.max_cycles) {
    stop_code_ = 4;
    error_index_ = commands_;
    char buf[256];
    std::snprintf(buf, sizeof buf, "cycle limit %llu reached at command %llu (debug state 0x%08x)",
                  static_cast<unsigned long long>(options_.max_cycles), static_cast<unsigned long long>(commands_),
                  static_cast<unsigned>(top_->debug_state));
    error_message_ = buf;
    return true;
  }
  return false;
}

bool Cosim::issue(uint64_t funct, uint64_t rs1, uint64_t rs2) {
  if (stopped()) return false;
  top_->cmd_funct = static_cast<uint8_t>(funct);
  top_->cmd_rs1 = rs1;
  top_->cmd_rs2 = rs2;
  while (!tick(true)) {
    if (check_stop()) return false;
  }
  top_->cmd_valid = 0;
  commands_++;
  // the front end flags an illegal command at the edge that takes it
  return !check_stop();
}

bool Cosim::fence() {
  if (stopped()) return false;
  while (!(top_->idle && responses_.empty())) {
    tick(false);
    if (check_stop()) return false;
  }
  return true;
}

void Cosim::write_report(const std::string& path) const {
  FILE* f = path.empty() ? stderr : std::fopen(path.c_str(), "w");
  if (!f) return;
  std::fprintf(f,
               "{\"cycles\": %llu, \"busy\": {\"load\": %llu, \"execute\": %llu, \"store\": %llu}, "
               "\"commands\": %llu, \"dma_read_bytes\": %llu, \"dma_write_bytes\": %llu, \"sim_seconds\": %.6f, ",
               static_cast<unsigned long long>(cycles_), static_cast<unsigned long long>(busy_[0]),
               static_cast<unsigned long long>(busy_[1]), static_cast<unsigned long long>(busy_[2]),
               static_cast<unsigned long long>(commands_), static_cast<unsigned long long>(dma_read_bytes_),
               static_cast<unsigned long long>(dma_write_bytes_), wall_seconds_);
  if (stop_code_) {
    std::fprintf(f,
                 "\"error\": {\"kind\": \"%s\", \"index\": %llu, \"code\": %d, \"reason\": \"%s\", "
                 "\"debug_state\": %u}}\n",
                 stop_code_ == 3 ? "rtl" : "cycle_limit", static_cast<unsigned long long>(error_index_),
                 error_code_, stop_code_ == 3 ? reason_of(error_code_) : "cycle limit reached",
                 static_cast<unsigned>(top_->debug_state));
  } else {
    std::fprintf(f, "\"error\": null}\n");
  }
  if (f != stderr) std::fclose(f);
}
