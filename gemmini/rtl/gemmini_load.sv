// Load unit: config_ld and mvin / mvin2 / mvin3.
//
// A request generator walks the rows of each mvin and issues one DMA read
// per bus beat (BEAT bytes) as long as credits remain: the response buffer
// always has room for every beat in flight.  Responses come back in order;
// an assembler gathers each row's beats into one of two row buffers while a
// writer converts the other row (int8 / int32, mvin scale for the
// scratchpad) and writes it one DIM-element block per cycle into the
// scratchpad or accumulator (block b lands at row + b * block stride).
module gemmini_load
  import gemmini_isa_pkg::*;
  import gemmini_dpi_pkg::*;
#(
  parameter int DIM = 4,
  parameter int MAX_MVIN_BYTES = 64,
  parameter int BEAT = 16,
  parameter int CREDITS = 64
) (
  input  logic        clk,
  input  logic        reset,
  // entries from the front end
  input  logic        in_valid,
  output logic        in_ready,
  input  logic [7:0]  in_funct,
  input  logic [63:0] in_rs1,
  input  logic [63:0] in_rs2,
  input  logic [7:0]  in_id,
  output logic        cfg_done_valid,   // a config_ld finished
  output logic [7:0]  cfg_done_id,
  output logic        done_valid,       // an mvin finished (its last block written)
  output logic [7:0]  done_id,
  // DMA read port
  output logic        dma_req_valid,
  input  logic        dma_req_ready,
  output logic [63:0] dma_req_addr,
  output logic [7:0]  dma_req_len,
  input  logic        dma_resp_valid,
  input  logic [BEAT*8-1:0] dma_resp_data,
  // local memory write port (scratchpad and accumulator)
  output logic        sp_req,
  output logic        acc_req,
  input  logic        sp_gnt,
  input  logic        acc_gnt,
  output logic        w_accumulate,
  output logic [31:0] w_addr,
  output logic [DIM-1:0][31:0] w_data,
  output logic [DIM-1:0] w_mask,
  output logic        busy
);
  localparam int ROW_BYTES = MAX_MVIN_BYTES;
  localparam int MAX_BLOCKS = (MAX_MVIN_BYTES + DIM - 1) / DIM;
  localparam int MAX_BEATS = (ROW_BYTES + BEAT - 1) / BEAT;

  // ---- configuration (per mvin id) ----
  logic [63:0] cfg_stride [3];
  logic [31:0] cfg_scale [3];
  logic        cfg_shrunk [3];
  logic [15:0] cfg_block_stride [3];

  // ---- request generator ----
  logic        g_active;
  logic [63:0] g_dram, g_stride;
  logic [31:0] g_row;
  logic [15:0] g_rows, g_cols;
  logic [15:0] g_r;
  logic [7:0]  g_b, g_beats;
  logic [15:0] g_row_bytes;
  logic        g_acc, g_accumulate, g_elem4, g_scale_on;
  logic [31:0] g_scale;
  logic [15:0] g_block_stride;
  logic [7:0]  g_id;

  // ---- row metadata FIFO ----
  typedef struct packed {
    logic [31:0] row;
    logic [15:0] cols;
    logic        acc;
    logic        accumulate;
    logic        elem4;
    logic        scale_on;
    logic [31:0] scale;
    logic [15:0] block_stride;
    logic [7:0]  beats;
    logic [7:0]  id;
    logic        last;
  } meta_t;
  localparam int MQ = CREDITS;
  meta_t       mq [MQ];
  logic [$clog2(MQ):0] mq_head, mq_tail;
  wire  [$clog2(MQ):0] mq_count = mq_tail - mq_head;

  // ---- beat FIFO ----
  logic [BEAT*8-1:0] bq [CREDITS];
  logic [$clog2(CREDITS):0] bq_head, bq_tail;
  wire  [$clog2(CREDITS):0] bq_count = bq_tail - bq_head;
  logic [$clog2(CREDITS):0] outstanding;   // beats requested and not yet assembled

  // ---- row buffers ----
  logic [ROW_BYTES*8-1:0] rb_data [2];
  meta_t                  rb_meta [2];
  logic                   rb_full [2];
  logic                   fill_sel, write_sel;
  logic                   a_active;
  meta_t                  a_meta;
  logic [7:0]             a_beat;

  // ---- writer ----
  logic        wq_valid;
  logic        wq_acc, wq_last;
  logic [7:0]  wq_id;
  logic [7:0]  w_block;

  wire gen_can_req = g_active && (32'(outstanding) < CREDITS) && (32'(mq_count) < MQ);
  assign dma_req_valid = gen_can_req;
  assign dma_req_addr = g_dram + 64'(g_r) * g_stride + 64'(g_b) * 64'(BEAT);
  assign dma_req_len = 8'((32'(g_row_bytes) - 32'(g_b) * BEAT > BEAT) ? BEAT : 32'(g_row_bytes) - 32'(g_b) * BEAT);
  wire req_fire = dma_req_valid && dma_req_ready;

  assign in_ready = !g_active && !reset;
  wire in_fire = in_valid && in_ready;

  wire w_gnt = wq_valid && (wq_acc ? acc_gnt : sp_gnt);
  assign sp_req = wq_valid && !wq_acc;
  assign acc_req = wq_valid && wq_acc;

  wire a_pop = a_active && bq_count != 0;

  assign busy = g_active || a_active || rb_full[0] || rb_full[1] || wq_valid || mq_count != 0;

  // element conversion for one block of the row being written
  function automatic logic [31:0] element(input logic [ROW_BYTES*8-1:0] bytes, input meta_t m, input int idx);
    logic signed [31:0] v;
    if (m.elem4) v = signed'(bytes[idx*32 +: 32]);
    else v = 32'(signed'(bytes[idx*8 +: 8]));
    if (m.scale_on) v = gemmini_scale_round(v, m.scale, m.acc ? 32 : 8);
    return v;
  endfunction

  wire [7:0] cur_blocks = 8'((32'(rb_meta[write_sel].cols) + DIM - 1) / DIM);
  wire       w_load = rb_full[write_sel] && (!wq_valid || w_gnt);

  always_ff @(posedge clk) begin
    done_valid <= 1'b0;
    cfg_done_valid <= 1'b0;
    if (reset) begin
      g_active <= 1'b0;
      mq_head <= '0; mq_tail <= '0;
      bq_head <= '0; bq_tail <= '0;
      outstanding <= '0;
      rb_full[0] <= 1'b0; rb_full[1] <= 1'b0;
      fill_sel <= 1'b0; write_sel <= 1'b0;
      a_active <= 1'b0;
      wq_valid <= 1'b0;
      w_block <= 8'd0;
      for (int k = 0; k < 3; k++) begin
        cfg_stride[k] <= 64'd0;
        cfg_scale[k] <= 32'h3f800000;
        cfg_shrunk[k] <= 1'b0;
        cfg_block_stride[k] <= 16'(DIM);
      end
    end else begin
      // accept an entry
      if (in_fire) begin
        if (in_funct == 8'(FUNCT_CONFIG)) begin
          cfg_stride[in_rs1[4:3]] <= in_rs2;
          cfg_scale[in_rs1[4:3]] <= in_rs1[63:32];
          cfg_shrunk[in_rs1[4:3]] <= in_rs1[2];
          cfg_block_stride[in_rs1[4:3]] <= in_rs1[31:16];
          cfg_done_valid <= 1'b1;
          cfg_done_id <= in_id;
        end else begin
          int id;
          logic is_acc, elem4;
          id = (in_funct == 8'(FUNCT_MVIN)) ? 0 : (in_funct == 8'(FUNCT_MVIN2)) ? 1 : 2;
          is_acc = in_rs2[LOCAL_ACC_BIT];
          elem4 = is_acc && !cfg_shrunk[id];
          g_active <= 1'b1;
          g_dram <= in_rs1;
          g_stride <= cfg_stride[id];
          g_row <= 32'(in_rs2[LOCAL_ROW_BITS-1:0]);
          g_cols <= in_rs2[47:32];
          g_rows <= in_rs2[63:48];
          g_row_bytes <= elem4 ? 16'(in_rs2[47:32] * 4) : in_rs2[47:32];
          g_beats <= 8'(((elem4 ? 32'(in_rs2[47:32]) * 4 : 32'(in_rs2[47:32])) + BEAT - 1) / BEAT);
          g_acc <= is_acc;
          g_accumulate <= is_acc && in_rs2[LOCAL_ACCUMULATE_BIT];
          g_elem4 <= elem4;
          g_scale_on <= !is_acc && cfg_scale[id] != 32'h3f800000;
          g_scale <= cfg_scale[id];
          g_block_stride <= cfg_block_stride[id];
          g_id <= in_id;
          g_r <= 16'd0;
          g_b <= 8'd0;
        end
      end

      // request generator
      if (req_fire) begin
        if (g_b == 8'd0) begin
          meta_t m;
          m.row = g_row + 32'(g_r);
          m.cols = g_cols;
          m.acc = g_acc;
          m.accumulate = g_accumulate;
          m.elem4 = g_elem4;
          m.scale_on = g_scale_on;
          m.scale = g_scale;
          m.block_stride = g_block_stride;
          m.beats = g_beats;
          m.id = g_id;
          m.last = (g_r + 16'd1 == g_rows);
          mq[mq_tail[$clog2(MQ)-1:0]] <= m;
          mq_tail <= mq_tail + 1;
        end
        if (g_b + 8'd1 == g_beats) begin
          g_b <= 8'd0;
          g_r <= g_r + 16'd1;
          if (g_r + 16'd1 == g_rows) g_active <= 1'b0;
        end else begin
          g_b <= g_b + 8'd1;
        end
      end

      // responses
      if (dma_resp_valid) begin
        bq[bq_tail[$clog2(CREDITS)-1:0]] <= dma_resp_data;
        bq_tail <= bq_tail + 1;
      end
      outstanding <= outstanding + (req_fire ? 1 : 0) - (a_pop ? 1 : 0);

      // assembler
      if (!a_active) begin
        if (mq_count != 0 && !rb_full[fill_sel]) begin
          a_active <= 1'b1;
          a_meta <= mq[mq_head[$clog2(MQ)-1:0]];
          a_beat <= 8'd0;
          mq_head <= mq_head + 1;
        end
      end else if (a_pop) begin
        rb_data[fill_sel][32'(a_beat) * BEAT * 8 +: BEAT * 8] <= bq[bq_head[$clog2(CREDITS)-1:0]];
        bq_head <= bq_head + 1;
        if (a_beat + 8'd1 == a_meta.beats) begin
          a_active <= 1'b0;
          rb_full[fill_sel] <= 1'b1;
          rb_meta[fill_sel] <= a_meta;
          fill_sel <= !fill_sel;
        end else begin
          a_beat <= a_beat + 8'd1;
        end
      end

      // writer
      if (w_gnt) begin
        wq_valid <= 1'b0;
        if (wq_last) begin
          done_valid <= 1'b1;
          done_id <= wq_id;
        end
      end
      if (w_load) begin
        meta_t m;
        m = rb_meta[write_sel];
        wq_valid <= 1'b1;
        wq_acc <= m.acc;
        wq_id <= m.id;
        wq_last <= m.last && (w_block + 8'd1 == cur_blocks);
        w_accumulate <= m.accumulate;
        w_addr <= m.row + 32'(w_block) * 32'(m.block_stride);
        for (int e = 0; e < DIM; e++) begin
          int idx;
          idx = 32'(w_block) * DIM + e;
          w_mask[e] <= idx < 32'(m.cols);
          w_data[e] <= (idx < 32'(m.cols)) ? element(rb_data[write_sel], m, idx) : 32'd0;
        end
        if (w_block + 8'd1 == cur_blocks) begin
          w_block <= 8'd0;
          rb_full[write_sel] <= 1'b0;
          write_sel <= !write_sel;
        end else begin
          w_block <= w_block + 8'd1;
        end
      end
    end
  end
endmodule
