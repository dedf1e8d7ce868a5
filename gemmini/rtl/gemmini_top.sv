// Gemmini-compatible accelerator: command front end, load / execute / store
// units, the DIM x DIM systolic mesh (inside execute), banked scratchpad and
// accumulator, and one DMA port to main memory shared by loads (reads) and
// stores (writes) with round-robin arbitration.
//
// Memory port: a request is a read or a write of `mem_req_len` (1..BEAT)
// bytes at byte address `mem_req_addr`; writes carry their data; read data
// returns on `mem_resp_*` in request order, one beat per cycle.
module gemmini_top
  import gemmini_isa_pkg::*;
#(
  parameter int DIM = 4,
  parameter int SP_ROWS = 1024,
  parameter int SP_BANKS = 4,
  parameter int ACC_ROWS = 128,
  parameter int ACC_BANKS = 2,
  parameter int LD_Q = 8,
  parameter int EX_Q = 8,
  parameter int ST_Q = 2,
  parameter int MAX_MVIN_BYTES = 64,
  parameter int BEAT = 16,
  parameter int DMA_CREDITS = 64
) (
  input  logic        clk,
  input  logic        reset,
  input  logic        cmd_valid,
  output logic        cmd_ready,
  input  logic [7:0]  cmd_funct,
  input  logic [63:0] cmd_rs1,
  input  logic [63:0] cmd_rs2,
  input  logic [63:0] mem_limit,
  output logic        mem_req_valid,
  input  logic        mem_req_ready,
  output logic        mem_req_write,
  output logic [63:0] mem_req_addr,
  output logic [7:0]  mem_req_len,
  output logic [BEAT*8-1:0] mem_req_data,
  input  logic        mem_resp_valid,
  input  logic [BEAT*8-1:0] mem_resp_data,
  output logic        idle,
  output logic        busy_load,
  output logic        busy_execute,
  output logic        busy_store,
  output logic        error,
  output logic [7:0]  error_code,
  output logic [31:0] error_index,
  output logic [31:0] debug_state   // unit status bits, printed by the harness when a run is stopped
);
  localparam int NP = 7;  // memory ports: ex write, ex A, ex B/D, ex stage-1 (2), load write, store read
  localparam int P_EXW = 0, P_EXR = 1, P_LD = 5, P_ST = 6;

  // ---- front end ----
  logic [2:0]       iss_valid, iss_ready, iss_has_pre;
  logic [2:0][7:0]  iss_funct, iss_id;
  logic [2:0][63:0] iss_rs1, iss_rs2, iss_pre1, iss_pre2;
  logic [6:0]       done_valid;
  logic [6:0][7:0]  done_id;
  logic             fe_idle;
  logic [2:0]       fe_busy;

  // ---- LOOP_WS unroller ----
  logic        lw_valid, lw_ready, lw_busy;
  logic [7:0]  lw_funct;
  logic [63:0] lw_rs1, lw_rs2;
  logic [31:0] lw_origin;
  logic [2:0]  fe_room;
  gemmini_loop_ws #(.DIM(DIM), .SP_ROWS(SP_ROWS), .ACC_ROWS(ACC_ROWS), .MAX_MVIN_BYTES(MAX_MVIN_BYTES)) u_loop_ws (
    .clk, .reset, .in_valid(cmd_valid), .in_ready(cmd_ready), .in_funct(cmd_funct), .in_rs1(cmd_rs1),
    .in_rs2(cmd_rs2), .out_valid(lw_valid), .out_ready(lw_ready), .out_funct(lw_funct), .out_rs1(lw_rs1),
    .out_rs2(lw_rs2), .out_origin(lw_origin), .room(fe_room), .busy(lw_busy));

  gemmini_frontend #(.DIM(DIM), .SP_ROWS(SP_ROWS), .ACC_ROWS(ACC_ROWS), .MAX_MVIN_BYTES(MAX_MVIN_BYTES),
                     .LD_Q(LD_Q), .EX_Q(EX_Q), .ST_Q(ST_Q)) u_frontend (
    .clk, .reset, .cmd_valid(lw_valid), .cmd_ready(lw_ready), .cmd_funct(lw_funct), .cmd_rs1(lw_rs1),
    .cmd_rs2(lw_rs2), .cmd_origin(lw_origin), .room(fe_room), .mem_limit,
    .iss_valid, .iss_ready, .iss_funct, .iss_rs1, .iss_rs2, .iss_has_pre, .iss_pre1, .iss_pre2, .iss_id,
    .done_valid, .done_id, .idle(fe_idle), .unit_busy(fe_busy), .error, .error_code, .error_index);

  // ---- memories ----
  logic [NP-1:0]                  sp_req, sp_we, sp_acc_op, sp_gnt;
  logic [NP-1:0][31:0]            sp_addr;
  logic [NP-1:0][DIM-1:0][7:0]    sp_wdata, sp_rdata;
  logic [NP-1:0][DIM-1:0]         sp_wmask;
  logic [NP-1:0]                  acc_req, acc_we, acc_acc_op, acc_gnt;
  logic [NP-1:0][31:0]            acc_addr;
  logic [NP-1:0][DIM-1:0][31:0]   acc_wdata, acc_rdata;
  logic [NP-1:0][DIM-1:0]         acc_wmask;

  gemmini_sram #(.DIM(DIM), .EW(8), .ROWS(SP_ROWS), .BANKS(SP_BANKS), .NPORTS(NP)) u_sp (
    .clk, .req(sp_req), .we(sp_we), .accumulate(sp_acc_op), .addr(sp_addr), .wdata(sp_wdata),
    .wmask(sp_wmask), .gnt(sp_gnt), .rdata(sp_rdata));
  gemmini_sram #(.DIM(DIM), .EW(32), .ROWS(ACC_ROWS), .BANKS(ACC_BANKS), .NPORTS(NP)) u_acc (
    .clk, .req(acc_req), .we(acc_we), .accumulate(acc_acc_op), .addr(acc_addr), .wdata(acc_wdata),
    .wmask(acc_wmask), .gnt(acc_gnt), .rdata(acc_rdata));

  // ---- DMA arbitration ----
  logic ld_dma_valid, ld_dma_ready, st_dma_valid, st_dma_ready;
  logic [63:0] ld_dma_addr, st_dma_addr;
  logic [7:0]  ld_dma_len, st_dma_len;
  logic [BEAT*8-1:0] st_dma_data;
  logic prefer_store;
  wire pick_store = st_dma_valid && (!ld_dma_valid || prefer_store);
  assign mem_req_valid = ld_dma_valid || st_dma_valid;
  assign mem_req_write = pick_store;
  assign mem_req_addr = pick_store ? st_dma_addr : ld_dma_addr;
  assign mem_req_len = pick_store ? st_dma_len : ld_dma_len;
  assign mem_req_data = st_dma_data;
  assign ld_dma_ready = mem_req_ready && !pick_store;
  assign st_dma_ready = mem_req_ready && pick_store;
  always_ff @(posedge clk) begin
    if (reset) prefer_store <= 1'b0;
    else if (mem_req_valid && mem_req_ready) prefer_store <= !pick_store;
  end

  // ---- load unit ----
  logic ld_sp_req, ld_acc_req, ld_accumulate, ld_busy;
  logic [31:0] ld_addr;
  logic [DIM-1:0][31:0] ld_data;
  logic [DIM-1:0] ld_mask;
  gemmini_load #(.DIM(DIM), .MAX_MVIN_BYTES(MAX_MVIN_BYTES), .BEAT(BEAT), .CREDITS(DMA_CREDITS)) u_load (
    .clk, .reset, .in_valid(iss_valid[0]), .in_ready(iss_ready[0]), .in_funct(iss_funct[0]),
    .in_rs1(iss_rs1[0]), .in_rs2(iss_rs2[0]), .in_id(iss_id[0]),
    .cfg_done_valid(done_valid[0]), .cfg_done_id(done_id[0]), .done_valid(done_valid[1]), .done_id(done_id[1]),
    .dma_req_valid(ld_dma_valid), .dma_req_ready(ld_dma_ready), .dma_req_addr(ld_dma_addr),
    .dma_req_len(ld_dma_len), .dma_resp_valid(mem_resp_valid), .dma_resp_data(mem_resp_data),
    .sp_req(ld_sp_req), .acc_req(ld_acc_req), .sp_gnt(sp_gnt[P_LD]), .acc_gnt(acc_gnt[P_LD]),
    .w_accumulate(ld_accumulate), .w_addr(ld_addr), .w_data(ld_data), .w_mask(ld_mask), .busy(ld_busy));

  // ---- store unit ----
  logic st_sp_req, st_acc_req, st_busy;
  logic [31:0] st_addr;
  gemmini_store #(.DIM(DIM), .BEAT(BEAT)) u_store (
    .clk, .reset, .in_valid(iss_valid[2]), .in_ready(iss_ready[2]), .in_funct(iss_funct[2]),
    .in_rs1(iss_rs1[2]), .in_rs2(iss_rs2[2]), .in_id(iss_id[2]),
    .cfg_done_valid(done_valid[2]), .cfg_done_id(done_id[2]), .done_valid(done_valid[3]), .done_id(done_id[3]),
    .dma_req_valid(st_dma_valid), .dma_req_ready(st_dma_ready), .dma_req_addr(st_dma_addr),
    .dma_req_len(st_dma_len), .dma_req_data(st_dma_data),
    .sp_req(st_sp_req), .acc_req(st_acc_req), .sp_gnt(sp_gnt[P_ST]), .acc_gnt(acc_gnt[P_ST]),
    .r_addr(st_addr), .sp_rdata(sp_rdata[P_ST]), .acc_rdata(acc_rdata[P_ST]), .busy(st_busy));

  // ---- execute unit ----
  logic [3:0] ex_rd_sp_req, ex_rd_acc_req, ex_rd_sp_gnt, ex_rd_acc_gnt;
  logic [3:0][31:0] ex_rd_addr;
  logic [3:0][DIM-1:0][7:0] ex_sp_rdata;
  logic [3:0][DIM-1:0][31:0] ex_acc_rdata;
  logic ex_w_sp_req, ex_w_acc_req, ex_w_accumulate, ex_busy;
  logic [15:0] ex_debug;
  logic [31:0] ex_w_addr;
  logic [DIM-1:0][31:0] ex_w_data;
  logic [DIM-1:0] ex_w_mask;
  gemmini_execute #(.DIM(DIM)) u_execute (
    .clk, .reset, .in_valid(iss_valid[1]), .in_ready(iss_ready[1]), .in_funct(iss_funct[1]),
    .in_rs1(iss_rs1[1]), .in_rs2(iss_rs2[1]), .in_has_pre(iss_has_pre[1]), .in_pre1(iss_pre1[1]),
    .in_pre2(iss_pre2[1]), .in_id(iss_id[1]),
    .done_valid(done_valid[6:4]), .done_id(done_id[6:4]),
    .rd_sp_req(ex_rd_sp_req), .rd_acc_req(ex_rd_acc_req), .rd_addr(ex_rd_addr),
    .rd_sp_gnt(ex_rd_sp_gnt), .rd_acc_gnt(ex_rd_acc_gnt), .sp_rdata(ex_sp_rdata), .acc_rdata(ex_acc_rdata),
    .w_sp_req(ex_w_sp_req), .w_acc_req(ex_w_acc_req), .w_addr(ex_w_addr), .w_data(ex_w_data),
    .w_mask(ex_w_mask), .w_accumulate(ex_w_accumulate), .busy(ex_busy), .debug_state(ex_debug));
  assign debug_state = {ex_debug, 8'd0, fe_idle, fe_busy, ld_busy, ex_busy, st_busy, error};

  // ---- memory port wiring ----
  always_comb begin
    sp_req = '0; sp_we = '0; sp_acc_op = '0; sp_addr = '0; sp_wdata = '0; sp_wmask = '0;
    acc_req = '0; acc_we = '0; acc_acc_op = '0; acc_addr = '0; acc_wdata = '0; acc_wmask = '0;
    // execute write
    sp_req[P_EXW] = ex_w_sp_req; sp_we[P_EXW] = 1'b1; sp_addr[P_EXW] = ex_w_addr; sp_wmask[P_EXW] = ex_w_mask;
    acc_req[P_EXW] = ex_w_acc_req; acc_we[P_EXW] = 1'b1; acc_addr[P_EXW] = ex_w_addr;
    acc_wmask[P_EXW] = ex_w_mask; acc_acc_op[P_EXW] = ex_w_accumulate; acc_wdata[P_EXW] = ex_w_data;
    for (int e = 0; e < DIM; e++) sp_wdata[P_EXW][e] = ex_w_data[e][7:0];
    // execute reads
    for (int c = 0; c < 4; c++) begin
      sp_req[P_EXR + c] = ex_rd_sp_req[c]; sp_addr[P_EXR + c] = ex_rd_addr[c];
      acc_req[P_EXR + c] = ex_rd_acc_req[c]; acc_addr[P_EXR + c] = ex_rd_addr[c];
    end
    // load write
    sp_req[P_LD] = ld_sp_req; sp_we[P_LD] = 1'b1; sp_addr[P_LD] = ld_addr; sp_wmask[P_LD] = ld_mask;
    for (int e = 0; e < DIM; e++) sp_wdata[P_LD][e] = ld_data[e][7:0];
    acc_req[P_LD] = ld_acc_req; acc_we[P_LD] = 1'b1; acc_addr[P_LD] = ld_addr; acc_wmask[P_LD] = ld_mask;
    acc_acc_op[P_LD] = ld_accumulate; acc_wdata[P_LD] = ld_data;
    // store read
    sp_req[P_ST] = st_sp_req; sp_addr[P_ST] = st_addr;
    acc_req[P_ST] = st_acc_req; acc_addr[P_ST] = st_addr;
  end

  for (genvar c = 0; c < 4; c++) begin : g_ex_ports
    assign ex_rd_sp_gnt[c] = sp_gnt[P_EXR + c];
    assign ex_rd_acc_gnt[c] = acc_gnt[P_EXR + c];
    assign ex_sp_rdata[c] = sp_rdata[P_EXR + c];
    assign ex_acc_rdata[c] = acc_rdata[P_EXR + c];
  end

  assign busy_load = fe_busy[0] || ld_busy;
  assign busy_execute = fe_busy[1] || ex_busy;
  assign busy_store = fe_busy[2] || st_busy;
  assign idle = fe_idle && !lw_busy && !ld_busy && !ex_busy && !st_busy;
endmodule
