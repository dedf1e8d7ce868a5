// Store unit: config_st and mvout.
//
// A reader reads one local row per cycle (when a row buffer is free; a wide
// mvout is read block by block, DIM-column block b of row r from local row
// row + b*DIM + r, each block its own row buffer and DMA beats),
// converts it (accumulator rows: float32 scale, activation, saturate to
// int8, or the raw int32 row when the full bit is set) into one of two row
// buffers; a writer sends each full row to main memory as DMA write beats
// of up to BEAT bytes.  Writes are posted: an mvout is done when its last
// beat has been accepted by the memory port.
module gemmini_store
  import gemmini_isa_pkg::*;
  import gemmini_dpi_pkg::*;
#(
  parameter int DIM = 4,
  parameter int BEAT = 16
) (
  input  logic        clk,
  input  logic        reset,
  input  logic        in_valid,
  output logic        in_ready,
  input  logic [7:0]  in_funct,
  input  logic [63:0] in_rs1,
  input  logic [63:0] in_rs2,
  input  logic [7:0]  in_id,
  output logic        cfg_done_valid,
  output logic [7:0]  cfg_done_id,
  output logic        done_valid,
  output logic [7:0]  done_id,
  // DMA write port
  output logic        dma_req_valid,
  input  logic        dma_req_ready,
  output logic [63:0] dma_req_addr,
  output logic [7:0]  dma_req_len,
  output logic [BEAT*8-1:0] dma_req_data,
  // local memory read port
  output logic        sp_req,
  output logic        acc_req,
  input  logic        sp_gnt,
  input  logic        acc_gnt,
  output logic [31:0] r_addr,
  input  logic [DIM-1:0][7:0]  sp_rdata,
  input  logic [DIM-1:0][31:0] acc_rdata,
  output logic        busy
);
  localparam int ROW_BYTES = DIM * 4;

  logic [63:0] cfg_stride;
  logic [1:0]  cfg_act;
  logic [31:0] cfg_scale;

  // reader
  logic        r_active;
  logic [63:0] r_dram;
  logic [31:0] r_row;
  logic [15:0] r_rows, r_cols, r_r, r_b;  // r_b: first column of the block being read
  logic        r_acc, r_full;
  logic [7:0]  r_id;
  logic [63:0] r_stride;
  logic [1:0]  r_act;
  logic [31:0] r_scale;
  // read in flight (data arrives this cycle)
  logic        p_valid, p_last;
  logic        p_slot;
  logic [63:0] p_dram;

  // row buffers
  logic [ROW_BYTES*8-1:0] ob_data [2];
  logic [63:0]            ob_dram [2];
  logic [7:0]             ob_beats [2];
  logic [15:0]            ob_bytes [2];
  logic                   ob_last [2];
  logic [7:0]             ob_id [2];
  logic                   ob_busy [2];   // reserved by a read or full
  logic                   ob_full [2];
  logic                   read_sel, send_sel;
  logic [7:0]             s_beat;

  assign in_ready = !r_active && !reset;
  wire in_fire = in_valid && in_ready;

  wire want_read = r_active && !ob_busy[read_sel];
  assign sp_req = want_read && !r_acc;
  assign acc_req = want_read && r_acc;
  assign r_addr = r_row + 32'(r_b) + 32'(r_r);  // block b starts b*DIM rows on: r_b = b*DIM
  wire [15:0] r_bcols = (r_cols - r_b > 16'(DIM)) ? 16'(DIM) : r_cols - r_b;
  wire        r_lastblk = r_b + 16'(DIM) >= r_cols;
  wire read_fire = want_read && (r_acc ? acc_gnt : sp_gnt);

  assign dma_req_valid = ob_full[send_sel];
  assign dma_req_addr = ob_dram[send_sel] + 64'(s_beat) * 64'(BEAT);
  assign dma_req_len = 8'((32'(ob_bytes[send_sel]) - 32'(s_beat) * BEAT > BEAT) ? BEAT
                          : 32'(ob_bytes[send_sel]) - 32'(s_beat) * BEAT);
  assign dma_req_data = ob_data[send_sel][32'(s_beat) * BEAT * 8 +: BEAT * 8];
  wire send_fire = dma_req_valid && dma_req_ready;

  assign busy = r_active || p_valid || ob_busy[0] || ob_busy[1];

  function automatic logic [7:0] to_int8(input logic signed [31:0] v, input logic [31:0] scale,
                                         input logic [1:0] act);
    logic signed [31:0] s;
    s = (scale != 32'h3f800000) ? gemmini_scale_round(v, scale, 32) : v;
    if (act == 2'd1 && s < 0) s = 0;
    if (s > 127) return 8'sd127;
    if (s < -128) return 8'h80;
    return s[7:0];
  endfunction

  always_ff @(posedge clk) begin
    done_valid <= 1'b0;
    cfg_done_valid <= 1'b0;
    if (reset) begin
      r_active <= 1'b0;
      p_valid <= 1'b0;
      ob_busy[0] <= 1'b0; ob_busy[1] <= 1'b0;
      ob_full[0] <= 1'b0; ob_full[1] <= 1'b0;
      read_sel <= 1'b0; send_sel <= 1'b0;
      s_beat <= 8'd0;
      cfg_stride <= 64'd0;
      cfg_act <= 2'd0;
      cfg_scale <= 32'h3f800000;
    end else begin
      if (in_fire) begin
        if (in_funct == 8'(FUNCT_CONFIG)) begin
          cfg_stride <= 64'(in_rs2[31:0]);
          cfg_act <= in_rs1[3:2];
          cfg_scale <= in_rs2[63:32];
          cfg_done_valid <= 1'b1;
          cfg_done_id <= in_id;
        end else begin
          r_active <= 1'b1;
          r_dram <= in_rs1;
          r_row <= 32'(in_rs2[LOCAL_ROW_BITS-1:0]);
          r_acc <= in_rs2[LOCAL_ACC_BIT];
          r_full <= in_rs2[LOCAL_FULL_BIT];
          r_cols <= in_rs2[47:32];
          r_rows <= in_rs2[63:48];
          r_r <= 16'd0;
          r_b <= 16'd0;
          r_id <= in_id;
          r_stride <= cfg_stride;
          r_act <= cfg_act;
          r_scale <= cfg_scale;
        end
      end

      // issue a row read
      p_valid <= 1'b0;
      if (read_fire) begin
        p_valid <= 1'b1;
        p_slot <= read_sel;
        p_last <= (r_r + 16'd1 == r_rows) && r_lastblk;
        p_dram <= r_dram + 64'(r_r) * r_stride + 64'(r_b) * ((r_acc && r_full) ? 64'd4 : 64'd1);
        ob_busy[read_sel] <= 1'b1;
        ob_id[read_sel] <= r_id;
        ob_bytes[read_sel] <= (r_acc && r_full) ? 16'(r_bcols * 4) : r_bcols;
        ob_beats[read_sel] <= 8'((((r_acc && r_full) ? 32'(r_bcols) * 4 : 32'(r_bcols)) + BEAT - 1) / BEAT);
        read_sel <= !read_sel;
        if (r_lastblk) begin
          r_b <= 16'd0;
          r_r <= r_r + 16'd1;
          if (r_r + 16'd1 == r_rows) r_active <= 1'b0;
        end else begin
          r_b <= r_b + 16'(DIM);
        end
      end
      // convert the row that was read last cycle
      if (p_valid) begin
        for (int e = 0; e < DIM; e++) begin
          if (r_acc && r_full) ob_data[p_slot][e*32 +: 32] <= acc_rdata[e];
          else if (r_acc) ob_data[p_slot][e*8 +: 8] <= to_int8(acc_rdata[e], r_scale, r_act);
          else ob_data[p_slot][e*8 +: 8] <= sp_rdata[e];
        end
        ob_dram[p_slot] <= p_dram;
        ob_last[p_slot] <= p_last;
        ob_full[p_slot] <= 1'b1;
      end
      // send beats
      if (send_fire) begin
        if (s_beat + 8'd1 == ob_beats[send_sel]) begin
          s_beat <= 8'd0;
          ob_full[send_sel] <= 1'b0;
          ob_busy[send_sel] <= 1'b0;
          send_sel <= !send_sel;
          if (ob_last[send_sel]) begin
            done_valid <= 1'b1;
            done_id <= ob_id[send_sel];
          end
        end else begin
          s_beat <= s_beat + 8'd1;
        end
      end
    end
  end
endmodule
