// Execute unit: config_ex, preload and compute_preloaded / compute_accumulated
// on the systolic mesh, for both dataflows.
//
// Each compute is an op that passes through two stages:
//   stage 1 (DIM cycles, only when there is something to stage):
//     WS compute_preloaded: the B rows go down the preload chain into the
//       PEs' idle weight buffer (row DIM-1 first, so all rows land together);
//     OS: the A rows are read into a transpose buffer (the mesh takes A one
//       column per cycle) and, for compute_preloaded, the D rows go down the
//       preload chain into the PEs' idle accumulator buffer.
//   stage 2 (one slot per cycle): WS streams the rows of A with the rows of D
//     (partial-sum seeds); OS streams the columns of A with the rows of B.
// Stage 1 of the next op overlaps stage 2 of the current one (double buffers
// in the PEs and in the transposer).  WS results leave the mesh 2*DIM-1
// cycles after their slot and are written to the accumulator (overwrite or
// accumulate) or to the scratchpad (activation, saturate to int8).  OS
// results leave through the readout chain; they are shifted (rounding half
// to even) and written the same way.  A change of dataflow waits for the
// mesh to drain.
module gemmini_execute
  import gemmini_isa_pkg::*;
  import gemmini_dpi_pkg::*;
#(
  parameter int DIM = 4,
  parameter int ROW_BITS = (DIM > 1) ? $clog2(DIM) : 1
) (
  input  logic        clk,
  input  logic        reset,
  input  logic        in_valid,
  output logic        in_ready,
  input  logic [7:0]  in_funct,
  input  logic [63:0] in_rs1,
  input  logic [63:0] in_rs2,
  input  logic        in_has_pre,
  input  logic [63:0] in_pre1,
  input  logic [63:0] in_pre2,
  input  logic [7:0]  in_id,
  output logic [2:0]       done_valid,
  output logic [2:0][7:0]  done_id,
  // read channels: 0 = stage-2 A, 1 = stage-2 B/D, 2 = stage-1 B (WS) / A (OS), 3 = stage-1 D (OS)
  output logic [3:0]        rd_sp_req,
  output logic [3:0]        rd_acc_req,
  output logic [3:0][31:0]  rd_addr,
  input  logic [3:0]        rd_sp_gnt,
  input  logic [3:0]        rd_acc_gnt,
  input  logic [3:0][DIM-1:0][7:0]  sp_rdata,
  input  logic [3:0][DIM-1:0][31:0] acc_rdata,
  // write channel (highest priority at the memories: always granted)
  output logic        w_sp_req,
  output logic        w_acc_req,
  output logic [31:0] w_addr,
  output logic [DIM-1:0][31:0] w_data,
  output logic [DIM-1:0] w_mask,
  output logic        w_accumulate,
  output logic        busy,
  output logic [15:0] debug_state
);
  localparam int LAT = 2 * DIM - 1;

  typedef struct packed {
    logic        os;
    logic [1:0]  act;
    logic [4:0]  shift;
    logic        preloaded;
    logic        buf_sel;     // weight (WS) / accumulator (OS) buffer in the PEs
    logic        tpar;        // transpose buffer (OS)
    logic        rpar;        // readout slot (OS)
    logic [31:0] acc_scale;   // requantizes operands read from the accumulator without the full bit
    logic [31:0] a_row;   logic [15:0] a_rows;  logic [15:0] a_cols;  logic a_acc;  logic [15:0] a_stride;
    logic        a_full;  logic a_garbage;
    logic [31:0] bd_row;  logic [15:0] bd_rows; logic [15:0] bd_cols; logic bd_acc; logic bd_garbage;
    logic        bd_full;
    logic [31:0] pre_row; logic [15:0] pre_rows; logic [15:0] pre_cols; logic pre_acc; logic pre_garbage;
    logic        pre_full;
    logic [31:0] c_row;   logic [15:0] c_rows;  logic [15:0] c_cols;  logic c_acc;  logic c_accumulate;
    logic        c_garbage; logic [15:0] c_stride;
    logic [7:0]  id;
  } op_t;

  typedef struct packed {
    logic        wb;          // write this row
    logic        done;        // last row of the op
    logic [31:0] addr;
    logic        acc;
    logic        accumulate;
    logic [15:0] cols;
    logic [1:0]  act;
    logic [7:0]  id;
  } tag_t;

  typedef struct packed {
    logic [31:0] c_row; logic [15:0] c_rows; logic [15:0] c_cols; logic c_acc; logic c_accumulate;
    logic c_garbage; logic [15:0] c_stride; logic [1:0] act; logic [4:0] shift; logic [7:0] id;
  } ro_info_t;

  // ---- configuration and preload state ----
  logic        cfg_os;
  logic [1:0]  cfg_act;
  logic [15:0] cfg_a_stride, cfg_c_stride;
  logic [4:0]  cfg_shift;
  logic [31:0] cfg_acc_scale;
  logic [63:0] pre1_state, pre2_state;
  logic        buf_state, tpar_state, rpar_state;

  logic [63:0] now;
  logic [63:0] last_use [2];
  logic [63:0] last_present;
  logic [63:0] prev_out_last;
  logic        mesh_os;
  logic [7:0]  ro_pending;

  // ---- stages ----
  logic        s1_valid, s1_gate_ok;
  op_t         s1;
  logic [15:0] s1_step;
  logic        s2_valid;
  op_t         s2;
  logic [15:0] s2_step;

  // present registers (the cycle after a granted read)
  logic        p1_valid, p1_pl, p1_tb, p1_need_b, p1_need_d, p1_need_a;
  logic [ROW_BITS-1:0] p1_row;
  logic [15:0] p1_step;
  logic        p1_ch2_acc, p1_ch3_acc;
  op_t         p1_op;

  logic        p2_valid, p2_need_a, p2_need_bd, p2_a_acc, p2_bd_acc, p2_last_slot;
  logic [15:0] p2_step;
  op_t         p2_op;

  logic signed [7:0] tbuf [2][DIM][DIM];
  logic [DIM-1:0][31:0] rbuf [DIM];
  ro_info_t    ro_info [2];

  // ---- decode of an accepted entry ----
  function automatic op_t make_op(input logic [63:0] rs1, input logic [63:0] rs2, input logic [63:0] p1,
                                  input logic [63:0] p2, input logic preloaded, input logic new_buf,
                                  input logic tpar, input logic rpar, input logic [7:0] id);
    op_t o;
    o.os = cfg_os; o.act = cfg_act; o.shift = cfg_shift; o.preloaded = preloaded; o.acc_scale = cfg_acc_scale;
    o.a_full = rs1[LOCAL_FULL_BIT]; o.a_garbage = rs1[31:0] == LOCAL_GARBAGE;
    o.bd_full = rs2[LOCAL_FULL_BIT]; o.pre_full = p1[LOCAL_FULL_BIT];
    o.buf_sel = new_buf; o.tpar = tpar; o.rpar = rpar;
    o.a_row = 32'(rs1[LOCAL_ROW_BITS-1:0]); o.a_rows = rs1[63:48]; o.a_cols = rs1[47:32];
    o.a_acc = rs1[LOCAL_ACC_BIT]; o.a_stride = cfg_a_stride;
    o.bd_row = 32'(rs2[LOCAL_ROW_BITS-1:0]); o.bd_rows = rs2[63:48]; o.bd_cols = rs2[47:32];
    o.bd_acc = rs2[LOCAL_ACC_BIT]; o.bd_garbage = rs2[31:0] == LOCAL_GARBAGE;
    o.pre_row = 32'(p1[LOCAL_ROW_BITS-1:0]); o.pre_rows = p1[63:48]; o.pre_cols = p1[47:32];
    o.pre_acc = p1[LOCAL_ACC_BIT]; o.pre_garbage = p1[31:0] == LOCAL_GARBAGE;
    o.c_row = 32'(p2[LOCAL_ROW_BITS-1:0]); o.c_rows = p2[63:48]; o.c_cols = p2[47:32];
    o.c_acc = p2[LOCAL_ACC_BIT]; o.c_accumulate = p2[LOCAL_ACCUMULATE_BIT];
    o.c_garbage = p2[31:0] == LOCAL_GARBAGE; o.c_stride = cfg_c_stride;
    o.id = id;
    return o;
  endfunction

  function automatic logic [15:0] max16(input logic [15:0] a, input logic [15:0] b);
    return a > b ? a : b;
  endfunction

  function automatic logic [15:0] slots_of(input op_t o);
    if (o.os) return max16(o.a_cols, o.bd_garbage ? 16'd1 : o.bd_rows);
    return max16(o.a_rows, o.c_garbage ? 16'd1 : o.c_rows);
  endfunction

  function automatic logic has_output(input op_t o);
    return !o.c_garbage;
  endfunction

  wire is_compute = in_funct == 8'(FUNCT_COMPUTE_PRELOADED) || in_funct == 8'(FUNCT_COMPUTE_ACCUMULATED);
  assign in_ready = !reset && (!is_compute || !s1_valid || s1_to_s2);
  wire in_fire = in_valid && in_ready;

  // ---- stage 1 ----
  wire s1_needs_work = s1.os || s1.preloaded;
  wire drained = !s2_valid && !p2_valid && !p1_valid && ro_pending == 8'd0 && now > last_present + 64'(LAT + 2);
  wire s1_mode_ok = (mesh_os == s1.os) || drained;
  wire s1_buf_ok = !s1.preloaded || (now + 1 >= last_use[s1.buf_sel] + 64'(DIM));
  wire s1_go = s1_valid && (s1_gate_ok || (s1_mode_ok && s1_buf_ok));
  wire [15:0] s1_r = 16'(DIM - 1) - s1_step;   // preload-chain row of this step
  wire s1_working = s1_go && s1_needs_work && s1_step < 16'(DIM);
  // channel 2: WS B row s1_r, OS A row s1_step; channel 3: OS D row s1_r
  wire need2 = s1_working && (s1.os ? (s1_step < s1.a_rows && !s1.a_garbage)
                                    : (s1_r < s1.pre_rows && !s1.pre_garbage));
  wire need3 = s1_working && s1.os && s1.preloaded && s1_r < s1.pre_rows && !s1.pre_garbage;
  wire ch2_acc = s1.os ? s1.a_acc : s1.pre_acc;
  wire [31:0] ch2_addr = s1.os ? s1.a_row + 32'(s1_step) * 32'(s1.a_stride) : s1.pre_row + 32'(s1_r);
  // A read granted on an earlier cycle of the same step is kept (`got`): the
  // memory port holds its data until that port reads again, so two operands
  // in one bank are read on two cycles instead of starving each other.
  logic [3:0] got;
  wire gnt2 = ch2_acc ? rd_acc_gnt[2] : rd_sp_gnt[2];
  wire gnt3 = s1.pre_acc ? rd_acc_gnt[3] : rd_sp_gnt[3];
  wire ok2 = !need2 || got[2] || gnt2;
  wire ok3 = !need3 || got[3] || gnt3;
  wire s1_step_fire = s1_working && ok2 && ok3;
  // staged: every step issued (possibly on an earlier cycle, while stage 2 was still busy)
  wire s1_done = s1_go && (!s1_needs_work || s1_step == 16'(DIM) || (s1_step_fire && s1_step == 16'(DIM - 1)));
  wire s1_to_s2 = s1_done && (!s2_valid || s2_finish);

  // ---- stage 2 ----
  wire [15:0] s2_slots = slots_of(s2);
  wire s2_last_step = s2_step + 16'd1 == s2_slots;
  wire s2_out_ok = !(s2.os && has_output(s2) && s2_last_step) || (now + 1 >= prev_out_last + 64'(2 * DIM));
  wire s2_working = s2_valid && s2_out_ok;
  wire need0 = s2_working && !s2.os && s2_step < s2.a_rows && !s2.a_garbage;
  wire need1 = s2_working && s2_step < s2.bd_rows && !s2.bd_garbage;
  wire gnt0 = s2.a_acc ? rd_acc_gnt[0] : rd_sp_gnt[0];
  wire gnt1 = s2.bd_acc ? rd_acc_gnt[1] : rd_sp_gnt[1];
  wire ok0 = !need0 || got[0] || gnt0;
  wire ok1 = !need1 || got[1] || gnt1;
  wire s2_step_fire = s2_working && ok0 && ok1;
  wire s2_finish = s2_step_fire && s2_last_step;

  always_comb begin
    rd_sp_req = '0;
    rd_acc_req = '0;
    rd_addr[0] = s2.a_row + 32'(s2_step) * 32'(s2.a_stride);
    rd_addr[1] = s2.bd_row + 32'(s2_step);
    rd_addr[2] = ch2_addr;
    rd_addr[3] = s1.pre_row + 32'(s1_r);
    if (need0 && !got[0]) begin rd_sp_req[0] = !s2.a_acc; rd_acc_req[0] = s2.a_acc; end
    if (need1 && !got[1]) begin rd_sp_req[1] = !s2.bd_acc; rd_acc_req[1] = s2.bd_acc; end
    if (need2 && !got[2]) begin rd_sp_req[2] = !ch2_acc; rd_acc_req[2] = ch2_acc; end
    if (need3 && !got[3]) begin rd_sp_req[3] = !s1.pre_acc; rd_acc_req[3] = s1.pre_acc; end
  end

  // ---- mesh ----
  logic                   m_a_valid, m_a_buf, m_a_last, m_a_par;
  logic [DIM-1:0][7:0]    m_a_vec;
  logic [DIM-1:0][31:0]   m_v_vec;
  logic                   m_pl_valid, m_pl_buf;
  logic [ROW_BITS-1:0]    m_pl_row;
  logic [DIM-1:0][31:0]   m_pl_vec;
  logic [DIM-1:0][31:0]   m_out;
  logic [DIM-1:0]         m_ro_valid, m_ro_par;
  logic [DIM-1:0][ROW_BITS-1:0] m_ro_row;
  logic [DIM-1:0][31:0]   m_ro_data;

  // An operand element: int8 from the scratchpad; from the accumulator the
  // full int32 (full bit) or the int32 requantized to int8 with acc_scale.
  function automatic logic [31:0] operand(input logic acc, input logic full, input logic [7:0] sp_v,
                                          input logic [31:0] acc_v, input logic [31:0] scale);
    logic signed [31:0] s;
    if (!acc) return 32'(signed'(sp_v));
    if (full) return acc_v;
    s = (scale != 32'h3f800000) ? gemmini_scale_round(acc_v, scale, 32) : acc_v;
    if (s > 127) return 32'd127;
    if (s < -128) return 32'hFFFFFF80;
    return s;
  endfunction

  always_comb begin
    // stage-1 presentation: preload chain and transposer input
    m_pl_valid = p1_valid && p1_pl;
    m_pl_buf = p1_op.buf_sel;
    m_pl_row = p1_row;
    for (int j = 0; j < DIM; j++) begin
      logic [31:0] v;
      if (p1_op.os) v = p1_need_d ? operand(p1_ch3_acc, p1_op.pre_full, sp_rdata[3][j], acc_rdata[3][j],
                                            p1_op.acc_scale) : 32'd0;
      else v = p1_need_b ? operand(p1_ch2_acc, p1_op.pre_full, sp_rdata[2][j], acc_rdata[2][j],
                                   p1_op.acc_scale) : 32'd0;
      m_pl_vec[j] = (16'(j) < p1_op.pre_cols) ? v : 32'd0;
    end
    // stage-2 presentation: one slot
    m_a_valid = p2_valid;
    m_a_buf = p2_op.buf_sel;
    m_a_last = p2_valid && p2_op.os && has_output(p2_op) && p2_last_slot;
    m_a_par = p2_op.rpar;
    for (int i = 0; i < DIM; i++) begin
      if (p2_op.os) m_a_vec[i] = tbuf[p2_op.tpar][i][p2_step[ROW_BITS-1:0]];
      else if (p2_need_a && 16'(i) < p2_op.a_cols)
        m_a_vec[i] = 8'(operand(p2_a_acc, p2_op.a_full, sp_rdata[0][i], acc_rdata[0][i], p2_op.acc_scale));
      else m_a_vec[i] = 8'd0;
    end
    for (int j = 0; j < DIM; j++) begin
      logic [31:0] v;
      v = p2_need_bd ? operand(p2_bd_acc, p2_op.bd_full, sp_rdata[1][j], acc_rdata[1][j], p2_op.acc_scale) : 32'd0;
      if (p2_op.os) v = 32'(signed'(v[7:0]));
      m_v_vec[j] = (p2_valid && 16'(j) < p2_op.bd_cols) ? v : 32'd0;
    end
  end

  gemmini_mesh #(.DIM(DIM), .ROW_BITS(ROW_BITS)) u_mesh (
    .clk, .os_mode(mesh_os),
    .a_valid(m_a_valid), .a_vec(m_a_vec), .a_buf(m_a_buf), .a_last(m_a_last), .a_parity(m_a_par),
    .v_vec(m_v_vec),
    .pl_valid(m_pl_valid), .pl_row(m_pl_row), .pl_buf(m_pl_buf), .pl_vec(m_pl_vec),
    .out_vec(m_out), .ro_valid(m_ro_valid), .ro_row(m_ro_row), .ro_parity(m_ro_par), .ro_data(m_ro_data));

  // WS result tags travel beside the mesh
  tag_t tag_in, tag_out;
  always_comb begin
    tag_in.wb = p2_valid && !p2_op.os && !p2_op.c_garbage && p2_step < p2_op.c_rows;
    tag_in.done = p2_valid && !p2_op.os && p2_last_slot;
    tag_in.addr = p2_op.c_row + 32'(p2_step) * 32'(p2_op.c_stride);
    tag_in.acc = p2_op.c_acc;
    tag_in.accumulate = p2_op.c_accumulate;
    tag_in.cols = p2_op.c_cols;
    tag_in.act = p2_op.act;
    tag_in.id = p2_op.id;
  end
  gemmini_delay #(.WIDTH($bits(tag_t)), .DEPTH(LAT)) u_tags (.clk, .d(tag_in), .q(tag_out));

  // ---- write back ----
  function automatic logic [31:0] rounding_shift(input logic signed [31:0] v, input logic [4:0] shift);
    logic signed [31:0] floor_v;
    logic [31:0] rem, half;
    if (shift == 5'd0) return v;
    floor_v = v >>> shift;
    rem = 32'(v) & ((32'd1 << shift) - 1);
    half = 32'd1 << (shift - 1);
    if (rem > half || (rem == half && floor_v[0])) return floor_v + 1;
    return floor_v;
  endfunction

  function automatic logic [31:0] to_sp(input logic signed [31:0] v, input logic [1:0] act);
    logic signed [31:0] s;
    s = (act == 2'd1 && v < 0) ? 0 : v;
    if (s > 127) return 32'd127;
    if (s < -128) return 32'hFFFFFF80;
    return s;
  endfunction

  wire ro_row_done = m_ro_valid[DIM-1];
  wire [ROW_BITS-1:0] ro_m = m_ro_row[DIM-1];
  ro_info_t ro_cur;
  assign ro_cur = ro_info[m_ro_par[DIM-1]];

  always_comb begin
    w_sp_req = 1'b0;
    w_acc_req = 1'b0;
    w_addr = 32'd0;
    w_accumulate = 1'b0;
    w_mask = '0;
    w_data = '0;
    if (tag_out.wb) begin
      w_sp_req = !tag_out.acc;
      w_acc_req = tag_out.acc;
      w_addr = tag_out.addr;
      w_accumulate = tag_out.accumulate;
      for (int j = 0; j < DIM; j++) begin
        w_mask[j] = 16'(j) < tag_out.cols;
        w_data[j] = tag_out.acc ? m_out[j] : to_sp(m_out[j], tag_out.act);
      end
    end else if (ro_row_done && !ro_cur.c_garbage && 16'(ro_m) < ro_cur.c_rows) begin
      w_sp_req = !ro_cur.c_acc;
      w_acc_req = ro_cur.c_acc;
      w_addr = ro_cur.c_row + 32'(ro_m) * 32'(ro_cur.c_stride);
      w_accumulate = ro_cur.c_accumulate;
      for (int j = 0; j < DIM; j++) begin
        logic [31:0] v, s;
        v = (j == DIM - 1) ? m_ro_data[j] : rbuf[ro_m][j];
        s = rounding_shift(v, ro_cur.shift);
        w_mask[j] = 16'(j) < ro_cur.c_cols;
        w_data[j] = ro_cur.c_acc ? s : to_sp(s, ro_cur.act);
      end
    end
  end

  assign debug_state = {s1_valid, s1_gate_ok, s2_valid, p1_valid, p2_valid, mesh_os, s1.os, s1_mode_ok, s1_buf_ok,
                        drained, ro_pending[5:0]};
  assign busy = s1_valid || s2_valid || p1_valid || p2_valid || ro_pending != 0 || now <= last_present + 64'(LAT + 1);

  always_ff @(posedge clk) begin
    done_valid <= '0;
    now <= now + 1;
    if (reset) begin
      now <= 64'(8 * DIM + 16);  // so that the first op finds the mesh drained
      cfg_os <= 1'b0; cfg_act <= 2'd0; cfg_acc_scale <= 32'h3f800000; cfg_a_stride <= 16'd1; cfg_c_stride <= 16'd1; cfg_shift <= 5'd0;
      pre1_state <= {16'd0, 16'd0, LOCAL_GARBAGE};
      pre2_state <= {16'd0, 16'd0, LOCAL_GARBAGE};
      buf_state <= 1'b0; tpar_state <= 1'b0; rpar_state <= 1'b0;
      last_use[0] <= 64'd0; last_use[1] <= 64'd0;
      last_present <= 64'd0;
      prev_out_last <= 64'd0;
      mesh_os <= 1'b0;
      ro_pending <= 8'd0;
      s1_valid <= 1'b0; s2_valid <= 1'b0; p1_valid <= 1'b0; p2_valid <= 1'b0;
      s1_gate_ok <= 1'b0;
      got <= 4'b0000;
    end else begin
      if (s2_step_fire) begin
        got[0] <= 1'b0; got[1] <= 1'b0;
      end else begin
        got[0] <= got[0] || (need0 && gnt0);
        got[1] <= got[1] || (need1 && gnt1);
      end
      if (s1_step_fire) begin
        got[2] <= 1'b0; got[3] <= 1'b0;
      end else begin
        got[2] <= got[2] || (need2 && gnt2);
        got[3] <= got[3] || (need3 && gnt3);
      end
      // accept
      if (in_fire) begin
        if (is_compute) begin
          logic [63:0] p1, p2;
          logic preloaded, nb;
          p1 = in_has_pre ? in_pre1 : pre1_state;
          p2 = in_has_pre ? in_pre2 : pre2_state;
          preloaded = in_funct == 8'(FUNCT_COMPUTE_PRELOADED);
          nb = preloaded ? !buf_state : buf_state;
          s1 <= make_op(in_rs1, in_rs2, p1, p2, preloaded, nb, cfg_os ? !tpar_state : tpar_state,
                        (cfg_os && p2[31:0] != LOCAL_GARBAGE) ? !rpar_state : rpar_state, in_id);
          s1_valid <= 1'b1;
          s1_gate_ok <= 1'b0;
          s1_step <= 16'd0;
          buf_state <= nb;
          if (cfg_os) tpar_state <= !tpar_state;
          if (cfg_os && p2[31:0] != LOCAL_GARBAGE) rpar_state <= !rpar_state;
          pre1_state <= p1;
          pre2_state <= p2;
        end else begin
          if (in_funct == 8'(FUNCT_CONFIG)) begin
            cfg_os <= !in_rs1[CFG_EX_DATAFLOW_BIT];
            cfg_act <= in_rs1[4:3];
            cfg_a_stride <= in_rs1[31:16];
            cfg_c_stride <= in_rs2[63:48];
            cfg_shift <= in_rs2[4:0];
            cfg_acc_scale <= in_rs1[63:32];
          end else if (in_funct == 8'(FUNCT_PRELOAD)) begin
            pre1_state <= in_rs1;
            pre2_state <= in_rs2;
          end
          done_valid[0] <= 1'b1;
          done_id[0] <= in_id;
        end
      end

      // stage 1
      // the gate opens once per op (a leaving op must not pass it on to the next)
      if (s1_go && mesh_os != s1.os) mesh_os <= s1.os;
      if (s1_valid && !s1_gate_ok && s1_mode_ok && s1_buf_ok && !s1_to_s2) s1_gate_ok <= 1'b1;
      p1_valid <= 1'b0;
      if (s1_step_fire) begin
        p1_valid <= 1'b1;
        p1_pl <= s1.preloaded;
        p1_row <= ROW_BITS'(s1_r);
        p1_step <= s1_step;
        p1_need_a <= need2 && s1.os;
        p1_need_b <= need2 && !s1.os;
        p1_need_d <= need3;
        p1_ch2_acc <= ch2_acc;
        p1_ch3_acc <= s1.pre_acc;
        p1_op <= s1;
        if (!(in_fire && is_compute)) s1_step <= s1_step + 16'd1;
      end
      if (p1_valid && p1_op.os) begin
        for (int j = 0; j < DIM; j++) begin
          // row p1_step of A; the mesh later takes column k (A[i][k] to mesh row i)
          tbuf[p1_op.tpar][p1_step[ROW_BITS-1:0]][j] <=
            (p1_need_a && 16'(j) < p1_op.a_cols)
              ? 8'(operand(p1_ch2_acc, p1_op.a_full, sp_rdata[2][j], acc_rdata[2][j], p1_op.acc_scale)) : 8'd0;
        end
      end
      if (p1_valid) last_present <= now;

      // stage 1 -> stage 2
      if (s1_to_s2) begin
        s2 <= s1;
        s2_valid <= 1'b1;
        s2_step <= 16'd0;
        if (!(in_fire && is_compute)) s1_valid <= 1'b0;
      end else if (s2_finish) begin
        s2_valid <= 1'b0;
      end

      // stage 2
      p2_valid <= 1'b0;
      if (s2_step_fire) begin
        p2_valid <= 1'b1;
        p2_step <= s2_step;
        p2_need_a <= need0;
        p2_need_bd <= need1;
        p2_a_acc <= s2.a_acc;
        p2_bd_acc <= s2.bd_acc;
        p2_last_slot <= s2_last_step;
        p2_op <= s2;
        if (!s1_to_s2) s2_step <= s2_step + 16'd1;
        // the slot uses its buffer from the next cycle on: record it now, so that stage 1 (which may take a new
        // op in this very cycle) never sees a stale last use of the buffer it is about to preload
        last_use[s2.buf_sel] <= now + 1;
        // the spacing rule of the next output op must see this one at once
        if (s2.os && has_output(s2) && s2_last_step) prev_out_last <= now + 1;
      end
      if (p2_valid) begin
        last_present <= now;
        if (p2_last_slot && p2_op.os) begin
          if (has_output(p2_op)) begin
            ro_info[p2_op.rpar] <= '{c_row: p2_op.c_row, c_rows: p2_op.c_rows, c_cols: p2_op.c_cols,
                                     c_acc: p2_op.c_acc, c_accumulate: p2_op.c_accumulate,
                                     c_garbage: p2_op.c_garbage, c_stride: p2_op.c_stride,
                                     act: p2_op.act, shift: p2_op.shift, id: p2_op.id};
          end else begin
            done_valid[2] <= 1'b1;
            done_id[2] <= p2_op.id;
          end
        end
      end

      // OS readout collection
      for (int j = 0; j < DIM - 1; j++) begin
        if (m_ro_valid[j]) rbuf[m_ro_row[j]][j] <= m_ro_data[j];
      end
      begin
        logic ro_start, ro_end;
        ro_start = p2_valid && p2_last_slot && p2_op.os && has_output(p2_op);
        ro_end = ro_row_done && ro_m == ROW_BITS'(DIM - 1);
        ro_pending <= ro_pending + (ro_start ? 8'd1 : 8'd0) - (ro_end ? 8'd1 : 8'd0);
        if (ro_end) begin
          done_valid[1] <= 1'b1;
          done_id[1] <= ro_cur.id;
        end
      end
      if (tag_out.done) begin
        done_valid[1] <= 1'b1;
        done_id[1] <= tag_out.id;
      end
    end
  end
endmodule
