"""Emitted C: the host build logs exactly the Python command stream; the RISC-V build has custom-3 instructions."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gemmini.codegen import generate, relative_stream
from gemmini.codegen.c import emit_c, emit_gemmini_h, host_logger_c, parse_host_log
from gemmini.config import DEFAULT_CONFIG, SMALL_CONFIG
from gemmini.errors import CodegenError
from mappings import LevelMapping, Mapping
from workloads import conv2d, depthwise_conv2d, matmul

INCLUDE = Path(__file__).resolve().parents[2] / "gemmini" / "include"
RISCV_GCC = "riscv64-unknown-elf-gcc"


def lm(temporal=None, spatial=None, order=()):
    return LevelMapping(temporal or {}, spatial or {}, tuple(order))


MM = matmul("mm", M=12, N=8, K=16)
CONV = conv2d("cv", N=2, C=8, K=8, H=7, W=6, R=3, S=3, stride=2, padding=1)
BM = matmul("bm", M=8, N=8, K=12, batch=3)
GC = conv2d("gc", N=2, C=8, K=8, H=6, W=5, R=3, S=3, padding=1, groups=2)
DW = depthwise_conv2d("dw", C=6, H=7, W=6, R=3, S=3, padding=1, stride=2)


def _programs():
    q, p = CONV.dims["Q"], CONV.dims["P"]
    return {
        "matmul-ws-spill": generate(MM, Mapping((lm({"M": 3, "K": 2}, order=("K", "M", "N")), lm(),
                                                 lm({"N": 2, "K": 2}, {"K": 4, "N": 4}, ("N", "K")), lm({"M": 4}))),
                                    SMALL_CONFIG, dataflow="ws", relu=True, scale=0.05),
        "matmul-os-nobias": generate(MM, Mapping((lm({"M": 3}, order=("N", "M", "K")), lm(),
                                                  lm({"N": 2, "K": 2}, {"M": 4, "N": 4}, ("N", "K")), lm({"K": 8}))),
                                     SMALL_CONFIG, dataflow="os", bias=False),
        "conv-ws-padded": generate(CONV, Mapping((lm({"K": 2, "C": 2}, order=("C", "K")), lm({"N": 2}),
                                                  lm({"R": 3, "S": 3, "Q": q}, {"C": 4, "K": 4}, ("R", "Q", "S")),
                                                  lm({"P": p}))), SMALL_CONFIG, dataflow="ws", scale=0.01),
        "conv-ws-columns": generate(conv2d("strip", N=1, C=4, K=4, H=12, W=8, R=3, S=3, padding=1),
                                   Mapping((lm({"P": 4}), lm(), lm({"R": 3, "S": 3, "Q": 12}, {"C": 4, "K": 4}),
                                            lm({"P": 2}))), SMALL_CONFIG, dataflow="ws", orientation="columns"),
        "conv-gemmini-default": _from_scheduler(conv2d("cvd", N=1, C=8, K=8, H=7, W=7, R=3, S=3, padding=1)),
        "batched-matmul-ws-spill": generate(BM, Mapping((lm({"K": 3, "batch": 3}, order=("K", "batch")), lm(),
                                                         lm({"N": 2, "M": 2}, {"K": 4, "N": 4}), lm({"M": 4}))),
                                            SMALL_CONFIG, dataflow="ws", relu=True, scale=0.02),
        "grouped-conv-ws": generate(GC, Mapping((lm({"N": 2}), lm({"G": 2}),
                                                 lm({"R": 3, "S": 3, "Q": GC.dims["Q"]}, {"C": 4, "K": 4}),
                                                 lm({"P": GC.dims["P"]}))), SMALL_CONFIG, dataflow="ws", scale=0.01),
        "depthwise-ws": generate(DW, Mapping((lm({"G": 3}), lm({"G": 2}), lm({"R": 3, "S": 3}),
                                              lm({"P": DW.dims["P"], "Q": DW.dims["Q"]}))), SMALL_CONFIG,
                                 dataflow="ws", relu=True, scale=0.05),
    }


def _from_scheduler(wl):
    from cosa.baselines import gemmini_default

    arch = SMALL_CONFIG.arch("ws")
    return generate(wl, gemmini_default(wl, arch).mapping, arch, relu=True, scale=0.02)


PROGRAMS = _programs()


def _gcc(*args, cwd):
    result = subprocess.run(list(args), cwd=cwd, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.parametrize("key", sorted(PROGRAMS))
def test_host_build_logs_the_python_stream_exactly(key, tmp_path):
    assert shutil.which("gcc"), "gcc is missing (a test requirement; `.ci/run` installs it)"
    program = PROGRAMS[key]
    (tmp_path / "prog.c").write_text(emit_c(program))
    (tmp_path / "log.c").write_text(host_logger_c(program))
    _gcc("gcc", "-std=c11", "-O1", "-Wall", "-Werror", "-I", str(INCLUDE), "-o", "prog", "prog.c", "log.c",
         cwd=tmp_path)
    log = subprocess.run([str(tmp_path / "prog")], capture_output=True, text=True, check=True).stdout
    spans, commands = parse_host_log(log)
    assert {name for _, _, name in spans} == set(program.buffers)
    assert len(commands) == len(program.commands)
    assert relative_stream(commands, spans) == program.relative()


def test_the_c_stays_small_for_a_big_layer():
    wl = conv2d("res", N=1, C=64, K=64, H=56, W=56, R=3, S=3, padding=1)
    mapping = Mapping((lm({"Q": 4, "P": 4, "K": 2}, order=("Q", "P", "K")), lm(),
                       lm({"S": 3, "R": 3, "C": 4, "K": 2}, {"C": 16, "K": 16}, ("K", "S", "R", "C")),
                       lm({"Q": 14, "P": 14})))
    program = generate(wl, mapping, DEFAULT_CONFIG, dataflow="ws")
    source = emit_c(program)
    assert len(program.commands) > 20_000
    # pipelined (the default for double-buffered tiles): the first tiles' moves (prologue), the next tiles'
    # moves among the computes and the last tile's mvouts (epilogue) are each printed once more
    assert len(source) < 16_000 and source.count("gemmini_cosa_") < 60
    serial = emit_c(generate(wl, mapping, DEFAULT_CONFIG, dataflow="ws", pipeline=False))
    assert len(serial) < 12_000 and serial.count("gemmini_cosa_") < 40


def test_self_checking_main_embeds_data_and_expected_output():
    program = PROGRAMS["matmul-os-nobias"]
    source = emit_c(program, with_main=True, seed=4)
    assert "int main(void)" in source and "_expected[96]" in source and "return mismatches ? 1 : 0;" in source
    assert "_test_bias" not in source  # generated without bias


def _custom3_words(obj: Path) -> list[int]:
    dump = subprocess.run(["riscv64-unknown-elf-objdump", "-d", str(obj)], capture_output=True, text=True,
                          check=True).stdout
    words = [int(m, 16) for m in re.findall(r"^\s*[0-9a-f]+:\s+([0-9a-f]{8})\s", dump, flags=re.M)]
    return [w for w in words if w & 0x7F == 0x7B]


@pytest.mark.parametrize("key", sorted(PROGRAMS))
def test_riscv_cross_compile_has_custom3_instructions(key, tmp_path):
    assert shutil.which(RISCV_GCC), f"{RISCV_GCC} is missing: apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf"
    program = PROGRAMS[key]
    (tmp_path / "main.c").write_text(emit_c(program, with_main=True))
    _gcc(RISCV_GCC, "--specs=picolibc.specs", "-march=rv64gc", "-mcmodel=medany", "-O2", "-Wall", "-I",
         str(INCLUDE), "-c", "-o", "main.o", "main.c", cwd=tmp_path)
    words = _custom3_words(tmp_path / "main.o")
    functs = {w >> 25 for w in words}
    assert all((w >> 12) & 7 == 3 and (w >> 7) & 0x1F == 0 for w in words)  # funct3 = 3, rd = x0
    used = {c.funct for c in program.commands if c.funct < 128}
    assert used <= functs  # every command kind of the stream is encoded as a custom-3 instruction


def test_gemmini_h_style_uses_the_mapping_tiles():
    program = PROGRAMS["conv-ws-padded"]
    text = emit_gemmini_h(program)
    e1 = program.plan.extents[1]
    assert "tiled_conv(" in text and f"{e1['n']}, {e1['oh']}, {e1['ow']}, {e1['k']}, {e1['kh']}, {e1['kw']}, " \
        f"{e1['c']}" in text
    mm = emit_gemmini_h(PROGRAMS["matmul-os-nobias"])
    assert "tiled_matmul(12, 8, 16," in mm and "OS);" in mm and "NULL" in mm


def test_gemmini_h_style_refuses_what_the_vendor_api_cannot_express():
    wl = conv2d("rect", N=1, C=4, K=4, H=6, W=6, R=3, S=1)
    program = generate(wl, Mapping((lm(), lm(), lm({"R": 3, "Q": 6}, {"C": 4, "K": 4}), lm({"P": 4}))),
                       SMALL_CONFIG, dataflow="ws")
    with pytest.raises(CodegenError, match="square kernel"):
        emit_gemmini_h(program)
