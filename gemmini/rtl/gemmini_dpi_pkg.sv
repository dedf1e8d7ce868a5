// Simulation-only arithmetic supplied by the co-simulation harness.
package gemmini_dpi_pkg;
  // round_half_even(float32(value) * float32(scale)), computed in float32,
  // then saturated to a signed out_bits-bit integer (gemmini.numerics.scale_round).
  import "DPI-C" function int gemmini_scale_round(input int value, input int scale_bits, input int out_bits);
endpackage
