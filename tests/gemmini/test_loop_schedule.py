"""cosa's tile arguments for the library's loop-instruction calls (gemmini.loop_schedule)."""

from __future__ import annotations

import pytest

from cosa.scheduler import schedule
from gemmini import isa
from gemmini.config import DEFAULT_CONFIG
from gemmini.loop_schedule import tune_tiles
from gemmini.sim.timing import timing
from gemmini.vendor import stream
from gemmini.vendor.calls import from_workload
from gemmini.vendor.run import run_vendor
from workloads import conv2d, depthwise_conv2d, matmul

ARCH = DEFAULT_CONFIG.arch("ws")

LAYERS = {
    "matmul": matmul("mm", M=48, N=96, K=64),
    "conv3x3": conv2d("c3", C=32, K=32, H=6, W=6, R=3, S=3, padding=1),
    "conv1x1": conv2d("c1", C=32, K=48, H=6, W=6, R=1, S=1),
}


def _tuned(wl, budget=12):
    mapping = schedule(wl, ARCH, scheduler="gemmini-default", bound=False).mapping
    return tune_tiles(wl, mapping, ARCH, budget=budget)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_tuned_stream_is_bit_exact_and_never_slower_than_the_library(name):
    ls = _tuned(LAYERS[name])
    assert ls.cycles <= ls.library_cycles
    assert ls.evaluated <= 12 and ls.evaluated == len(ls.tried)
    run = run_vendor(ls.vendor, tiles=ls.tiles, with_timing=True, seed=3)
    assert run.verified, f"{run.mismatches} mismatches"
    assert run.cycles == ls.cycles                      # the reported cycles are the chosen stream's
    assert ls.cycles == min(ls.tried.values())
    if ls.tiles is None:
        assert ls.cycles == ls.library_cycles and ls.found_from == "library's own"
    else:
        assert ls.cycles < ls.library_cycles and ls.found_from in ("mapping", "library")


def test_the_search_is_deterministic_and_times_each_stream_once():
    a, b = _tuned(LAYERS["matmul"]), _tuned(LAYERS["matmul"])
    assert (a.tiles, a.cycles, list(a.tried)) == (b.tiles, b.cycles, list(b.tried))
    for tiles, cycles in a.tried.items():
        assert timing(isa.decode_stream(stream(a.vendor, tiles=tiles)), DEFAULT_CONFIG).cycles == cycles


def test_a_call_without_tile_arguments_keeps_the_library_stream():
    wl = depthwise_conv2d("dw", C=32, H=6, W=6, R=3, S=3, padding=1)
    ls = _tuned(wl)
    assert ls.tiles is None and ls.start is None and ls.evaluated == 1
    assert run_vendor(ls.vendor, with_timing=False).verified


def test_other_array_sizes_are_refused_in_one_line():
    from gemmini.config import GemminiConfig
    from gemmini.errors import CodegenError

    small = GemminiConfig(dim=4, sp_kib=16, acc_kib=8)
    wl = matmul("mm", M=8, N=8, K=8)
    mapping = schedule(wl, small.arch("ws"), scheduler="gemmini-default", bound=False).mapping
    with pytest.raises(CodegenError, match="defaults only"):
        tune_tiles(wl, mapping, small.arch("ws"))


def _cli(capsys, *argv):
    from cosa.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_runs_the_loops_style_and_refuses_simulators_without_it(capsys, tmp_path):
    import json

    path = tmp_path / "mm.yaml"
    path.write_text("kind: matmul\nname: mm\nM: 32\nN: 48\nK: 32\n")
    code, out, _ = _cli(capsys, "run", "gemmini", str(path), "--style", "loops", "--scheduler", "gemmini-default",
                        "--json")
    doc = json.loads(out)
    assert code == 0 and doc["verified"] and doc["style"] == "loops" and doc["model_cycles"] <= doc["library_model_cycles"]
    code, _, err = _cli(capsys, "run", "gemmini", str(path), "--style", "loops", "--sim", "rtl",
                        "--scheduler", "gemmini-default")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--sim" in err
    code, _, err = _cli(capsys, "run", "gemmini", str(path), "--style", "loops", "--dim", "4",
                        "--scheduler", "gemmini-default")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "defaults only" in err
    out_c = tmp_path / "mm.c"
    code, _, err = _cli(capsys, "emit", "gemmini", str(path), "--style", "loops", "--scheduler", "gemmini-default",
                        "-o", str(out_c))
    assert code == 0 and "int main" in out_c.read_text() and "streams timed" in err


