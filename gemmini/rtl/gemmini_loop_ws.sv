// LOOP_WS unroller (Gemmini's LoopMatmul), in front of the command front end.
//
// The five configuration words (funct 9-13) are held in the loop slot being
// configured; the start word (8) marks it configured.  Two slots: up to two
// loops in flight.  Five sub-unrollers (ldA: mvin, ldB: mvin2, ldD: mvin3 into
// the accumulator, ex: preload + compute pairs, stC: mvout) each take the
// oldest configured loop they have not run.  One command leaves per cycle:
// stC first, then ex, then ldD, then ldA / ldB (the head loop's loads first;
// on one loop, B when A's K iterator is ahead or B is at its start).  ex steps
// (k, j, i) only once ldA has issued past (k, i), ldB past (k, j) (compared with
// ldA's k, as Gemmini does) and ldD is done; stC moves block (i, j) once ex is
// on its last k and past it.  A sub-unroller whose queue has no room waits
// (`room`, per kind: load, execute, store).  Loops alternate between the
// scratchpad halves; each loop that stores C moves the next loop's
// accumulator rows to the other half.  The addresses are those of
// gemmini/sim/loop_units.py (ldB always moves DIM rows, as Gemmini's does).
// Other commands pass while no loop is configured.  `out_origin` is the input
// index of the command an output came from (the start word for unrolled ones).
module gemmini_loop_ws
  import gemmini_isa_pkg::*;
