"""Lowerings of convolutions that leave most of the array idle, as workloads the generator already runs.

Two rewrites of a conv2d, each a new LoopNest (so the MIP and the cost model schedule it like any other
layer) whose ``op["lowering"]`` records what it came from:

* ``fold`` (im2col by strided DMA, for thin-channel layers such as ResNet-50's conv1, C = 3): the
  kernel columns and the input channels of one kernel row are one reduction dim of ``Cf`` >= S*C
  elements.  In NHWC memory the S*C inputs of one output pixel and one kernel row are contiguous, and
  consecutive output pixels start ``stride * C`` bytes apart, so an mvin of ``rows`` output pixels x
  ``Cf`` columns with a main-memory row stride of ``stride * C`` bytes (config_ld) builds the im2col
  tile directly; the lowered conv has C' = Cf, a 1-wide kernel and no width padding.  ``Cf`` is the
  smallest multiple of ceil(S*C / DIM) blocks of equal size (conv1: 2 blocks of 11 = 22, so every
  kernel row takes two computes of 11 array rows, 21/22 of them useful); the weights get Cf - S*C zero
  rows per kernel row (a one-time transform of constants, done on the host like any weight packing;
  its only run-time cost is the extra weight bytes, which the program moves and the timing model
  counts).  Width padding: a patch that starts left of the image, or ends right of it, is partly
  padding, which one contiguous read cannot produce.  The program therefore first copies the image
  into a zero-bordered buffer ``input`` (W + 2*pad columns, plus the few bytes the last Cf-wide read
  passes the last patch) by Gemmini's own DMA -- mvin of 16 image rows x 64 bytes into the
  scratchpad, mvout into the bordered rows, then a fence -- so its cost is in the program's cycles.
  The border is never written: the buffer is zero at program start, as a C static array is.
  Height padding stays with the generator (whole zero rows).
* ``pack`` (depthwise and grouped layers with few channels per group): ``m`` groups share the array
  as one group of m*C/G input and m*K/G output channels with block-diagonal weights (zeros off the
  diagonal blocks).  The NHWC input and output are unchanged; only the weights are expanded (host
  transform of constants, m times the weight bytes, moved and counted).  What the ISA allows: a WS
  compute multiplies DIM-element rows of contiguous scratchpad bytes by one DIM x DIM weight block.
  A depthwise output channel reads one input channel, so one block serves either DIM channels of
  one tap (block-diagonal, 1/DIM of the MACs useful: 6.25% of the array at DIM 16) or the taps of one
  channel (their bytes are C apart in NHWC, so a row of them needs one mvin per tap, and one block
  column is used: at most 9/256 for a 3x3 kernel; the library's depthwise path builds such rows with
  config_ld pixel repeats, 3 taps per row).  No dataflow does better on a systolic GEMM array.

``lowerings(workload, dim)`` lists the applicable rewrites; ``codegen.choose_lowering.schedule(workload,
arch)`` runs the scheduler on the layer and on each rewrite and keeps the one with the fewest cost-model
cycles whose tiles fit (a rewrite the generator cannot place in the scratchpad is never returned).  This
module knows workloads and the loop IR only: ``codegen.tiling`` reads a fold's im2col view
(``tiling.fold_problem``) and ``codegen.program`` adds the ``prologue``.  Programs of a
lowered workload take the original layer's arrays (NHWC input, [R, S, C/G, K] weights, bias): see
``Lowering.device_arrays`` and ``Lowering.reference``; ``gemmini.run`` applies them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from .ir import Cmd, Comment, DramAddr, SpAddr, emin, loop

#: the original layer's parameters kept in ``op["lowering"]["original"]``
_ORIGINAL_KEYS = ("N", "C", "K", "H", "W", "P", "Q", "R", "S", "stride", "dilation", "padding", "groups")


@dataclass(frozen=True)
class Lowering:
    """A lowered convolution: ``kind`` ("fold" or "pack"), the original layer's parameters
    (``original``: N, C, K totals, H, W input, P, Q output width/height, R, S kernel width/height,
    stride/dilation/padding (height, width), groups) and the rewrite's (fold: ``cf`` reduction
    elements per kernel row, ``wp`` columns of the bordered copy or 0 for none; pack: ``m`` groups per
    array group)."""

    kind: str
    original: dict
    cf: int = 0
    wp: int = 0
    m: int = 1

    @property
    def macs(self) -> int:
        """MACs of the original layer (what utilization is measured against)."""
        o = self.original
        return o["N"] * o["K"] * (o["C"] // o["groups"]) * o["P"] * o["Q"] * o["R"] * o["S"]

    def user_shapes(self) -> dict:
        """name -> (shape, dtype) of the arrays a caller gives: the original layer's."""
        o = self.original
        return {"input": ((o["N"], o["H"], o["W"], o["C"]), "int8"),
                "weights": ((o["S"], o["R"], o["C"] // o["groups"], o["K"]), "int8"),
                "bias": ((o["K"],), "int32")}

    def device_weights(self, w: np.ndarray) -> np.ndarray:
        """The weights as the program reads them (a constant transform, done once on the host)."""
        o = self.original
        w = np.asarray(w, dtype=np.int8)
        if self.kind == "fold":
            rows = w.reshape(o["S"], o["R"] * o["C"], o["K"])
            out = np.zeros((o["S"], 1, self.cf, o["K"]), dtype=np.int8)
            out[:, 0, :rows.shape[1], :] = rows
            return out
        cg, kg, m = o["C"] // o["groups"], o["K"] // o["groups"], self.m
        out = np.zeros((o["S"], o["R"], m * cg, o["K"]), dtype=np.int8)
        for g in range(o["groups"]):
            i = g % m
            out[:, :, i * cg:(i + 1) * cg, g * kg:(g + 1) * kg] = w[:, :, :, g * kg:(g + 1) * kg]
        return out

    def device_arrays(self, arrays: dict) -> dict:
        """Buffer name -> array placed in main memory, from the original layer's ``arrays`` (the constants alone
        when ``arrays`` has no input)."""
        out = dict(arrays)
        out["weights"] = self.device_weights(arrays["weights"])
        if self.kind == "fold" and self.wp and "input" in out:
            out["image"] = out.pop("input")  # the program copies it into the bordered ``input``
        return out

    def reference(self, arrays: dict, bias, scale: float, relu: bool) -> np.ndarray:
        """The NumPy result of the original layer."""
        from ..reference import conv_ref

        o = self.original
        return conv_ref(arrays["input"], arrays["weights"], bias, o["stride"], o["padding"], o["dilation"], scale,
                        relu, groups=o["groups"])


def lowering_of(workload) -> Lowering | None:
    """The Lowering a workload records (``op["lowering"]``), or None for a layer as written."""
    rec = (getattr(workload, "op", None) or {}).get("lowering")
    if not rec:
        return None
    return Lowering(rec["kind"], dict(rec["original"]), rec.get("cf", 0), rec.get("wp", 0), rec.get("m", 1))


def _original(workload) -> dict | None:
    op = dict(getattr(workload, "op", None) or {})
    if op.get("kind") != "conv2d" or op.get("lowering") or not op.get("input_hw"):
        return None
    d = workload.dims
    groups = int(op.get("groups", 1) or 1)
    if any(t.bits != 8 for t in workload.tensors):
        return None
    return {"N": d["N"], "C": d["C"] * groups, "K": d["K"] * groups, "H": op["input_hw"][0], "W": op["input_hw"][1],
            "P": d["P"], "Q": d["Q"], "R": d["R"], "S": d["S"], "stride": tuple(op.get("stride", (1, 1))),
            "dilation": tuple(op.get("dilation", (1, 1))), "padding": tuple(op.get("padding", (0, 0))),
            "groups": groups}


def _with_lowering(lowered, name: str, rec: dict):
    return replace(lowered, name=name, op={**lowered.op, "lowering": rec})


def fold(workload, dim: int = 16):
    """The ``fold`` rewrite of a conv2d (None when it does not apply: groups, width dilation, a 1-wide
    kernel, or C >= DIM, where the channels alone fill the array's rows)."""
    from workloads import builders

    o = _original(workload)
    if o is None or o["groups"] != 1 or o["dilation"][1] != 1 or o["R"] < 2 or o["C"] >= dim:
        return None
    red = o["R"] * o["C"]
    blocks = -(-red // dim)
    cf = blocks * -(-red // blocks)
    sh, sw = o["stride"]
    ph, pw = o["padding"]
    w_low = (o["P"] - 1) * sw + 1  # lowered pixels: where each output pixel's patch starts
    extra = -(-(cf - red) // o["C"])  # columns the last Cf-wide read passes the last patch
    wp = o["W"] + 2 * pw + extra if pw else 0
    lowered = builders.conv2d(workload.name, N=o["N"], C=cf, K=o["K"], P=o["P"], Q=o["Q"], R=1, S=o["S"], H=o["H"],
                              W=w_low, stride=(sh, sw), dilation=(o["dilation"][0], 1), padding=(ph, 0),
                              repeat=workload.repeat)
    rec = {"kind": "fold", "original": o, "cf": cf, "wp": wp}
    return _with_lowering(lowered, f"{workload.name}~fold", rec)


def pack(workload, dim: int = 16):
    """The ``pack`` rewrite of a grouped conv2d (None unless groups > 1): m = the largest divisor of the
    groups with m * C/G <= DIM (1 when a group alone fills the rows).  The lowered nest indexes the group
    and the channel as separate tensor axes (input [N, G, C, H, W], output [N, G, K, Q, P]) and puts m
    groups' channels on the array rows and columns at once (block-diagonal weights), which a group with
    fewer channels than DIM cannot fill alone."""
    from workloads.divisors import largest_divisor_at_most
    from workloads.ir import AffineExpr, LoopNest, Tensor

    o = _original(workload)
    if o is None or o["groups"] < 2:
        return None
    cg, kg = o["C"] // o["groups"], o["K"] // o["groups"]
    m = largest_divisor_at_most(o["groups"], max(dim, cg) // cg)
    groups = o["groups"] // m
    (sh, sw), (dh, dw), (ph, pw) = o["stride"], o["dilation"], o["padding"]
    dims = {"N": o["N"]}
    if groups > 1:
        dims["G"] = groups
    dims.update(K=m * kg, C=m * cg, P=o["P"], Q=o["Q"], R=o["R"], S=o["S"])
    e = AffineExpr.of
    lead = (e("G"),) if groups > 1 else ()
    g_shape = (groups,) if groups > 1 else ()
    bits = {t.role: t.bits for t in workload.tensors}
    dtype = {t.role: t.dtype for t in workload.tensors}
    tensors = (Tensor("Weights", lead + (e("K"), e("C"), e("S"), e("R")), "weight", bits["weight"],
                      dtype=dtype["weight"]),
               Tensor("Inputs", (e("N"),) + lead + (e("C"), AffineExpr((("Q", sh), ("S", dh)), -ph),
                                                    AffineExpr((("P", sw), ("R", dw)), -pw)), "input", bits["input"],
                      shape=(o["N"],) + g_shape + (m * cg, o["H"], o["W"]), dtype=dtype["input"]),
               Tensor("Outputs", (e("N"),) + lead + (e("K"), e("Q"), e("P")), "output", bits["output"],
                      dtype=dtype["output"]))
    op = {**workload.op, "groups": groups,
          "lowering": {"kind": "pack", "original": o, "m": m}}
    return LoopNest(f"{workload.name}~pack{m}", dims, tensors, workload.repeat, op)


def lowerings(workload, dim: int = 16) -> list:
    """The rewrites of ``workload`` that apply (lowered LoopNests)."""
    return [w for w in (fold(workload, dim), pack(workload, dim)) if w is not None]


# --- code generation ------------------------------------------------------------------------------------


def prologue(workload, config) -> list:
    """Loop-IR statements that run before the layer's own: for a ``fold`` with width padding, the copy of
    ``image`` into the interior of the zero-bordered ``input`` by mvin/mvout through the scratchpad, then a
    fence (the layer's mvins read what these mvouts wrote; Gemmini does not order main memory itself)."""
    low = lowering_of(workload)
    if low is None or low.kind != "fold" or not low.wp:
        return []
    o = low.original
    dim = config.dim
    n_img, h, c, pw = o["N"], o["H"], o["C"], o["padding"][1]
    row = o["W"] * c  # bytes of one image row
    wide = config.max_mvin_cols_sp // dim * dim  # bytes per move (4 blocks at DIM 16)
    chunks = -(-row // wide)
    slot_rows = -(-wide // dim) * dim
    slots = max(1, min(8, config.sp_rows // slot_rows))
    out = [Comment(f"copy the image into the zero-bordered input ({pw} columns of padding each side)"),
           Cmd("config_ld", (row, 1.0, 0, 0, dim)), Cmd("config_st", (low.wp * c, 0, 1.0))]

    def per_image(ni):
        def per_rows(h0):
            def per_chunk(cb):
                rows = emin(dim, h - h0)
                cols = emin(wide, row - cb)
                slot = SpAddr(((h0 // dim) * chunks + cb // wide) % slots * slot_rows)
                src = DramAddr("image", ni * (h * row) + h0 * row + cb)
                dst = DramAddr("input", ni * (h * low.wp * c) + h0 * (low.wp * c) + pw * c + cb)
                return [Cmd("mvin", (src, slot, rows, cols, 0)), Cmd("mvout", (dst, slot, rows, cols))]
            return loop("pcb", row, per_chunk, step=wide)
        return loop("ph0", h, per_rows, step=dim)
    out += loop("pn", n_img, per_image)
    out.append(Cmd("fence", ()))
    return out


def useful_fraction(workload) -> float:
    """MACs of the original layer over the lowered workload's (1 for a layer as written)."""
    low = lowering_of(workload)
    return 1.0 if low is None else low.macs / math.prod(workload.dims.values())
