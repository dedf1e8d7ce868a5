// Command front end: decodes (funct, rs1, rs2), checks every command against
// the configuration, and keeps the commands in flight in a reservation
// station from which the load, execute and store units take them in order.
//
// A preload is held until the next compute and merged with it into one
// entry (the pair is one matrix step); a compute without its preload, or a
// second preload before the compute, is illegal.  Each entry records the local row
// ranges it reads and writes; an entry is issued to its unit only when no
// older entry still in flight conflicts with it: read-after-write always,
// write-after-read and write-after-write across units (each unit runs its own
// entries in order).  Queue depths cap the entries per unit.
//
// Illegal commands (unknown funct, rows or columns over the limits, local
// addresses outside the memories, main-memory spans beyond `mem_limit`, use
// before configuration, a compute without its preload) raise `error`
// with the command's index and a reason code; the front end then stops
// accepting commands.
module gemmini_frontend
  import gemmini_isa_pkg::*;
#(
  parameter int DIM = 4,
  parameter int SP_ROWS = 1024,
  parameter int ACC_ROWS = 128,
  parameter int MAX_MVIN_BYTES = 64,
  parameter int LD_Q = 8,
  parameter int EX_Q = 8,
  parameter int ST_Q = 2
) (
  input  logic        clk,
  input  logic        reset,
  // command input
  input  logic        cmd_valid,
  output logic        cmd_ready,
  input  logic [7:0]  cmd_funct,
  input  logic [63:0] cmd_rs1,
  input  logic [63:0] cmd_rs2,
  input  logic [31:0] cmd_origin,   // the command's index in the stream (a loop's start word for unrolled ones)
  output logic [2:0]  room,         // per kind (load, execute, store): the reservation station takes one more
  // main-memory bytes the DMA may touch (addresses below this); all ones: no check
  input  logic [63:0] mem_limit,
  // issue to the units (index 0 load, 1 execute, 2 store)
  output logic [2:0]        iss_valid,
  input  logic [2:0]        iss_ready,
  output logic [2:0][7:0]   iss_funct,
  output logic [2:0][63:0]  iss_rs1,
  output logic [2:0][63:0]  iss_rs2,
  output logic [2:0]        iss_has_pre,
  output logic [2:0][63:0]  iss_pre1,
  output logic [2:0][63:0]  iss_pre2,
  output logic [2:0][7:0]   iss_id,
  // completions: load (config, mvin), store (config, mvout), execute (three)
  input  logic [6:0]        done_valid,
  input  logic [6:0][7:0]   done_id,
  // status
  output logic        idle,
  output logic [2:0]  unit_busy,
  output logic        error,
  output logic [7:0]  error_code,
  output logic [31:0] error_index
);
  localparam int N = LD_Q + EX_Q + ST_Q;
  localparam int MAX_COLS_SP = (MAX_MVIN_BYTES > DIM) ? MAX_MVIN_BYTES : DIM;
  localparam int MAX_COLS_ACC = (MAX_MVIN_BYTES / 4 > DIM) ? MAX_MVIN_BYTES / 4 : DIM;
  localparam logic [1:0] K_LD = 2'd0, K_EX = 2'd1, K_ST = 2'd2;

  // ---- reservation station -------------------------------------------------
  logic        e_valid [N];
  logic        e_issued [N];
  logic [1:0]  e_kind [N];
  logic [31:0] e_seq [N];
  logic [7:0]  e_funct [N];
  logic [63:0] e_rs1 [N], e_rs2 [N], e_pre1 [N], e_pre2 [N];
  logic        e_has_pre [N];
  // ranges: 0..2 reads, 3 write; [lo, hi) rows in the scratchpad (acc = 0) or accumulator
  logic        e_rv [N][4];
  logic        e_ra [N][4];
  logic [31:0] e_rlo [N][4], e_rhi [N][4];

  logic [31:0] seq_next;

  // held preload
  logic        pend_valid;
  logic [63:0] pend_rs1, pend_rs2;

  // decode-time copies of the configuration
  logic        ex_cfg_ok;
  logic [15:0] sh_a_stride, sh_c_stride;
  logic [2:0]  ld_cfg_ok;
  logic [2:0]  sh_shrunk;
  logic [15:0] sh_block_stride [3];
  logic        st_cfg_ok;
  logic [63:0] sh_ld_stride [3];
  logic [63:0] sh_st_stride;
  logic        sh_transpose;
  logic        array_loaded;   // a compute_preloaded since the last config_ex

  // ---- decode of the incoming command ---------------------------------------
  typedef struct packed {
    logic        ok;       // address fields legal
    logic [7:0]  code;
    logic        is_acc;
    logic        garbage;
    logic [31:0] row;
  } local_t;

  function automatic local_t check_local(input logic [31:0] addr, input int unsigned extent,
                                         input logic allow_garbage);
    local_t r;
    int unsigned limit;
    r.ok = 1'b1;
    r.code = 8'd0;
    r.garbage = (addr == LOCAL_GARBAGE);
    r.is_acc = addr[LOCAL_ACC_BIT];
    r.row = 32'(addr[LOCAL_ROW_BITS-1:0]);
    limit = r.is_acc ? ACC_ROWS : SP_ROWS;
    if (r.garbage) begin
      if (!allow_garbage) begin
        r.ok = 1'b0;
        r.code = ERR_GARBAGE;
      end
    end else if (!r.is_acc && (addr[LOCAL_ACCUMULATE_BIT] || addr[LOCAL_FULL_BIT])) begin
      r.ok = 1'b0;
      r.code = ERR_FLAGS;
    end else if (64'(r.row) + 64'(extent) > 64'(limit)) begin
      r.ok = 1'b0;
      r.code = ERR_ADDRESS;
    end
    return r;
  endfunction

  wire [31:0] f1_addr = cmd_rs1[31:0];
  wire [15:0] f1_cols = cmd_rs1[47:32];
  wire [15:0] f1_rows = cmd_rs1[63:48];
  wire [31:0] f2_addr = cmd_rs2[31:0];
  wire [15:0] f2_cols = cmd_rs2[47:32];
  wire [15:0] f2_rows = cmd_rs2[63:48];
  wire [31:0] p1_addr = pend_rs1[31:0];
  wire [15:0] p1_rows = pend_rs1[63:48];
  wire [31:0] p2_addr = pend_rs2[31:0];
  wire [15:0] p2_rows = pend_rs2[63:48];

  function automatic logic dim_ok(input logic [15:0] v);
    return v >= 16'd1 && v <= 16'(DIM);
  endfunction

  function automatic int unsigned strided_extent(input logic [15:0] rows, input logic [15:0] stride);
    return (32'(rows) - 1) * 32'(stride) + 1;
  endfunction

  // decode results
  logic        d_err;
  logic [7:0]  d_code;
  logic        d_alloc;        // allocate an entry for the incoming command
  logic [1:0]  d_kind;
  logic        d_hold_pre;     // incoming preload goes into the holding register
  logic        d_rv [4];
  logic        d_ra [4];
  logic [31:0] d_rlo [4], d_rhi [4];

  // main-memory span of rows rows of row_bytes bytes, stride apart, from addr
  function automatic logic dram_ok(input logic [63:0] addr, input logic [15:0] rows,
                                   input logic [31:0] row_bytes, input logic [63:0] stride);
    logic [127:0] last_end;
    last_end = 128'(addr) + 128'(rows - 16'd1) * 128'(stride) + 128'(row_bytes);
    return last_end <= 128'(mem_limit);
  endfunction

  always_comb begin
    local_t la, lb, lp, lc, l1;
    int unsigned id, max_cols, blocks, extent;
    logic [31:0] row_bytes;
    d_err = 1'b0;
    d_code = 8'd0;
    d_alloc = 1'b0;
    d_kind = K_EX;
    d_hold_pre = 1'b0;
    for (int r = 0; r < 4; r++) begin
      d_rv[r] = 1'b0;
      d_ra[r] = 1'b0;
      d_rlo[r] = 32'd0;
      d_rhi[r] = 32'd0;
    end
    la = '0; lb = '0; lp = '0; lc = '0; l1 = '0;
    id = 0; max_cols = 0; blocks = 1; extent = 0; row_bytes = 32'd0;

    if (cmd_funct == 8'(FUNCT_CONFIG)) begin
      case (cmd_rs1[1:0])
        2'(CONFIG_EX): begin
          if (cmd_rs1[4:3] > 2'd1 || (cmd_rs1[CFG_EX_DATAFLOW_BIT] && cmd_rs1[CFG_EX_A_TRANSPOSE_BIT] &&
              cmd_rs1[CFG_EX_B_TRANSPOSE_BIT]) || (!cmd_rs1[CFG_EX_DATAFLOW_BIT] &&
              cmd_rs1[CFG_EX_B_TRANSPOSE_BIT] && !cmd_rs1[CFG_EX_A_TRANSPOSE_BIT]) || cmd_rs2[31:0] > 32'd31) begin
            d_err = 1'b1; d_code = ERR_UNSUPPORTED_CONFIG;
          end else begin
            d_alloc = 1'b1; d_kind = K_EX;
          end
        end
        2'(CONFIG_LD): begin
          if (cmd_rs1[4:3] > 2'd2 || cmd_rs1[15:8] > 8'd1) begin  // pixel repeats are not implemented
            d_err = 1'b1; d_code = ERR_UNSUPPORTED_CONFIG;
          end else begin
            d_alloc = 1'b1; d_kind = K_LD;
          end
        end
        2'(CONFIG_ST): begin
          if (cmd_rs1[3:2] > 2'd1 || cmd_rs1[63:4] != 60'd0) begin
            d_err = 1'b1; d_code = ERR_UNSUPPORTED_CONFIG;
          end else begin
            d_alloc = 1'b1; d_kind = K_ST;
          end
        end
        default: begin
          d_err = 1'b1; d_code = ERR_UNSUPPORTED_CONFIG;
        end
      endcase
    end else if (cmd_funct == 8'(FUNCT_MVIN) || cmd_funct == 8'(FUNCT_MVIN2) || cmd_funct == 8'(FUNCT_MVIN3)) begin
      id = (cmd_funct == 8'(FUNCT_MVIN)) ? 0 : (cmd_funct == 8'(FUNCT_MVIN2)) ? 1 : 2;
      max_cols = f2_addr[LOCAL_ACC_BIT] ? MAX_COLS_ACC : MAX_COLS_SP;
      blocks = (32'(f2_cols) + DIM - 1) / DIM;
      extent = (blocks - 1) * 32'(sh_block_stride[id]) + 32'(f2_rows);
      row_bytes = (f2_addr[LOCAL_ACC_BIT] && !sh_shrunk[id]) ? 32'(f2_cols) * 4 : 32'(f2_cols);
      la = check_local(f2_addr, extent, 1'b0);
      lp = check_local(f2_addr, 32'(f2_rows), 1'b0);   // the rows alone (checked first, as isa.py does)
      if (!dim_ok(f2_rows)) begin
        d_err = 1'b1; d_code = ERR_ROWS;
      end else if (f2_cols == 16'd0 || 32'(f2_cols) > max_cols) begin
        d_err = 1'b1; d_code = ERR_COLS;
      end else if (!lp.ok) begin
        d_err = 1'b1; d_code = lp.code;
      end else if (!ld_cfg_ok[id]) begin
        d_err = 1'b1; d_code = ERR_UNCONFIGURED;
      end else if (!dram_ok(cmd_rs1, f2_rows, row_bytes, sh_ld_stride[id])) begin
        d_err = 1'b1; d_code = ERR_DRAM;
      end else if (!la.ok) begin
        d_err = 1'b1; d_code = la.code;
      end else begin
        d_alloc = 1'b1; d_kind = K_LD;
        d_rv[3] = 1'b1; d_ra[3] = la.is_acc; d_rlo[3] = la.row; d_rhi[3] = la.row + extent;
      end
    end else if (cmd_funct == 8'(FUNCT_MVOUT)) begin
      // a wide mvout (up to MAX_MVIN_BYTES of output per row) reads DIM-column block b from row + b*DIM
      max_cols = (f2_addr[LOCAL_ACC_BIT] && f2_addr[LOCAL_FULL_BIT]) ? MAX_COLS_ACC : MAX_COLS_SP;
      blocks = (32'(f2_cols) + DIM - 1) / DIM;
      extent = (blocks - 1) * DIM + 32'(f2_rows);
      la = check_local(f2_addr, extent, 1'b0);
      row_bytes = (f2_addr[LOCAL_ACC_BIT] && f2_addr[LOCAL_FULL_BIT]) ? 32'(f2_cols) * 4 : 32'(f2_cols);
      if (!dim_ok(f2_rows)) begin
        d_err = 1'b1; d_code = ERR_ROWS;
      end else if (f2_cols == 16'd0 || 32'(f2_cols) > max_cols) begin
        d_err = 1'b1; d_code = ERR_COLS;
      end else if (!la.ok) begin
        d_err = 1'b1; d_code = la.code;
      end else if (!st_cfg_ok) begin
        d_err = 1'b1; d_code = ERR_UNCONFIGURED;
      end else if (!dram_ok(cmd_rs1, f2_rows, row_bytes, sh_st_stride)) begin
        d_err = 1'b1; d_code = ERR_DRAM;
      end else begin
        d_alloc = 1'b1; d_kind = K_ST;
        d_rv[0] = 1'b1; d_ra[0] = la.is_acc; d_rlo[0] = la.row; d_rhi[0] = la.row + extent;
      end
    end else if (cmd_funct == 8'(FUNCT_PRELOAD)) begin
      lb = check_local(f1_addr, 32'(f1_rows), 1'b1);
      lc = check_local(f2_addr, 32'(f2_rows), 1'b1);
      if (!dim_ok(f1_rows) || !dim_ok(f2_rows)) begin
        d_err = 1'b1; d_code = ERR_ROWS;
      end else if (!dim_ok(f1_cols) || !dim_ok(f2_cols)) begin
        d_err = 1'b1; d_code = ERR_COLS;
      end else if (!lb.ok) begin
        d_err = 1'b1; d_code = lb.code;
      end else if (!lc.ok) begin
        d_err = 1'b1; d_code = lc.code;
      end else if (!lb.garbage && lb.is_acc) begin
        d_err = 1'b1; d_code = ERR_ACC_OPERAND;   // Gemmini preloads D (OS) / B (WS) from the scratchpad only
      end else if (!ex_cfg_ok) begin
        d_err = 1'b1; d_code = ERR_UNCONFIGURED;
      end else if (sh_transpose) begin
        d_err = 1'b1; d_code = ERR_UNSUPPORTED_CONFIG;
      end else if (pend_valid) begin
        d_err = 1'b1; d_code = ERR_PRELOAD_TWICE;
      end else begin
        d_hold_pre = 1'b1;
      end
    end else if (cmd_funct == 8'(FUNCT_COMPUTE_PRELOADED) || cmd_funct == 8'(FUNCT_COMPUTE_ACCUMULATED)) begin
      la = check_local(f1_addr, strided_extent(f1_rows, sh_a_stride), 1'b1);
      lb = check_local(f2_addr, 32'(f2_rows), 1'b1);
      lp = check_local(p1_addr, 32'(p1_rows), 1'b1);
      lc = check_local(p2_addr, strided_extent(p2_rows, sh_c_stride), 1'b1);
      l1 = check_local(f1_addr, 32'(f1_rows), 1'b1);
      if (!dim_ok(f1_rows) || !dim_ok(f2_rows)) begin
        d_err = 1'b1; d_code = ERR_ROWS;
      end else if (!dim_ok(f1_cols) || !dim_ok(f2_cols)) begin
        d_err = 1'b1; d_code = ERR_COLS;
      end else if (!l1.ok) begin
        d_err = 1'b1; d_code = l1.code;
      end else if (!lb.ok) begin
        d_err = 1'b1; d_code = lb.code;
      end else if ((!l1.garbage && l1.is_acc) || (!lb.garbage && lb.is_acc)) begin
        d_err = 1'b1; d_code = ERR_ACC_OPERAND;   // A, B (OS) and D (WS) come from the scratchpad only
      end else if (!ex_cfg_ok) begin
        d_err = 1'b1; d_code = ERR_UNCONFIGURED;
      end else if (sh_transpose) begin
        d_err = 1'b1; d_code = ERR_UNSUPPORTED_CONFIG;
      end else if (!pend_valid) begin
        d_err = 1'b1; d_code = ERR_NO_PRELOAD;
      end else if (!la.ok) begin
        d_err = 1'b1; d_code = la.code;
      end else if (cmd_funct == 8'(FUNCT_COMPUTE_ACCUMULATED) && !array_loaded) begin
        d_err = 1'b1; d_code = ERR_ARRAY_EMPTY;
      end else if (!lc.ok) begin
        d_err = 1'b1; d_code = lc.code;
      end else begin
        d_alloc = 1'b1; d_kind = K_EX;
        d_rv[0] = !la.garbage; d_ra[0] = la.is_acc; d_rlo[0] = la.row;
        d_rhi[0] = la.row + strided_extent(f1_rows, sh_a_stride);
        d_rv[1] = !lb.garbage; d_ra[1] = lb.is_acc; d_rlo[1] = lb.row; d_rhi[1] = lb.row + 32'(f2_rows);
        d_rv[2] = (cmd_funct == 8'(FUNCT_COMPUTE_PRELOADED)) && !lp.garbage;
        d_ra[2] = lp.is_acc; d_rlo[2] = lp.row; d_rhi[2] = lp.row + 32'(p1_rows);
        d_rv[3] = !lc.garbage; d_ra[3] = lc.is_acc; d_rlo[3] = lc.row;
        d_rhi[3] = lc.row + strided_extent(p2_rows, sh_c_stride);
      end
    end else if (cmd_funct == 8'(FUNCT_FLUSH) || cmd_funct == 8'(FUNCT_FENCE)) begin
      // nothing to do: the harness runs a fence until the accelerator is idle
    end else begin
      d_err = 1'b1; d_code = ERR_FUNCT;
    end
  end

  // ---- allocation -----------------------------------------------------------
  logic [7:0] free_slot;
  logic       have_free;
  int unsigned kind_count [3];
  always_comb begin
    have_free = 1'b0;
    free_slot = 8'd0;
    for (int k = 0; k < 3; k++) kind_count[k] = 0;
    for (int i = N - 1; i >= 0; i--) begin
      if (!e_valid[i]) begin
        have_free = 1'b1;
        free_slot = 8'(i);
      end else begin
        kind_count[e_kind[i]] = kind_count[e_kind[i]] + 1;
      end
    end
  end

  function automatic logic kind_has_room(input logic [1:0] k);
    int unsigned depth;
    depth = (k == K_LD) ? LD_Q : (k == K_EX) ? EX_Q : ST_Q;
    return have_free && kind_count[k] < depth;
  endfunction

  assign room = {kind_has_room(K_ST), kind_has_room(K_EX), kind_has_room(K_LD)};
  wire can_take = cmd_valid && !error && !reset;
  wire do_accept = can_take && (d_err || !d_alloc || kind_has_room(d_kind));
  assign cmd_ready = do_accept;

  // ---- issue ----------------------------------------------------------------
  function automatic logic overlap(input int a, input int ra, input int b, input int rb);
    return e_rv[a][ra] && e_rv[b][rb] && (e_ra[a][ra] == e_ra[b][rb]) &&
           (e_rlo[a][ra] < e_rhi[b][rb]) && (e_rlo[b][rb] < e_rhi[a][ra]);
  endfunction

  function automatic logic conflicts(input int older, input int younger);
    logic c;
    c = 1'b0;
    for (int r = 0; r < 3; r++) c = c || overlap(older, 3, younger, r);   // read after write
    if (e_kind[older] != e_kind[younger]) begin
      for (int r = 0; r < 3; r++) c = c || overlap(older, r, younger, 3); // write after read
      c = c || overlap(older, 3, younger, 3);                              // write after write
    end
    return c;
  endfunction

  logic [2:0] cand_found;
  logic [7:0] cand [3];
  always_comb begin
    for (int u = 0; u < 3; u++) begin
      cand_found[u] = 1'b0;
      cand[u] = 8'd0;
      for (int i = 0; i < N; i++) begin
        if (e_valid[i] && !e_issued[i] && e_kind[i] == 2'(u) &&
            (!cand_found[u] || e_seq[i] < e_seq[cand[u]])) begin
          cand_found[u] = 1'b1;
          cand[u] = 8'(i);
        end
      end
    end
  end

  always_comb begin
    for (int u = 0; u < 3; u++) begin
      logic blocked;
      int c;
      c = int'(cand[u]);
      blocked = 1'b0;
      for (int i = 0; i < N; i++) begin
        if (i != c && e_valid[i] && e_seq[i] < e_seq[c] && conflicts(i, c)) blocked = 1'b1;
      end
      iss_valid[u]   = cand_found[u] && !blocked;
      iss_funct[u]   = e_funct[c];
      iss_rs1[u]     = e_rs1[c];
      iss_rs2[u]     = e_rs2[c];
      iss_has_pre[u] = e_has_pre[c];
      iss_pre1[u]    = e_pre1[c];
      iss_pre2[u]    = e_pre2[c];
      iss_id[u]      = cand[u];
    end
  end

  // ---- status ---------------------------------------------------------------
  always_comb begin
    idle = 1'b1;
    unit_busy = 3'b000;
    for (int i = 0; i < N; i++) begin
      if (e_valid[i]) begin
        idle = 1'b0;
        unit_busy[e_kind[i]] = 1'b1;
      end
    end
  end

  // ---- state ----------------------------------------------------------------
  always_ff @(posedge clk) begin
    if (reset) begin
      for (int i = 0; i < N; i++) begin
        e_valid[i] <= 1'b0;
        e_issued[i] <= 1'b0;
      end
      seq_next <= 32'd0;
      pend_valid <= 1'b0;
      ex_cfg_ok <= 1'b0;
      array_loaded <= 1'b0;
      sh_transpose <= 1'b0;
      ld_cfg_ok <= 3'b000;
      st_cfg_ok <= 1'b0;
      sh_a_stride <= 16'd1;
      sh_c_stride <= 16'd1;
      sh_shrunk <= 3'b000;
      for (int k = 0; k < 3; k++) sh_block_stride[k] <= 16'(DIM);
      error <= 1'b0;
      error_code <= 8'd0;
      error_index <= 32'd0;
    end else begin
      // completions
      for (int d = 0; d < 7; d++) begin
        if (done_valid[d]) e_valid[done_id[d]] <= 1'b0;
      end
      // issues
      for (int u = 0; u < 3; u++) begin
        if (iss_valid[u] && iss_ready[u]) e_issued[cand[u]] <= 1'b1;
      end

      if (do_accept) begin
        if (d_err) begin
          error <= 1'b1;
          error_code <= d_code;
          error_index <= cmd_origin;
        end else begin
          if (d_hold_pre) begin
            pend_valid <= 1'b1;
            pend_rs1 <= cmd_rs1;
            pend_rs2 <= cmd_rs2;
          end
          if (d_alloc) begin
            e_valid[free_slot] <= 1'b1;
            e_issued[free_slot] <= 1'b0;
            e_kind[free_slot] <= d_kind;
            e_seq[free_slot] <= seq_next;
            e_funct[free_slot] <= cmd_funct;
            e_rs1[free_slot] <= cmd_rs1;
            e_rs2[free_slot] <= cmd_rs2;
            e_has_pre[free_slot] <= (cmd_funct == 8'(FUNCT_COMPUTE_PRELOADED) ||
                                     cmd_funct == 8'(FUNCT_COMPUTE_ACCUMULATED));
            e_pre1[free_slot] <= pend_rs1;
            e_pre2[free_slot] <= pend_rs2;
            for (int r = 0; r < 4; r++) begin
              e_rv[free_slot][r] <= d_rv[r];
              e_ra[free_slot][r] <= d_ra[r];
              e_rlo[free_slot][r] <= d_rlo[r];
              e_rhi[free_slot][r] <= d_rhi[r];
            end
            seq_next <= seq_next + 1;
            if (cmd_funct == 8'(FUNCT_COMPUTE_PRELOADED) || cmd_funct == 8'(FUNCT_COMPUTE_ACCUMULATED))
              pend_valid <= 1'b0;
            if (cmd_funct == 8'(FUNCT_COMPUTE_PRELOADED)) array_loaded <= 1'b1;
          end
          // decode-time copies of the configuration
          if (cmd_funct == 8'(FUNCT_CONFIG)) begin
            case (cmd_rs1[1:0])
              2'(CONFIG_EX): begin
                ex_cfg_ok <= 1'b1;
                // a new dataflow leaves no usable array state and drops a held preload
                array_loaded <= 1'b0;
                pend_valid <= 1'b0;
                sh_transpose <= cmd_rs1[CFG_EX_A_TRANSPOSE_BIT] || cmd_rs1[CFG_EX_B_TRANSPOSE_BIT];
                sh_a_stride <= cmd_rs1[31:16];
                sh_c_stride <= cmd_rs2[63:48];
              end
              2'(CONFIG_LD): begin
                ld_cfg_ok[cmd_rs1[4:3]] <= 1'b1;
                sh_shrunk[cmd_rs1[4:3]] <= cmd_rs1[2];
                sh_block_stride[cmd_rs1[4:3]] <= cmd_rs1[31:16];
                sh_ld_stride[cmd_rs1[4:3]] <= cmd_rs2;
              end
              2'(CONFIG_ST): begin
                st_cfg_ok <= 1'b1;
                sh_st_stride <= 64'(cmd_rs2[31:0]);
              end
              default: ;
            endcase
          end
        end
      end
    end
  end
endmodule
