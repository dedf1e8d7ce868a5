"""One bare-metal program for a whole int8 network (``gemmini.network_program``, ``cosa build gemmini
MODEL.int8.onnx``): its host operators in C against ``gemmini.network_ops`` bit for bit, the program's
structure and memory check, the ELF build, and the whole program on Spike when ``GEMMINI_SPIKE`` is set."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="needs onnxruntime (the 'onnxruntime' extra)")

from onnx_networks import write_tiny_cnn  # noqa: E402

from gemmini import CodegenError  # noqa: E402
from gemmini import network_ops as ops  # noqa: E402
from gemmini.build import INCLUDE_DIR  # noqa: E402
from gemmini.network import load_network, plan  # noqa: E402
from gemmini.network_program import (NetworkProgram, check_memory, checksum, network_program, nhwc,  # noqa: E402
                                     parse_output)
from gemmini.network_run import distinct_layers, gemmini_layers, run_network, tiles_for  # noqa: E402
from gemmini.onnx_quantize import input_specs, synthetic_inputs  # noqa: E402

HOST_CC = shutil.which("gcc") or shutil.which("cc")
QSCALE = float.fromhex("0x1.3p-5")   # the harness's QuantizeLinear scale
RISCV_CC = os.environ.get("GEMMINI_RISCV_GCC") or shutil.which("riscv64-unknown-elf-gcc")


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_tiny_cnn(tmp_path_factory.mktemp("net"))


@pytest.fixture(scope="module")
def compiled(models):
    """(net, steps, values of one seeded input, library-tiles program)."""
    net = load_network(models[1])
    steps = plan(net)
    feeds = next(iter(synthetic_inputs(input_specs(net.model, net.source), 1, 3)))
    run = run_network(net, feeds, {}, "gemmini-default", steps)
    return net, steps, run.values, network_program(net, steps, run.values, {}, "gemmini-default")


# --- the host operators in C -------------------------------------------------------------------------------
HARNESS = r"""
#include <stdio.h>
#include <stdlib.h>
#include "gemmini_cosa_net.h"
static void *slurp(const char *path, long *size) {
  FILE *f = fopen(path, "rb"); fseek(f, 0, SEEK_END); *size = ftell(f); fseek(f, 0, SEEK_SET);
  void *p = malloc(*size + 64); if (fread(p, 1, *size, f) != (size_t)*size) exit(3); fclose(f); return p;
}
static void spill(const char *path, const void *p, long size) {
  FILE *f = fopen(path, "wb"); fwrite(p, 1, size, f); fclose(f);
}
int main(int argc, char **argv) {
  long n; (void)argc;
  const char *dir = argv[1];
  char path[512];
  snprintf(path, sizeof path, "%s/x.f32", dir); float *xf = slurp(path, &n); long nf = n / 4;
  snprintf(path, sizeof path, "%s/a.i8", dir); int8_t *a = slurp(path, &n);
  snprintf(path, sizeof path, "%s/b.i8", dir); int8_t *b = slurp(path, &n); long ni = n;
  int8_t *q = malloc(nf); float *g = malloc(4 * 64); int8_t *y = malloc(ni); int8_t *p = malloc(ni);
  int8_t *s = malloc(64); uint8_t *fl = malloc(ni);
  cosa_net_quantize(xf, q, nf, 0x1.3p-5f, 0);
  snprintf(path, sizeof path, "%s/q.i8", dir); spill(path, q, nf);
  cosa_net_qlinear_add(a, b, y, ni, RATIO_A, RATIO_B, 0, 1);
  snprintf(path, sizeof path, "%s/add.i8", dir); spill(path, y, ni);
  /* a: NHWC [2, 5, 7, 6]; a 3x3 max-pool, stride 2, padding 1: [2, 3, 4, 6] */
  cosa_net_max_pool(a, p, 2, 6, 5, 7, 3, 3, 2, 2, 1, 1, 1, 1, 3, 4);
  snprintf(path, sizeof path, "%s/pool.i8", dir); spill(path, p, 2 * 3 * 4 * 6);
  cosa_net_qlinear_global_average_pool(a, s, 2, 6, 35L, GAP_SCALE, 0, 0);
  snprintf(path, sizeof path, "%s/qgap.i8", dir); spill(path, s, 12);
  cosa_net_global_average_pool(xf, g, 2, 6, 35L);
  snprintf(path, sizeof path, "%s/gap.f32", dir); spill(path, g, 4 * 12);
  cosa_net_flatten_nhwc((const uint8_t *)a, fl, 2, 6, 35L, 1);
  snprintf(path, sizeof path, "%s/flat.i8", dir); spill(path, fl, ni);
  return 0;
}
"""


@pytest.mark.skipif(HOST_CC is None, reason="no host C compiler")
def test_host_operators_in_c_equal_network_ops_bit_for_bit(tmp_path):
    rng = np.random.default_rng(11)
    nchw = (2, 6, 5, 7)
    xf = (rng.standard_normal(nchw) * 3).astype(np.float32)
    xf.flat[:4] = [0.5 * QSCALE, 1.5 * QSCALE, -2.5 * QSCALE, 1e9]    # ties and saturation
    a = rng.integers(-128, 128, nchw, dtype=np.int8)
    b = rng.integers(-128, 128, nchw, dtype=np.int8)
    nhwc(xf).tofile(tmp_path / "x.f32")
    nhwc(a).tofile(tmp_path / "a.i8")
    nhwc(b).tofile(tmp_path / "b.i8")
    sa, sb, sc = np.float32(0.031), np.float32(0.047), np.float32(0.052)       # QLinearAdd's scales
    ratio_a, ratio_b = sa / sc, sb / sc                                          # as network_program computes them
    gin, gout = np.float32(0.02), np.float32(0.013)                              # QLinearGlobalAveragePool's
    gap_scale = gin / (gout * np.float32(35))
    source = tmp_path / "h.c"
    source.write_text(HARNESS)
    exe = tmp_path / "h"
    hexf = lambda v: f"{float(v).hex()}f"  # noqa: E731
    subprocess.run([HOST_CC, "-O2", "-std=c99", "-ffp-contract=off", f"-I{INCLUDE_DIR}", f"-DRATIO_A={hexf(ratio_a)}",
                    f"-DRATIO_B={hexf(ratio_b)}", f"-DGAP_SCALE={hexf(gap_scale)}", str(source), "-lm", "-o", str(exe)],
                   check=True, capture_output=True, text=True)
    subprocess.run([str(exe), str(tmp_path)], check=True, timeout=60)
    read = lambda name, dt, shape: np.fromfile(tmp_path / name, dtype=dt).reshape(shape)  # noqa: E731
    assert np.array_equal(read("q.i8", np.int8, (2, 5, 7, 6)), nhwc(ops.quantize_linear(xf, np.float32(QSCALE))))
    add = ops.qlinear_add(a, sa, b, sb, sc, relu=True)
    assert np.array_equal(read("add.i8", np.int8, (2, 5, 7, 6)), nhwc(add))
    pool = ops.max_pool(a, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    assert pool.shape == (2, 6, 3, 4)
    assert np.array_equal(read("pool.i8", np.int8, (2, 3, 4, 6)), nhwc(pool))
    qgap = ops.qlinear_global_average_pool(a, gin, gout)
    assert np.array_equal(read("qgap.i8", np.int8, (2, 6)), qgap.reshape(2, 6))
    assert np.array_equal(read("gap.f32", np.float32, (2, 6)), ops.global_average_pool(xf).reshape(2, 6))
    assert np.array_equal(read("flat.i8", np.int8, (2, 210)), ops.flatten(a))


# --- the program ------------------------------------------------------------------------------------------
def test_program_runs_every_step_to_the_compared_tensor(compiled):
    net, steps, values, program = compiled
    names = [name for name, _ in program.steps]
    assert [on for _, on in program.steps].count("gemmini") == 4
    assert "y_DequantizeLinear" not in " ".join(names)            # the float output is not needed
    assert program.compared in values and program.expected.dtype == np.int8
    assert np.array_equal(program.expected, nhwc(values[program.compared]))
    for name, on in program.steps:                                  # one timed call per step, in order
        assert f"cosa-net step {names.index(name)} " in program.source
    assert program.source.count("gemmini_cosa_fence();") >= 4
    assert '.incbin \\"" COSA_NET_BLOB' in program.source
    assert program.constant_bytes == len(program.blob) and program.constant_bytes % 64 == 0


def test_cosa_tiles_change_only_the_layer_streams(compiled):
    net, steps, values, library = compiled
    layers = distinct_layers(gemmini_layers(net, steps))
    from cosa.mip import choose_loop_tiles
    from cosa.scheduler import schedule
    from gemmini import GemminiConfig

    arch = GemminiConfig().arch("ws")
    tiles = {k: tiles_for(g, schedule(g.workload, arch, scheduler="cosa", bound=False).mapping, arch, budget=0,
                          chooser=choose_loop_tiles) for k, g in layers.items()}
    cosa = network_program(net, steps, values, tiles, "cosa")
    assert cosa.steps == library.steps and cosa.arena_bytes == library.arena_bytes
    if any(t.tiles is not None for t in tiles.values()):
        assert cosa.source != library.source
    # the depthwise layer runs as packed groups: its constants are its weights laid out block-diagonally (all
    # other constants as the library's calls read them)
    from gemmini.network_run import block_diagonal

    own = [g for k, g in layers.items() if tiles[k].own_calls]
    assert [g.step.name for g in own] == ["dw_quant"]
    w = net.constants[own[0].step.inputs[3]]
    packed, plain = block_diagonal(w, 8).tobytes(), np.ascontiguousarray(w[:, 0]).tobytes()
    assert packed in cosa.blob and packed not in library.blob and plain in library.blob
    assert len(cosa.blob) - len(library.blob) <= -(-(len(packed) - len(plain)) // 64) * 64


def test_a_program_larger_than_the_memory_is_refused_with_its_sizes(compiled):
    program = compiled[3]
    big = NetworkProgram(program.name, program.source, b"", 70 << 20, 1 << 20, program.steps, program.compared,
                         program.expected)
    with pytest.raises(CodegenError) as err:
        check_memory(big, "net.onnx")
    assert "1,048,576 bytes of constants" in str(err.value) and "73,400,320-byte arena" in str(err.value)


def test_output_lines_parse_back():
    expected = np.array([[1, -2, 127, -128]], dtype=np.int8)
    text = ("cosa-net step 0 x_q host 120\ncosa-net step 1 conv gemmini 9000\n"
            f"cosa-net output {expected.tobytes().hex()}\ncosa-net checksum {checksum(expected)}\n"
            "gemmini network tiny: PASS (0 of 4 mismatches)\n")
    out = parse_output(text, expected)
    assert out.steps == [("x_q", "host", 120), ("conv", "gemmini", 9000)]
    assert np.array_equal(out.output, expected) and out.passed and out.mismatches == 0
    assert out.checksum == 1 * 1 - 2 * 2 + 127 * 3 - 128 * 4
    assert not parse_output(text.replace("PASS (0", "FAIL (1"), expected).passed


@pytest.mark.skipif(RISCV_CC is None, reason="no riscv64-unknown-elf-gcc (Debian: gcc-riscv64-unknown-elf)")
def test_cosa_build_writes_the_network_elf(models, tmp_path, capsys):
    from cosa.cli import main

    elf = tmp_path / "net.elf"
    assert main(["build", "gemmini", str(models[1]), "-o", str(elf), "--scheduler", "gemmini-default"]) == 0
    assert elf.is_file() and elf.with_suffix(".c").is_file() and elf.with_suffix(".bin").is_file()
    assert "9 steps, 4 on Gemmini" in capsys.readouterr().err


@pytest.mark.skipif(not os.environ.get("GEMMINI_SPIKE"), reason="GEMMINI_SPIKE (Spike with libgemmini) is not set")
@pytest.mark.parametrize("scheduler", ["cosa", "gemmini-default"])
def test_whole_network_on_spike_matches_onnxruntime(models, scheduler, capsys):
    from cosa.cli import main

    assert main(["run", "gemmini", str(models[1]), "--sim", "spike", "--scheduler", scheduler, "--inputs", "2",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["verified"] and d["max_abs_diff_vs_onnxruntime"] <= 1 and d["top1_equal"]
    assert all(s["passed"] for s in d["spike"]) and len(d["spike"]) == 2
    assert [name for name, on, _ in d["spike"][0]["steps"] if on == "gemmini"] == [
        r["name"] for r in d["layers"] if r["on"] == "gemmini"]
