// Banked single-ported SRAM: ROWS rows of DIM elements of EW bits, split into
// BANKS equal banks of consecutive rows.  Each bank serves one access per
// cycle; NPORTS requesters compete for it with fixed priority (port 0
// first).  A granted read returns its row on the next cycle; a granted write
// stores the masked elements, or adds them (wrapping) when `accumulate`.
module gemmini_sram #(
  parameter int DIM = 4,
  parameter int EW = 8,
  parameter int ROWS = 1024,
  parameter int BANKS = 4,
  parameter int NPORTS = 7
) (
  input  logic                           clk,
  input  logic [NPORTS-1:0]              req,
  input  logic [NPORTS-1:0]              we,
  input  logic [NPORTS-1:0]              accumulate,
  input  logic [NPORTS-1:0][31:0]        addr,
  input  logic [NPORTS-1:0][DIM-1:0][EW-1:0] wdata,
  input  logic [NPORTS-1:0][DIM-1:0]     wmask,
  output logic [NPORTS-1:0]              gnt,
  output logic [NPORTS-1:0][DIM-1:0][EW-1:0] rdata
);
  localparam int BANK_ROWS = ROWS / BANKS;

  logic [DIM-1:0][EW-1:0] mem [ROWS];

  function automatic int unsigned bank_of(input logic [31:0] a);
    return int'(a) / BANK_ROWS;
  endfunction

  always_comb begin
    logic [BANKS-1:0] taken;
    taken = '0;
    for (int p = 0; p < NPORTS; p++) begin
      gnt[p] = 1'b0;
      if (req[p] && !taken[bank_of(addr[p])]) begin
        gnt[p] = 1'b1;
        taken[bank_of(addr[p])] = 1'b1;
      end
    end
  end

  always_ff @(posedge clk) begin
    for (int p = 0; p < NPORTS; p++) begin
      if (gnt[p]) begin
        if (we[p]) begin
          for (int e = 0; e < DIM; e++) begin
            if (wmask[p][e]) mem[addr[p]][e] <= accumulate[p] ? mem[addr[p]][e] + wdata[p][e] : wdata[p][e];
          end
        end else begin
          rdata[p] <= mem[addr[p]];
        end
      end
    end
  end
endmodule