@pytest.mark.skipif(not __import__("os").environ.get("GEMMINI_SPIKE"),
                    reason="GEMMINI_SPIKE (Spike with libgemmini) is not set")
@pytest.mark.parametrize("name", ["matmul", "conv1x1", "conv3x3"])
def test_tuned_programs_pass_on_spike(name, tmp_path):
    from gemmini.build import run_spike
    from gemmini.chipyard import vendor_elf

    ls = _tuned(LAYERS[name])
    elf = vendor_elf(ls.vendor, tmp_path / f"{name}.elf", tiles=ls.tiles)
    result = run_spike(elf)
    assert result.verified, result.output



SPIKE_LOOP_LAYERS = {
    "depthwise_packed": depthwise_conv2d("dw", C=32, H=10, W=10, R=3, S=3, padding=1),
    "thin_conv": conv2d("thin", C=3, K=16, H=32, W=32, R=3, S=3, padding=1),
    "thin_conv_stride2": conv2d("thin_s2", C=3, K=16, H=32, W=32, R=3, S=3, stride=2, padding=1),
}


@pytest.mark.skipif(not __import__("os").environ.get("GEMMINI_SPIKE"),
                    reason="GEMMINI_SPIKE (Spike with libgemmini) is not set")
@pytest.mark.parametrize("name", sorted(SPIKE_LOOP_LAYERS))
def test_loops_programs_with_the_mips_tiles_and_the_librarys_pass_on_spike(name, tmp_path):
    """The loops style's program (cosa's calls with the MIP's tile arguments, even where the timing model
    prefers the library's) and the library's own, each checking itself on Spike + libgemmini; a depthwise
    layer runs as packed groups with block-diagonal weights."""
    from gemmini.build import run_spike
    from gemmini.chipyard import vendor_elf
    from gemmini.loop_schedule import cosa_calls

    wl = SPIKE_LOOP_LAYERS[name]
    mapping = schedule(wl, ARCH, scheduler="cosa", time_limit_s=5, bound=False).mapping
    ls = tune_tiles(wl, mapping, ARCH, budget=0, chooser=_mip_chooser)
    chosen = next(t for t in ls.tried if t is not None)
    library = from_workload(wl, scale=ls.vendor.layer["scale"]) if ls.tiles is not None else ls.vendor
    mip = ls.vendor if ls.tiles is not None else cosa_calls(wl, library, scale=library.layer["scale"]) or library
    if name == "depthwise_packed":
        assert {c.fn for c in mip.calls} == {"tiled_conv_stride_auto"} and mip.layer["weights_layout"] == "block_diagonal"
    for label, vendor, tiles in (("mip", mip, chosen), ("library", library, None)):
        result = run_spike(vendor_elf(vendor, tmp_path / f"{name}_{label}.elf", tiles=tiles))
        assert result.verified, f"{label}: {result.output}"
        assert run_vendor(vendor, tiles=tiles).verified

def test_the_streams_follow_the_hardwares_loop_conv_layout():
    import dataclasses

    f13 = dataclasses.replace(DEFAULT_CONFIG, loop_conv_layout="f13847e")
    wl = LAYERS["conv3x3"]
    mapping = schedule(wl, ARCH, scheduler="gemmini-default", bound=False).mapping
    ls = tune_tiles(wl, mapping, ARCH, config=f13, budget=6)
    assert ls.params.loop_conv_layout == "f13847e"
    run = run_vendor(ls.vendor, tiles=ls.tiles, config=f13, with_timing=True)   # decoded as f13847e
    assert run.verified and run.cycles == ls.cycles


def test_a_negative_budget_is_refused(capsys, tmp_path):
    path = tmp_path / "mm.yaml"
    path.write_text("kind: matmul\nname: mm\nM: 32\nN: 48\nK: 32\n")
    with pytest.raises(SystemExit) as exc:
        _cli(capsys, "run", "gemmini", str(path), "--style", "loops", "--tile-budget", "-1",
             "--scheduler", "gemmini-default")
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "--tile-budget" in err.strip().splitlines()[-1]


@pytest.mark.skipif(not __import__("os").environ.get("CHIPYARD_SIM"),
                    reason="CHIPYARD_SIM (a Chipyard Verilator simulator of a Rocket + Gemmini SoC) is not set")
