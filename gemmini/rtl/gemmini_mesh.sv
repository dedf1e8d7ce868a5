// DIM x DIM systolic mesh with input skew and output de-skew.
//
// One "slot" per cycle enters at the mesh edge: an A vector (element i goes
// to row i), a vertical vector (element n goes to column n: WS partial-sum
// seeds D, OS B operands) and a preload vector (element n to column n).
// Row i of A is delayed i cycles and column n of the vertical vector n cycles,
// so the operands of one slot meet in PE (k, n) at slot time + k + n.  The WS
// results leave the bottom row skewed by column and are de-skewed, so a slot
// entered at cycle t yields its result row at cycle t + 2*DIM - 1 (LATENCY).
// The preload vector is not skewed: its row tag selects the PE row that
// latches it.  OS results leave through the readout chain at the top of each
// column, one value per (row, column), tagged with the row.
module gemmini_mesh #(
  parameter int DIM = 4,
  parameter int ROW_BITS = (DIM > 1) ? $clog2(DIM) : 1
) (
  input  logic                        clk,
  input  logic                        os_mode,
  input  logic                        a_valid,
  input  logic [DIM-1:0][7:0]         a_vec,
  input  logic                        a_buf,
  input  logic                        a_last,
  input  logic                        a_parity,
  input  logic [DIM-1:0][31:0]        v_vec,
  input  logic                        pl_valid,
  input  logic [ROW_BITS-1:0]         pl_row,
  input  logic                        pl_buf,
  input  logic [DIM-1:0][31:0]        pl_vec,
  output logic [DIM-1:0][31:0]        out_vec,
  output logic [DIM-1:0]              ro_valid,
  output logic [DIM-1:0][ROW_BITS-1:0] ro_row,
  output logic [DIM-1:0]              ro_parity,
  output logic [DIM-1:0][31:0]        ro_data
);

  // Horizontal wires: h_*[i][j] is the input of PE (i, j); column DIM is the right edge.
  logic                 h_valid [DIM][DIM+1];
  logic signed [7:0]    h_a     [DIM][DIM+1];
  logic                 h_buf   [DIM][DIM+1];
  logic                 h_last  [DIM][DIM+1];
  logic                 h_par   [DIM][DIM+1];
  // Vertical wires: v_*[i][j] is the input of PE (i, j) from above; row DIM is the bottom edge.
  logic signed [31:0]   v_w     [DIM+1][DIM];
  logic                 pl_v    [DIM+1][DIM];
  logic [ROW_BITS-1:0]  pl_r    [DIM+1][DIM];
  logic                 pl_b    [DIM+1][DIM];
  logic signed [31:0]   pl_d    [DIM+1][DIM];
  // Readout wires: ro_*[i][j] is the input of PE (i, j) from below; row DIM is the (empty) bottom.
  logic                 ro_v    [DIM+1][DIM];
  logic [ROW_BITS-1:0]  ro_r    [DIM+1][DIM];
  logic                 ro_p    [DIM+1][DIM];
  logic signed [31:0]   ro_d    [DIM+1][DIM];

  for (genvar i = 0; i < DIM; i++) begin : g_row_skew
    logic [11:0] skewed;
    gemmini_delay #(.WIDTH(12), .DEPTH(i)) u_skew (
      .clk, .d({a_valid, a_vec[i], a_buf, a_last, a_parity}), .q(skewed));
    assign {h_valid[i][0], h_a[i][0], h_buf[i][0], h_last[i][0], h_par[i][0]} = skewed;
  end

  for (genvar j = 0; j < DIM; j++) begin : g_col_edges
    logic [31:0] skewed_v;
    gemmini_delay #(.WIDTH(32), .DEPTH(j)) u_skew (.clk, .d(v_vec[j]), .q(skewed_v));
    assign v_w[0][j]  = skewed_v;
    assign pl_v[0][j] = pl_valid;
    assign pl_r[0][j] = pl_row;
    assign pl_b[0][j] = pl_buf;
    assign pl_d[0][j] = pl_vec[j];
    assign ro_v[DIM][j] = 1'b0;
    assign ro_r[DIM][j] = '0;
    assign ro_p[DIM][j] = 1'b0;
    assign ro_d[DIM][j] = '0;
    // De-skew the bottom edge: column j left the mesh j cycles after column 0.
    logic [31:0] deskewed;
    gemmini_delay #(.WIDTH(32), .DEPTH(DIM - 1 - j)) u_deskew (.clk, .d(v_w[DIM][j]), .q(deskewed));
    assign out_vec[j]   = deskewed;
    assign ro_valid[j]  = ro_v[0][j];
    assign ro_row[j]    = ro_r[0][j];
    assign ro_parity[j] = ro_p[0][j];
    assign ro_data[j]   = ro_d[0][j];
  end

  for (genvar i = 0; i < DIM; i++) begin : g_pe_row
    for (genvar j = 0; j < DIM; j++) begin : g_pe_col
      gemmini_pe #(.ROW(i), .ROW_BITS(ROW_BITS)) u_pe (
        .clk, .os_mode,
        .a_valid_in(h_valid[i][j]), .a_in(h_a[i][j]), .buf_in(h_buf[i][j]),
        .last_in(h_last[i][j]), .parity_in(h_par[i][j]),
        .a_valid_out(h_valid[i][j+1]), .a_out(h_a[i][j+1]), .buf_out(h_buf[i][j+1]),
        .last_out(h_last[i][j+1]), .parity_out(h_par[i][j+1]),
        .v_in(v_w[i][j]), .v_out(v_w[i+1][j]),
        .pl_valid_in(pl_v[i][j]), .pl_row_in(pl_r[i][j]), .pl_buf_in(pl_b[i][j]), .pl_data_in(pl_d[i][j]),
        .pl_valid_out(pl_v[i+1][j]), .pl_row_out(pl_r[i+1][j]), .pl_buf_out(pl_b[i+1][j]),
        .pl_data_out(pl_d[i+1][j]),
        .ro_valid_in(ro_v[i+1][j]), .ro_row_in(ro_r[i+1][j]), .ro_parity_in(ro_p[i+1][j]),
        .ro_data_in(ro_d[i+1][j]),
        .ro_valid_out(ro_v[i][j]), .ro_row_out(ro_r[i][j]), .ro_parity_out(ro_p[i][j]),
        .ro_data_out(ro_d[i][j]));
    end
  end
endmodule
