"""Lowered convolutions (gemmini.codegen.lowering): im2col folding of thin-channel layers and group packing,
executed on the functional model and checked bit for bit against NumPy's convolution of the original layer;
the choice among a layer and its rewrites (gemmini.codegen.choose_lowering)."""

from __future__ import annotations

import numpy as np
import pytest

from cosa.scheduler import schedule as run_scheduler
from gemmini import DEFAULT_CONFIG, generate, isa, run_program
from gemmini.codegen import choose_lowering, lowering
from gemmini.config import SMALL_CONFIG
from gemmini.reference import conv_ref
from gemmini.run import example_inputs
from mappings import LevelMapping, Mapping
from workloads import conv2d, depthwise_conv2d

ARCH = DEFAULT_CONFIG.arch("ws")
SCALE = 1.0 / 256


def _run(wl, arch=ARCH, scheduler="gemmini-default", seed=0, mapping=None):
    """Schedule (or take ``mapping``), generate, run; also check the output against conv_ref of the original
    layer here."""
    if mapping is None:
        mapping = run_scheduler(wl, arch, scheduler=scheduler, bound=False).mapping
    program = generate(wl, mapping, arch, bias=True, relu=True, scale=SCALE)
    inputs = example_inputs(program, seed)
    result = run_program(program, inputs)
    low = lowering.lowering_of(wl)
    o = low.original if low else None
    if o is not None:
        expected = conv_ref(inputs["input"], inputs["weights"], inputs["bias"], o["stride"], o["padding"],
                            o["dilation"], SCALE, True, groups=o["groups"])
        assert np.array_equal(result.outputs, expected)
    assert result.verified and result.mismatches == 0
    return program, result