@pytest.mark.parametrize("name", ["matmul", "conv3x3"])
def test_tuned_programs_pass_on_the_real_rtl(name, tmp_path):
    from gemmini.chipyard import loop_conv_layout, run_chipyard, vendor_elf

    ls = _tuned(LAYERS[name], budget=6)
    elf = vendor_elf(ls.vendor, tmp_path / f"{name}.elf", tiles=ls.tiles, layout=loop_conv_layout())
    run = run_chipyard(elf, max_cycles=2_000_000, timeout_s=1200)
    assert run.verified, run.check
    assert run.cycles and run.cycles > 0


def _mip_chooser(problem, machine):
    from cosa.mip import choose_loop_tiles

    return choose_loop_tiles(problem, machine)


@pytest.mark.parametrize("name", ["matmul", "conv1x1", "conv3x3"])
def test_the_mip_chooses_matmul_tiles_without_a_search(name):
    wl = LAYERS[name]
    mapping = schedule(wl, ARCH, scheduler="gemmini-default", bound=False).mapping
    ls = tune_tiles(wl, mapping, ARCH, budget=0, chooser=_mip_chooser)
    assert ls.evaluated == 2                       # the chosen stream and the library's own, for the report
    assert ls.found_from in ("mip", "library's own") and ls.tile_seconds > 0
    assert ls.cycles <= ls.library_cycles
    run = run_vendor(ls.vendor, tiles=ls.tiles, with_timing=True, seed=5)
    assert run.verified and run.cycles == ls.cycles
    polished = tune_tiles(wl, mapping, ARCH, budget=6, chooser=_mip_chooser)
    assert polished.cycles <= ls.cycles and polished.evaluated <= 6


def test_cli_loops_json_names_style_tiles_and_tile_seconds(capsys, tmp_path):
    import json

    path = tmp_path / "mm.yaml"
    path.write_text("kind: matmul\nname: mm\nM: 100\nN: 120\nK: 90\n")
    code, out, _ = _cli(capsys, "run", "gemmini", str(path), "--style", "loops", "--json",
                        "--scheduler", "gemmini-default")
    d = json.loads(out)
    assert code == 0 and d["verified"] and d["style"] == "loops"
    assert d["found_from"] in ("mip", "library's own") and d["tile_seconds"] > 0 and d["evaluated"] == 2
    assert d["tiles"] is None or len(d["tiles"]) == 3


def test_a_downsample_layer_runs_tiled_conv_with_the_mips_tiles():
    """resnet50.c runs res4a_branch1 through tiled_conv_downsample, which takes no tile arguments; cosa's program
    calls tiled_conv_auto on the hardware's downsample path instead, bit-exact, and never slower."""
    wl = conv2d("res4a_branch1", C=32, K=64, H=12, W=12, R=1, S=1, stride=2)
    mapping = schedule(wl, ARCH, scheduler="gemmini-default", bound=False).mapping
    ls = tune_tiles(wl, mapping, ARCH, budget=0, chooser=_mip_chooser)
    assert ls.cycles <= ls.library_cycles
    if ls.tiles is not None:
        assert [c.fn for c in ls.vendor.calls] == ["tiled_conv_auto"] and ls.found_from == "mip"
    run = run_vendor(ls.vendor, tiles=ls.tiles, with_timing=True, seed=2)
    assert run.verified and run.cycles == ls.cycles
    library = run_vendor(from_workload(wl), with_timing=True, seed=2)
    assert [c.fn for c in from_workload(wl).calls] == ["tiled_conv_downsample"]
    assert library.cycles == ls.library_cycles


@pytest.mark.parametrize("stride,channels", [(1, 32), (2, 32), (1, 60)])
def test_a_depthwise_layer_runs_as_packed_groups_with_the_mips_tiles(stride, channels):
    """mobilenet.c's tiled_conv_dw_auto streams one channel per weight block; cosa's program runs up to DIM
    channels at a time (60 channels: groups of 15) as a dense convolution with block-diagonal weights,
    bit-exact against the depthwise reference."""
    wl = depthwise_conv2d("dw", C=channels, H=10, W=10, R=3, S=3, padding=1, stride=stride)
    mapping = schedule(wl, ARCH, scheduler="gemmini-default", bound=False).mapping
    ls = tune_tiles(wl, mapping, ARCH, budget=0, chooser=_mip_chooser)
    assert ls.found_from == "mip" and {c.fn for c in ls.vendor.calls} == {"tiled_conv_stride_auto"}
    assert ls.cycles < ls.library_cycles / 2
    run = run_vendor(ls.vendor, tiles=ls.tiles, with_timing=True, seed=4)
    assert run.verified and run.cycles == ls.cycles


