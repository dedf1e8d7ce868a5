// One processing element of the DIM x DIM systolic mesh.
//
// Data moves register to register: the A operand (int8) enters from the left
// and leaves to the right one cycle later; the vertical operand enters from
// above and leaves below one cycle later.  What the vertical path carries
// depends on the dataflow:
//   WS: a 32-bit partial sum; out_v = in_v + a * weight[buf].
//   OS: the B operand (int8, sign-extended); the PE adds a * b to its own
//       32-bit accumulator acc[buf].
// The A operand carries its buffer select (`buf`) and an OS "last" flag with
// it, so a buffer switch sweeps the mesh exactly as skewed as the data does.
//
// Two more vertical chains:
//   preload chain (downward): writes weight[buf] (WS) or acc[buf] (OS) of the
//     PE whose row index equals the tag `pl_row`;
//   readout chain (upward, OS only): when an A slot flagged `last` passes,
//     the PE inserts its final accumulator value, tagged with its row, into
//     the chain, which shifts it towards row 0 one row per cycle.
module gemmini_pe #(
  parameter int ROW = 0,
  parameter int ROW_BITS = 4
) (
  input  logic                       clk,
  input  logic                       os_mode,
  // horizontal A path
  input  logic                       a_valid_in,
  input  logic signed [7:0]          a_in,
  input  logic                       buf_in,
  input  logic                       last_in,
  input  logic                       parity_in,
  output logic                       a_valid_out,
  output logic signed [7:0]          a_out,
  output logic                       buf_out,
  output logic                       last_out,
  output logic                       parity_out,
  // vertical path: partial sum (WS) or B operand (OS)
  input  logic signed [31:0]         v_in,
  output logic signed [31:0]         v_out,
  // preload chain (downward)
  input  logic                       pl_valid_in,
  input  logic [ROW_BITS-1:0]        pl_row_in,
  input  logic                       pl_buf_in,
  input  logic signed [31:0]         pl_data_in,
  output logic                       pl_valid_out,
  output logic [ROW_BITS-1:0]        pl_row_out,
  output logic                       pl_buf_out,
  output logic signed [31:0]         pl_data_out,
  // readout chain (upward)
  input  logic                       ro_valid_in,
  input  logic [ROW_BITS-1:0]        ro_row_in,
  input  logic                       ro_parity_in,
  input  logic signed [31:0]         ro_data_in,
  output logic                       ro_valid_out,
  output logic [ROW_BITS-1:0]        ro_row_out,
  output logic                       ro_parity_out,
  output logic signed [31:0]         ro_data_out
);
  logic signed [7:0]  weight [2];
  logic signed [31:0] acc [2];

  wire signed [31:0] product = 32'(a_in) * (os_mode ? 32'(signed'(v_in[7:0])) : 32'(weight[buf_in]));
  wire signed [31:0] acc_next = acc[buf_in] + product;
  wire               capture = os_mode && a_valid_in && last_in;
  wire               pl_hit = pl_valid_in && (pl_row_in == ROW_BITS'(ROW));

  always_ff @(posedge clk) begin
    a_valid_out <= a_valid_in;
    a_out       <= a_in;
    buf_out     <= buf_in;
    last_out    <= last_in;
    parity_out  <= parity_in;
    v_out       <= os_mode ? v_in : v_in + product;

    pl_valid_out <= pl_valid_in;
    pl_row_out   <= pl_row_in;
    pl_buf_out   <= pl_buf_in;
    pl_data_out  <= pl_data_in;

    if (os_mode && a_valid_in) acc[buf_in] <= acc_next;
    // The controller never preloads the buffer that A slots are using.
    if (pl_hit) begin
      if (os_mode) acc[pl_buf_in] <= pl_data_in;
      else weight[pl_buf_in] <= pl_data_in[7:0];
    end

    if (capture) begin
      ro_valid_out  <= 1'b1;
      ro_row_out    <= ROW_BITS'(ROW);
      ro_parity_out <= parity_in;
      ro_data_out   <= acc_next;
    end else begin
      ro_valid_out  <= ro_valid_in;
      ro_row_out    <= ro_row_in;
      ro_parity_out <= ro_parity_in;
      ro_data_out   <= ro_data_in;
    end
  end
endmodule