@pytest.mark.parametrize("kwargs", [
    dict(C=3, K=16, H=20, W=20, R=7, S=7, stride=2, padding=3),  # ResNet-50 conv1 in small
    dict(C=3, K=8, H=12, W=11, R=5, S=5, stride=1, padding=2),
    dict(C=2, K=4, H=9, W=9, R=3, S=3, stride=1, padding=0),  # no width padding: no copy
])
def test_fold_is_bit_exact_and_faster(kwargs):
    wl = conv2d("thin", **kwargs)
    folded = lowering.fold(wl)
    assert folded is not None and folded.dims["R"] == 1
    low = lowering.lowering_of(folded)
    assert low.cf >= kwargs["R"] * kwargs["C"] and low.cf <= 16 * -(-kwargs["R"] * kwargs["C"] // 16)
    program, result = _run(folded)
    _, plain = _run(wl)
    assert result.cycles < plain.cycles
    assert program.macs == wl.macs  # utilization counts the original layer's MACs
    fences = program.counts().get("fence", 0)
    assert fences == (2 if kwargs["padding"] else 1)  # the image copy ends with its own fence
    if kwargs["padding"]:
        assert "image" in program.buffers
        assert program.buffers["input"].shape[2] >= kwargs["W"] + 2 * kwargs["padding"]


def test_fold_on_a_small_array_takes_several_blocks():
    arch = SMALL_CONFIG.arch("ws")  # DIM 4: 21 reduction elements per kernel row in 6 blocks of 4
    wl = conv2d("thin4", C=3, K=4, H=9, W=9, R=7, S=7, stride=2, padding=3)
    folded = lowering.fold(wl, dim=4)
    assert lowering.lowering_of(folded).cf == 24
    _run(folded, arch)


def test_fold_weights_layout():
    wl = conv2d("thin", C=3, K=2, H=8, W=8, R=7, S=7, stride=2, padding=3)
    low = lowering.lowering_of(lowering.fold(wl))
    w = np.arange(7 * 7 * 3 * 2).reshape(7, 7, 3, 2).astype(np.int8)
    dev = low.device_weights(w)
    assert dev.shape == (7, 1, low.cf, 2)
    assert np.array_equal(dev[4, 0, 5 * 3 + 1, 1], w[4, 5, 1, 1])
    assert not dev[:, :, 21:, :].any()


# the vendor heuristic has no mapping for a grouped 1x1 layer: one by hand, a group's channels on the array
_WIDE = Mapping((LevelMapping(temporal={"G": 2}), LevelMapping(),
                 LevelMapping(temporal={"C": 2}, spatial={"C": 16, "K": 16}), LevelMapping(temporal={"P": 6, "Q": 6})))


@pytest.mark.parametrize("wl,m,mapping", [
    (depthwise_conv2d("dw", C=32, H=10, W=10, R=3, S=3, padding=1), 16, None),
    (depthwise_conv2d("dw2", C=16, H=9, W=9, R=3, S=3, stride=2, padding=1), 16, None),
    (conv2d("grouped", C=32, K=64, H=8, W=8, R=3, S=3, padding=1, groups=4), 2, None),
    (conv2d("wide_groups", C=64, K=32, H=6, W=6, groups=2), 1, _WIDE),
])
def test_pack_is_bit_exact(wl, m, mapping):
    packed = lowering.pack(wl)
    assert lowering.lowering_of(packed).m == m
    _run(packed, mapping=mapping)


def test_packed_groups_go_on_the_array():
    # one channel axis G*C/G + C is a mixed-radix sum, not a window: the array takes a group's C and K,
    # and the packed form puts several groups' channels side by side on it
    wl = conv2d("grouped", C=32, K=64, H=8, W=8, R=3, S=3, padding=1, groups=4)
    rows, cols = ARCH.levels[2].spatial_axes
    assert rows.admits("C", wl) and cols.admits("K", wl)
    packed = lowering.pack(wl)
    assert rows.admits("C", packed) and cols.admits("K", packed)


def test_pack_beats_the_vendor_depthwise_tiling():
    wl = depthwise_conv2d("dw", C=32, H=10, W=10, R=3, S=3, padding=1)
    _, packed = _run(lowering.pack(wl))
    _, plain = _run(wl)  # the library's tiled_conv_dw tiles: one channel per pass
    assert packed.cycles * 4 < plain.cycles


def test_pack_weights_are_block_diagonal():
    wl = conv2d("grouped", C=8, K=8, H=4, W=4, R=1, S=1, groups=4)
    low = lowering.lowering_of(lowering.pack(wl))
    assert low.m == 4
    w = np.ones((1, 1, 2, 8), dtype=np.int8)
    dev = low.device_weights(w)[0, 0]
    assert dev.shape == (8, 8)
    assert np.array_equal(dev, np.kron(np.eye(4, dtype=np.int8), np.ones((2, 2), dtype=np.int8)))


def test_schedule_keeps_the_cheaper_form():
    thin = conv2d("thin", C=3, K=16, H=20, W=20, R=7, S=7, stride=2, padding=3)
    sched = choose_lowering.schedule(thin, ARCH, run_scheduler, scheduler="gemmini-default", bound=False)
    assert sched.extra["lowering"] == "fold"
    assert set(sched.extra["alternatives"]) == {"thin", "thin~fold"}
    wide = conv2d("wide", C=32, K=16, H=6, W=6, R=3, S=3, padding=1)
    assert lowering.lowerings(wide) == []
    assert choose_lowering.schedule(wide, ARCH, run_scheduler, scheduler="gemmini-default", bound=False).extra["lowering"] is None


def test_schedule_never_returns_a_lowering_that_does_not_fit(monkeypatch):
    thin = conv2d("thin", C=3, K=16, H=20, W=20, R=7, S=7, stride=2, padding=3)
    monkeypatch.setattr(choose_lowering, "fits", lambda *a: False)
    sched = choose_lowering.schedule(thin, ARCH, run_scheduler, scheduler="gemmini-default", bound=False)
    assert sched.extra["lowering"] is None and sched.workload is thin
    assert "do not fit" in sched.extra["alternatives"]["thin~fold"]


def test_fits_refuses_tiles_over_the_scratchpad():
    folded = lowering.fold(conv2d("thin", C=3, K=16, H=20, W=20, R=7, S=7, stride=2, padding=3))
    mapping = run_scheduler(folded, ARCH, scheduler="gemmini-default", bound=False).mapping
    assert choose_lowering.fits(folded, mapping, ARCH)
    small = SMALL_CONFIG.arch("ws")
    assert not choose_lowering.fits(folded, mapping, small)


def test_the_image_copy_is_gemmini_commands():
    folded = lowering.fold(conv2d("thin", C=3, K=16, H=20, W=20, R=7, S=7, stride=2, padding=3))
    prologue = lowering.prologue(folded, DEFAULT_CONFIG)
    ops = [s.op for s in prologue if hasattr(s, "op")]
    assert ops[:2] == ["config_ld", "config_st"] and ops[-1] == "fence"
    assert choose_lowering.prologue_cycles(folded, DEFAULT_CONFIG) > 0
    unpadded = lowering.fold(conv2d("thin0", C=3, K=16, H=20, W=20, R=7, S=7, stride=2))
    assert lowering.prologue(unpadded, DEFAULT_CONFIG) == [] and choose_lowering.prologue_cycles(unpadded, DEFAULT_CONFIG) == 0
    program, _ = _run(folded)
    first_fence = next(i for i, c in enumerate(program.commands) if c.funct == isa.FENCE)
    moves = [c for c in program.commands[:first_fence] if c.funct == isa.MVOUT]
    assert len(moves) == -(-20 // 16) * -(-20 * 3 // 64)


def test_rewrites_apply_only_where_they_help():
    assert lowering.fold(conv2d("wide", C=16, K=16, H=8, W=8, R=3, S=3)) is None  # the channels fill the rows
    assert lowering.fold(conv2d("one_wide", C=3, K=16, H=8, W=8, R=1, S=3)) is None
    assert lowering.fold(conv2d("dilated", C=3, K=16, H=12, W=12, R=3, S=3, dilation=2)) is None
    assert lowering.fold(conv2d("grouped", C=6, K=6, H=8, W=8, R=3, S=3, groups=2)) is None
    assert lowering.pack(conv2d("dense", C=3, K=16, H=8, W=8, R=3, S=3)) is None
    folded = lowering.fold(conv2d("thin", C=3, K=16, H=8, W=8, R=3, S=3))
    assert lowering.fold(folded) is None and lowering.pack(folded) is None  # never lowered twice
    assert lowering.lowering_of(conv2d("thin", C=3, K=16, H=8, W=8, R=3, S=3)) is None


@pytest.mark.parametrize("wl", [
    lowering.fold(conv2d("thin", C=3, K=16, H=12, W=12, R=7, S=7, stride=2, padding=3)),
    lowering.pack(depthwise_conv2d("dw", C=32, H=6, W=6, R=3, S=3, padding=1)),
])
def test_lowered_programs_run_on_the_rtl(wl):
    # strided mvins, scratchpad mvouts and a fence: no pixel repeats, which the library's first-layer path needs
    # and our RTL does not implement
    from gemmini.run_rtl import run_program_rtl

    sched = run_scheduler(wl, ARCH, scheduler="gemmini-default", bound=False)
    program = generate(wl, sched.mapping, ARCH, bias=True, relu=True, scale=SCALE)
    rtl = run_program_rtl(program, mode="trace").result
    model = run_program(program)
    assert rtl.verified and np.array_equal(rtl.outputs, model.outputs)
    assert abs(rtl.cycles - model.cycles) <= 0.05 * rtl.cycles


# --- the lowered programs as C -----------------------------------------------------------------------------
LOWERED_C = {
    "fold-bordered": lambda: lowering.fold(conv2d("thin", C=3, K=16, H=20, W=20, R=7, S=7, stride=2, padding=3)),
    "fold-unpadded": lambda: lowering.fold(conv2d("thin0", C=2, K=4, H=9, W=9, R=3, S=3)),
    "pack-depthwise": lambda: lowering.pack(depthwise_conv2d("dw", C=32, H=10, W=10, R=3, S=3, padding=1)),
}


@pytest.mark.parametrize("key", sorted(LOWERED_C))
def test_a_lowered_program_as_c_issues_its_exact_stream(key, tmp_path):
    """The C of a lowered program (the image copy into its bordered input included) issues exactly the
    commands the functional model checked, with the image as the function's first parameter."""
    import shutil
    import subprocess
    from pathlib import Path

    from gemmini.codegen import relative_stream
    from gemmini.codegen.c import emit_c, host_logger_c, parse_host_log

    assert shutil.which("gcc"), "gcc is missing (a test requirement; `.ci/run` installs it)"
    program, _ = _run(LOWERED_C[key]())
    (tmp_path / "prog.c").write_text(emit_c(program, with_main=False))
    (tmp_path / "log.c").write_text(host_logger_c(program))
    include = Path(__file__).resolve().parents[2] / "gemmini" / "include"
    subprocess.run(["gcc", "-std=c11", "-O1", "-Wall", "-Werror", "-I", str(include), "-o", "prog", "prog.c",
                    "log.c"], cwd=tmp_path, check=True, capture_output=True)
    log = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, check=True).stdout
    spans, commands = parse_host_log(log)
    assert {name for _, _, name in spans} == set(program.buffers)
    assert relative_stream(commands, spans) == program.relative()
    assert ("const elem_t *image," in emit_c(program)) == (key == "fold-bordered")


def test_a_lowered_programs_self_check_embeds_the_rewrites_weights():
    from gemmini.codegen.c import device_inputs, emit_c

    program, _ = _run(LOWERED_C["pack-depthwise"]())
    inputs = example_inputs(program, 3)
    device = device_inputs(program, inputs)
    assert device["weights"].shape == program.buffers["weights"].shape != inputs["weights"].shape
    source = emit_c(program, with_main=True, inputs=inputs)
    n = int(np.prod(program.buffers["weights"].shape))
    assert f"_test_weights[{n}]" in source


@pytest.mark.skipif(not __import__("shutil").which("riscv64-unknown-elf-gcc"), reason="no riscv64-unknown-elf-gcc")
def test_a_folded_program_with_its_image_copy_builds_and_runs_on_spike(tmp_path):
    import os

    from gemmini.build import build_elf, run_spike

    program, _ = _run(LOWERED_C["fold-bordered"]())
    elf = build_elf(program, tmp_path / "fold.elf", seed=2)
    assert elf.is_file() and "image" in elf.with_suffix(".c").read_text()
    if os.environ.get("GEMMINI_SPIKE"):
        result = run_spike(elf)
        assert result.verified, result.output[-300:]
