// A WIDTH-bit shift register of DEPTH stages (DEPTH = 0: a wire).
module gemmini_delay #(
  parameter int WIDTH = 8,
  parameter int DEPTH = 1
) (
  input  logic             clk,
  input  logic [WIDTH-1:0] d,
  output logic [WIDTH-1:0] q
);
  if (DEPTH == 0) begin : g_wire
    assign q = d;
  end else begin : g_regs
    logic [WIDTH-1:0] stages [DEPTH];
    always_ff @(posedge clk) begin
      stages[0] <= d;
      for (int i = 1; i < DEPTH; i++) stages[i] <= stages[i-1];
    end
    assign q = stages[DEPTH-1];
  end
endmodule