#(
  parameter int DIM = 4,
  parameter int SP_ROWS = 1024,
  parameter int ACC_ROWS = 128,
  parameter int MAX_MVIN_BYTES = 64
) (
  input  logic        clk,
  input  logic        reset,
  input  logic        in_valid,
  output logic        in_ready,
  input  logic [7:0]  in_funct,
  input  logic [63:0] in_rs1,
  input  logic [63:0] in_rs2,
  output logic        out_valid,
  input  logic        out_ready,
  output logic [7:0]  out_funct,
  output logic [63:0] out_rs1,
  output logic [63:0] out_rs2,
  output logic [31:0] out_origin,
  input  logic [2:0]  room,
  output logic        busy
);
  localparam int BLEN = (MAX_MVIN_BYTES / DIM > 1) ? MAX_MVIN_BYTES / DIM : 1;
  localparam int BLEN_ACC = (MAX_MVIN_BYTES / (DIM * 4) > 1) ? MAX_MVIN_BYTES / (DIM * 4) : 1;
  localparam int HALF = SP_ROWS / 2;
  localparam int AHALF = ACC_ROWS / 2;
  localparam logic [7:0] F_LOOP = 8'd8, F_FIRST = 8'd9, F_LAST = 8'd13;
  localparam int UA = 0, UB = 1, UD = 2, UX = 3, UC = 4;
  localparam logic [31:0] ACC = 32'(1) << LOCAL_ACC_BIT;
  localparam logic [31:0] ACCUM = 32'(1) << LOCAL_ACCUMULATE_BIT;
  localparam logic [31:0] FULL = 32'(1) << LOCAL_FULL_BIT;

  // ---- loop slots --------------------------------------------------------------
  logic [15:0] s_I [2], s_J [2], s_K [2], s_pI [2], s_pJ [2], s_pK [2];
  logic [63:0] s_A [2], s_B [2], s_D [2], s_C [2], s_As [2], s_Bs [2], s_Ds [2], s_Cs [2];
  logic        s_exacc [2], s_fullc [2], s_lowd [2], s_at [2], s_bt [2];
  logic [1:0]  s_aid [2], s_bid [2];
  logic        s_cfg [2], s_run [2];
  logic [4:0]  s_started [2], s_done [2];
  logic [31:0] s_origin [2];
  logic        head;
  logic [31:0] acc_d, acc_c, acc_st, in_count;

  // ---- sub-unrollers -------------------------------------------------------------
  logic        u_act [5];
  logic        u_loop [5];
  logic [15:0] a_i, a_k, b_k, b_j, d_i, d_j, e_k, e_j, e_i, c_i, c_j;
  logic        e_comp;
  logic [31:0] a_start, b_end, x_astart, x_bend, d_start, x_cstart, c_start;

  function automatic logic [15:0] fadd(input logic [15:0] u, input logic [15:0] n, input logic [15:0] top);
    return (32'(u) + 32'(n) > 32'(top) - 1) ? 16'd0 : u + n;
  endfunction
  function automatic logic [15:0] min16(input logic [15:0] a, input logic [15:0] b);
    return (a < b) ? a : b;
  endfunction
  function automatic logic [63:0] rs_local(input logic [15:0] rows, input logic [15:0] cols, input logic [31:0] a);
    return {rows, cols, a};
  endfunction

  wire loop_configured = s_cfg[0] || s_cfg[1];
  wire cfg_slot = s_cfg[head] ? !head : head;

  // ---- the commands each sub-unroller would issue now ---------------------------------
  logic [63:0] cmd_rs1 [5], cmd_rs2 [5];
  logic [7:0]  cmd_funct [5];
  logic [1:0]  cmd_kind [5];
  logic [15:0] c_blocks;
  always_comb begin
    logic l;
    logic [15:0] I, J, K, r, c, maxc, maxr, rpad, cpad, maxb, blocks, cols, rows;
    logic [15:0] kr, ir, jc;
    logic [63:0] off;
    logic [31:0] a_addr, b_addr, c_addr;
    // ldA
    l = u_loop[UA]; I = s_I[l]; K = s_K[l];
    r = s_at[l] ? a_k : a_i; c = s_at[l] ? a_i : a_k;
    maxc = s_at[l] ? I : K; maxr = s_at[l] ? K : I;
    rpad = s_at[l] ? s_pK[l] : s_pI[l]; cpad = s_at[l] ? s_pI[l] : s_pK[l];
    maxb = min16(maxc, 16'(BLEN));
    blocks = (32'(c) + 32'(maxb) <= 32'(maxc)) ? maxb : maxc - c;
    cols = blocks * 16'(DIM) - ((c + blocks >= maxc) ? cpad : 16'd0);
    rows = 16'(DIM) - ((r == maxr - 1) ? rpad : 16'd0);
    off = ((64'(r) * s_As[l] + 64'(c)) * 64'(DIM)) & 64'hFFFFFFFF;
    cmd_funct[UA] = 8'(FUNCT_MVIN); cmd_kind[UA] = 2'd0;
    cmd_rs1[UA] = s_A[l] + off;
    cmd_rs2[UA] = rs_local(rows, cols, a_start + (32'(r) * 32'(maxc) + 32'(c)) * DIM);
    // ldB (always DIM rows)
    l = u_loop[UB]; J = s_J[l]; K = s_K[l];
    r = s_bt[l] ? b_j : b_k; c = s_bt[l] ? b_k : b_j;
    maxc = s_bt[l] ? K : J;
    cpad = s_bt[l] ? s_pK[l] : s_pJ[l];
    maxb = min16(maxc, 16'(BLEN));
    blocks = (32'(c) + 32'(maxb) <= 32'(maxc)) ? maxb : maxc - c;
    cols = blocks * 16'(DIM) - ((c + blocks >= maxc) ? cpad : 16'd0);
    off = ((64'(r) * s_Bs[l] + 64'(c)) * 64'(DIM)) & 64'hFFFFFFFF;
    cmd_funct[UB] = 8'(FUNCT_MVIN2); cmd_kind[UB] = 2'd0;
    cmd_rs1[UB] = s_B[l] + off;
    cmd_rs2[UB] = rs_local(16'(DIM), cols, b_end - 32'(K) * 32'(J) * DIM + (32'(r) * 32'(maxc) + 32'(c)) * DIM);
    // ldD
    l = u_loop[UD]; I = s_I[l]; J = s_J[l];
    maxb = min16(J, s_lowd[l] ? 16'(BLEN) : 16'(BLEN_ACC));
    blocks = (32'(d_j) + 32'(maxb) <= 32'(J)) ? maxb : J - d_j;
    cols = blocks * 16'(DIM) - ((d_j + blocks >= J) ? s_pJ[l] : 16'd0);
    rows = 16'(DIM) - ((d_i == I - 1) ? s_pI[l] : 16'd0);
    off = ((64'(d_i) * s_Ds[l] + 64'(d_j)) * 64'(DIM) * (s_lowd[l] ? 64'd1 : 64'd4)) & 64'hFFFFFFFF;
    cmd_funct[UD] = 8'(FUNCT_MVIN3); cmd_kind[UD] = 2'd0;
    cmd_rs1[UD] = s_D[l] + off;
    cmd_rs2[UD] = rs_local(rows, cols, ACC | (d_start + (32'(d_i) * 32'(J) + 32'(d_j)) * DIM));
    // ex
    l = u_loop[UX]; I = s_I[l]; J = s_J[l]; K = s_K[l];
    kr = 16'(DIM) - ((e_k == K - 1) ? s_pK[l] : 16'd0);
    ir = 16'(DIM) - ((e_i == I - 1) ? s_pI[l] : 16'd0);
    jc = 16'(DIM) - ((e_j == J - 1) ? s_pJ[l] : 16'd0);
    a_addr = x_astart + (s_at[l] ? (32'(e_k) * 32'(I) + 32'(e_i)) : (32'(e_i) * 32'(K) + 32'(e_k))) * DIM;
    b_addr = x_bend - 32'(K) * 32'(J) * DIM
             + (s_bt[l] ? (32'(e_j) * 32'(K) + 32'(e_k)) : (32'(e_k) * 32'(J) + 32'(e_j))) * DIM;
    c_addr = ACC | ((s_exacc[l] || e_k != 16'd0) ? ACCUM : 32'd0) | (x_cstart + (32'(e_i) * 32'(J) + 32'(e_j)) * DIM);
    cmd_kind[UX] = 2'd1;
    if (!e_comp) begin
      cmd_funct[UX] = 8'(FUNCT_PRELOAD);
      cmd_rs1[UX] = rs_local(kr, jc, (e_i == 16'd0) ? b_addr : LOCAL_GARBAGE);
      cmd_rs2[UX] = rs_local(ir, jc, c_addr);
    end else begin
      cmd_funct[UX] = (e_i == 16'd0) ? 8'(FUNCT_COMPUTE_PRELOADED) : 8'(FUNCT_COMPUTE_ACCUMULATED);
      cmd_rs1[UX] = rs_local(ir, kr, a_addr);
      cmd_rs2[UX] = rs_local(16'(DIM), 16'(DIM), LOCAL_GARBAGE);
    end
    // stC
    l = u_loop[UC]; I = s_I[l]; J = s_J[l];
    maxb = s_fullc[l] ? 16'd1 : min16(J, 16'(BLEN));
    c_blocks = (32'(c_j) + 32'(maxb) <= 32'(J)) ? maxb : J - c_j;
    cols = c_blocks * 16'(DIM) - ((c_j + c_blocks >= J) ? s_pJ[l] : 16'd0);
    rows = 16'(DIM) - ((c_i == I - 1) ? s_pI[l] : 16'd0);
    off = ((64'(c_i) * s_Cs[l] + 64'(c_j)) * 64'(DIM) * (s_fullc[l] ? 64'd4 : 64'd1)) & 64'hFFFFFFFF;
    cmd_funct[UC] = 8'(FUNCT_MVOUT); cmd_kind[UC] = 2'd2;
    cmd_rs1[UC] = s_C[l] + off;
    cmd_rs2[UC] = rs_local(rows, cols, ACC | (s_fullc[l] ? FULL : 32'd0) | (c_start + (32'(c_i) * 32'(J) + 32'(c_j)) * DIM));
  end

  // ---- hazards and the arbiters ----------------------------------------------------------
  logic ok [5];
  logic ab_sel_b;
  logic [2:0] chosen;   // 0..4, 7: none
  always_comb begin
    logic [15:0] blocks;
    ok[UA] = 1'b1; ok[UB] = 1'b1; ok[UD] = 1'b1;
    ok[UX] = (u_loop[UA] != u_loop[UX] || !u_act[UA] || a_k > e_k || (a_k == e_k && a_i > e_i)) &&
             (u_loop[UB] != u_loop[UX] || !u_act[UB] || b_k > e_k || (a_k == e_k && b_j > e_j)) &&
             (u_loop[UD] != u_loop[UX] || !u_act[UD]);
    blocks = c_blocks;
    ok[UC] = u_loop[UX] != u_loop[UC] || !u_act[UX] ||
             (e_k == s_K[u_loop[UC]] - 1 && (32'(e_j) >= 32'(c_j) + 32'(blocks) ||
                                              (32'(e_j) == 32'(c_j) + 32'(blocks) - 1 && e_i > c_i)));
    if (u_loop[UA] != u_loop[UB]) ab_sel_b = u_loop[UA] != head;
    else if (!u_act[UA]) ab_sel_b = 1'b1;
    else if (!u_act[UB]) ab_sel_b = 1'b0;
    else ab_sel_b = a_k > b_k || (b_k == 16'd0 && b_j == 16'd0);
    chosen = 3'd7;
    for (int n = 0; n < 4; n++) begin
      int u;
      u = (n == 0) ? UC : (n == 1) ? UX : (n == 2) ? UD : (ab_sel_b ? UB : UA);
      if (chosen == 3'd7 && u_act[u] && room[cmd_kind[u]] && ok[u]) chosen = 3'(u);
    end
  end

  wire in_is_loop = in_funct == F_LOOP || (in_funct >= F_FIRST && in_funct <= F_LAST);
  always_comb begin
    if (loop_configured) begin
      out_valid = chosen != 3'd7;
      out_funct = (chosen == 3'd7) ? 8'd0 : cmd_funct[chosen];
      out_rs1 = (chosen == 3'd7) ? 64'd0 : cmd_rs1[chosen];
      out_rs2 = (chosen == 3'd7) ? 64'd0 : cmd_rs2[chosen];
      out_origin = s_origin[(chosen == 3'd7) ? 1'b0 : u_loop[chosen]];
    end else begin
      out_valid = in_valid && !in_is_loop;
      out_funct = in_funct;
      out_rs1 = in_rs1;
      out_rs2 = in_rs2;
      out_origin = in_count;
    end
    in_ready = !reset && (in_is_loop ? !s_cfg[cfg_slot] : (!loop_configured && out_ready));
  end
  wire fire = out_valid && out_ready && loop_configured;
  assign busy = loop_configured || u_act[0] || u_act[1] || u_act[2] || u_act[3] || u_act[4];

  // ---- registers -------------------------------------------------------------------------
  always_ff @(posedge clk) begin
    if (reset) begin
      for (int s = 0; s < 2; s++) begin
        s_cfg[s] <= 1'b0; s_run[s] <= 1'b0; s_started[s] <= 5'd0; s_done[s] <= 5'd0;
      end
      for (int u = 0; u < 5; u++) begin
        u_act[u] <= 1'b0; u_loop[u] <= 1'b0;
      end
      {a_i, a_k, b_k, b_j, d_i, d_j, e_k, e_j, e_i, c_i, c_j} <= '0;
      e_comp <= 1'b0;
      head <= 1'b0;
      acc_d <= 32'd0; acc_c <= 32'd0; acc_st <= 32'd0; in_count <= 32'd0;
    end else begin
      logic hd;
      hd = head;
      if (in_valid && in_ready) in_count <= in_count + 1;
      // configuration words
      if (in_valid && in_ready && in_is_loop) begin
        case (in_funct)
          8'd9: begin
            s_pI[cfg_slot] <= in_rs1[15:0]; s_pJ[cfg_slot] <= in_rs1[31:16]; s_pK[cfg_slot] <= in_rs1[47:32];
            s_I[cfg_slot] <= in_rs2[15:0]; s_J[cfg_slot] <= in_rs2[31:16]; s_K[cfg_slot] <= in_rs2[47:32];
          end
          8'd10: begin s_A[cfg_slot] <= in_rs1; s_B[cfg_slot] <= in_rs2; end
          8'd11: begin s_D[cfg_slot] <= in_rs1; s_C[cfg_slot] <= in_rs2; end
          8'd12: begin s_As[cfg_slot] <= in_rs1; s_Bs[cfg_slot] <= in_rs2; end
          8'd13: begin s_Ds[cfg_slot] <= in_rs1; s_Cs[cfg_slot] <= in_rs2; end
          default: begin  // the start word
            s_exacc[cfg_slot] <= in_rs1[0]; s_fullc[cfg_slot] <= in_rs1[1]; s_lowd[cfg_slot] <= in_rs1[2];
            s_bid[cfg_slot] <= in_rs1[17:16]; s_aid[cfg_slot] <= in_rs1[19:18];
            s_at[cfg_slot] <= in_rs2[0]; s_bt[cfg_slot] <= in_rs2[1];
            s_cfg[cfg_slot] <= 1'b1;
            s_origin[cfg_slot] <= in_count;
          end
        endcase
      end
      // the command that leaves moves its sub-unroller on
      if (fire) begin
        logic l;
        logic [15:0] mb, ni, nj, nk;
        l = u_loop[chosen];
        case (chosen)
          3'(UA): begin
            mb = min16(s_at[l] ? s_I[l] : s_K[l], 16'(BLEN));
            ni = fadd(a_i, s_at[l] ? mb : 16'd1, s_I[l]);
            nk = (ni == 16'd0) ? fadd(a_k, s_at[l] ? 16'd1 : mb, s_K[l]) : a_k;
            a_i <= ni; a_k <= nk;
            if (ni == 16'd0 && nk == 16'd0) u_act[UA] <= 1'b0;
          end
          3'(UB): begin
            mb = min16(s_bt[l] ? s_K[l] : s_J[l], 16'(BLEN));
            nj = fadd(b_j, s_bt[l] ? 16'd1 : mb, s_J[l]);
            nk = (nj == 16'd0) ? fadd(b_k, s_bt[l] ? mb : 16'd1, s_K[l]) : b_k;
            b_j <= nj; b_k <= nk;
            if (nj == 16'd0 && nk == 16'd0) u_act[UB] <= 1'b0;
          end
          3'(UD): begin
            mb = min16(s_J[l], s_lowd[l] ? 16'(BLEN) : 16'(BLEN_ACC));
            ni = fadd(d_i, 16'd1, s_I[l]);
            nj = (ni == 16'd0) ? fadd(d_j, mb, s_J[l]) : d_j;
            d_i <= ni; d_j <= nj;
            if (ni == 16'd0 && nj == 16'd0) u_act[UD] <= 1'b0;
          end
          3'(UX): begin
            if (!e_comp) e_comp <= 1'b1;
            else begin
              e_comp <= 1'b0;
              ni = fadd(e_i, 16'd1, s_I[l]);
              nj = (ni == 16'd0) ? fadd(e_j, 16'd1, s_J[l]) : e_j;
              nk = (ni == 16'd0 && nj == 16'd0) ? fadd(e_k, 16'd1, s_K[l]) : e_k;
              e_i <= ni; e_j <= nj; e_k <= nk;
              if (ni == 16'd0 && nj == 16'd0 && nk == 16'd0) u_act[UX] <= 1'b0;
            end
          end
          default: begin
            mb = s_fullc[l] ? 16'd1 : min16(s_J[l], 16'(BLEN));
            ni = fadd(c_i, 16'd1, s_I[l]);
            nj = (ni == 16'd0) ? fadd(c_j, mb, s_J[l]) : c_j;
            c_i <= ni; c_j <= nj;
            if (ni == 16'd0 && nj == 16'd0) u_act[UC] <= 1'b0;
          end
        endcase
      end
      // finished sub-unrollers, the head loop's retirement
      for (int u = 0; u < 5; u++) begin
        if (!u_act[u] && s_run[u_loop[u]] && s_started[u_loop[u]][u]) s_done[u_loop[u]][u] <= 1'b1;
      end
      if (s_run[head] && s_done[head] == 5'h1F) begin
        s_cfg[head] <= 1'b0; s_run[head] <= 1'b0; s_started[head] <= 5'd0; s_done[head] <= 5'd0;
        head <= !head;
      end
      // idle sub-unrollers take the oldest configured loop they have not run
      for (int u = 0; u < 5; u++) begin
        logic sid;
        logic take;
        sid = s_started[hd][u] ? !hd : hd;
        take = !s_started[sid][u] && s_cfg[sid] && !u_act[u] && !(fire && chosen == 3'(u));
        if (u == UX) take = take && s_started[sid][UA] && s_started[sid][UB] && s_started[sid][UD];
        if (u == UC) take = take && s_started[sid][UX];
        if (take) begin
          s_started[sid][u] <= 1'b1;
          s_run[sid] <= 1'b1;
          u_loop[u] <= sid;
          case (u)
            UA: begin
              u_act[u] <= s_A[sid] != 64'd0; a_i <= 16'd0; a_k <= 16'd0;
              a_start <= (s_aid[sid] == 2'd0) ? 32'(sid) * HALF : (32'(s_aid[sid]) - 1) * HALF;
            end
            UB: begin
              u_act[u] <= s_B[sid] != 64'd0; b_k <= 16'd0; b_j <= 16'd0;
              b_end <= (s_bid[sid] == 2'd0) ? (32'(sid) + 1) * HALF : 32'(s_bid[sid]) * HALF;
            end
            UD: begin
              u_act[u] <= s_D[sid] != 64'd0; d_i <= 16'd0; d_j <= 16'd0;
              d_start <= acc_d;
              if (s_C[sid] != 64'd0) acc_d <= (acc_d + AHALF) % ACC_ROWS;
            end
            UX: begin
              u_act[u] <= 1'b1; e_k <= 16'd0; e_j <= 16'd0; e_i <= 16'd0; e_comp <= 1'b0;
              x_astart <= (s_aid[sid] == 2'd0) ? 32'(sid) * HALF : (32'(s_aid[sid]) - 1) * HALF;
              x_bend <= (s_bid[sid] == 2'd0) ? (32'(sid) + 1) * HALF : 32'(s_bid[sid]) * HALF;
              x_cstart <= acc_c;
              if (s_C[sid] != 64'd0) acc_c <= (acc_c + AHALF) % ACC_ROWS;
            end
            default: begin
              u_act[u] <= s_C[sid] != 64'd0; c_i <= 16'd0; c_j <= 16'd0;
              c_start <= acc_st;
              if (s_C[sid] != 64'd0) acc_st <= (acc_st + AHALF) % ACC_ROWS;
            end
          endcase
        end
      end
    end
  end
endmodule