def test_packed_depthwise_weights_are_the_depthwise_weights_on_the_diagonal():
    from gemmini.vendor.run import example_inputs, reference

    wl = depthwise_conv2d("dw", C=32, H=5, W=5, R=3, S=3, padding=1)
    packed = from_workload(wl, packed_depthwise=True)
    w = example_inputs(packed, seed=1)["weights"]                  # [KH, KW, 16, C]
    off = w.copy()
    off[:, :, [c % 16 for c in range(32)], range(32)] = 0
    assert not off.any() and w.any()
    # the same diagonal through the library's own depthwise call gives the same reference
    plain = from_workload(wl)
    inputs = example_inputs(packed, seed=1)
    dw = {k: v for k, v in inputs.items() if k != "weights"}
    dw["weights"] = w[:, :, [c % 16 for c in range(32)], range(32)].transpose(2, 0, 1).copy()   # [C, KH, KW]
    assert (reference(packed, inputs) == reference(plain, dw)).all()


def test_cli_times_on_the_machine_soc_names(capsys, tmp_path):
    """--soc chipyard-1.10: the same programs, timed with Gemmini f13847e's units and Chipyard 1.10.0's memory
    (``CHIPYARD_SOC_CONFIG``), as the tile search and the run report them; ours is the default."""
    import json

    from gemmini.config import CHIPYARD_SOC_CONFIG

    path = tmp_path / "mm.yaml"
    path.write_text("kind: matmul\nname: mm\nM: 64\nN: 64\nK: 64\n")
    got = {}
    for soc in (None, "ours", "chipyard-1.10"):
        for style in ("loops", "isa"):
            code, out, _ = _cli(capsys, "run", "gemmini", str(path), "--style", style, "--json", "--scheduler",
                                "gemmini-default", *(("--soc", soc) if soc else ()))
            d = json.loads(out)
            assert code == 0 and d["verified"]
            assert d["cycles_source"] == ("timing model" if soc != "chipyard-1.10" else "timing model of "
                                          "chipyard-1.10 (Gemmini f13847e's units in Chipyard 1.10.0's SoC)")
            got[soc, style] = d["cycles"]
    assert got[None, "loops"] == got["ours", "loops"] and got[None, "isa"] == got["ours", "isa"]
    assert got["chipyard-1.10", "loops"] != got["ours", "loops"] and got["chipyard-1.10", "isa"] != got["ours", "isa"]
    wl = matmul("mm", M=64, N=64, K=64)
    mapping = schedule(wl, ARCH, scheduler="gemmini-default", bound=False).mapping
    ls = tune_tiles(wl, mapping, ARCH, config=CHIPYARD_SOC_CONFIG, budget=0, chooser=_mip_chooser)
    assert got["chipyard-1.10", "loops"] == ls.cycles
    with pytest.raises(SystemExit) as exit_:
        _cli(capsys, "run", "gemmini", str(path), "--soc", "rocket")
    assert exit_.value.code == 2 and "--soc" in capsys.readouterr().err


def test_loop_tile_model_describes_the_machine_the_config_names():
    """On Gemmini f13847e's units (``CHIPYARD_SOC_CONFIG``) an mvin row costs its beats only and a repeated bias
    row is fetched once: the MIP's model of that machine is within 10% of its timing model on a 128^3 GEMM's
    tilings, where the model of our RTL's units is 6-53% over it."""
    from costmodel.gemmini_loops import matmul_cycles
    from gemmini.config import CHIPYARD_SOC_CONFIG
    from gemmini.loop_schedule import loop_machine, loop_problem

    soc, ours = loop_machine(CHIPYARD_SOC_CONFIG), loop_machine(DEFAULT_CONFIG)
    assert (soc.row_gap_cycles, soc.repeated_row_fetched_once) == (0, True)
    assert (ours.row_gap_cycles, ours.repeated_row_fetched_once) == (1, False)
    vendor = from_workload(matmul("mm", M=128, N=128, K=128))
    problem = loop_problem(vendor)
    for tiles in ((2, 2, 2), (4, 4, 2), (2, 4, 8), (1, 8, 8)):
        timed = timing(isa.decode_stream(stream(vendor, tiles=tiles)), CHIPYARD_SOC_CONFIG).cycles
        assert abs(matmul_cycles(problem, tiles, soc).cycles - timed) <= 0.10 * timed, tiles
        assert matmul_cycles(problem, tiles, ours).cycles > 1.05 * timed, tiles
