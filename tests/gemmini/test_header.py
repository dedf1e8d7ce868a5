"""The C header encodes every command exactly as gemmini/isa.py does, natively and on RISC-V."""

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

import gemmini
from gemmini import isa, isa_loops
from gemmini.config import SMALL_CONFIG as CFG

INCLUDE = Path(gemmini.__file__).resolve().parent / "include"
HOST_HOOKS = r"""
#include <stdio.h>
void gemmini_host_issue(uint64_t funct, uint64_t rs1, uint64_t rs2) {
  printf("%llu 0x%016llx 0x%016llx\n", (unsigned long long)funct, (unsigned long long)rs1, (unsigned long long)rs2);
}
void gemmini_host_fence(void) { puts("fence"); }
"""


def _c_float(value: float) -> str:
    return float(np.float32(value)).hex() + "f"


def _c_local(addr: int) -> str:
    local = isa.LocalAddr.decode(addr)
    if local.is_garbage:
        return "GEMMINI_COSA_GARBAGE"
    if local.is_acc:
        return f"gemmini_cosa_acc({local.row}u, {int(local.accumulate)}, {int(local.full)})"
    return f"gemmini_cosa_sp({local.row}u)"


def _command_set(seed: int = 7):
    """(isa.py command, the same call in C) pairs over every command, with seeded random fields."""
    rng = np.random.default_rng(seed)
    pairs = []

    def local(acc_ok=True, garbage_ok=False):
        kind = rng.integers(0, 3 if garbage_ok else 2) if acc_ok else 0
        if kind == 2:
            return isa.GARBAGE
        if kind == 1:
            return isa.acc(int(rng.integers(0, CFG.acc_rows - CFG.dim)), bool(rng.integers(2)), bool(rng.integers(2)))
        return isa.sp(int(rng.integers(0, CFG.sp_rows - CFG.dim)))

    for _ in range(6):
        dim = lambda: int(rng.integers(1, CFG.dim + 1))  # noqa: E731
        flow, act = int(rng.integers(2)), int(rng.integers(2))
        a_stride, c_stride = (int(v) for v in rng.integers(0, 0xFFFF, 2))
        shift = int(rng.integers(0, 32))
        scale = float(np.float32(rng.uniform(-4, 4)))
        pairs.append((isa.config_ex(flow, act, False, False, a_stride, scale, c_stride, shift, config=CFG),
                      f"config_ex({flow}, {act}, 0, 0, {a_stride}u, {_c_float(scale)}, {c_stride}u, {shift}u)"))
        stride, ident, shrunk, lstride = int(rng.integers(0, 2**40)), int(rng.integers(3)), int(rng.integers(2)), \
            int(rng.integers(0, 0xFFFF))
        pairs.append((isa.config_ld(stride, scale, shrunk, ident, lstride, config=CFG),
                      f"config_ld({stride}ull, {_c_float(scale)}, {shrunk}, {ident}, {lstride}u)"))
        pairs.append((isa.config_st(stride & 0xFFFFFFFF, act, scale, config=CFG),
                      f"config_st({stride & 0xFFFFFFFF}u, {act}, {_c_float(scale)})"))
        dram = int(rng.integers(0, 2**62))
        addr = local()
        rows = dim()
        cols = int(rng.integers(1, (CFG.max_mvin_cols_acc if isa.LocalAddr.decode(addr).is_acc
                                    else CFG.max_mvin_cols_sp) + 1))
        pairs.append((isa.mvin(dram, addr, rows, cols, ident, config=CFG),
                      f"mvin({dram}ull, {_c_local(addr)}, {rows}u, {cols}u, {ident})"))
        addr, rows, cols = local(), dim(), dim()
        pairs.append((isa.mvout(dram, addr, rows, cols, config=CFG),
                      f"mvout({dram}ull, {_c_local(addr)}, {rows}u, {cols}u)"))
        for name in ("preload", "compute_preloaded", "compute_accumulated"):
            first, second = local(garbage_ok=True), local(garbage_ok=True)
            sizes = [dim() for _ in range(4)]
            pairs.append((getattr(isa, name)(first, second, *sizes, config=CFG),
                          f"{name}({_c_local(first)}, {_c_local(second)}, {', '.join(f'{s}u' for s in sizes)})"))
    pairs.append((isa.flush(True), "flush(1)"))
    pairs.append((isa.fence(), "fence()"))
    return pairs


def _program(pairs, issue: bool) -> str:
    body = []
    for _, call in pairs:
        if issue or call == "fence()":
            body.append(f"  gemmini_cosa_{call};")
        else:
            body.append(f"  gemmini_cosa_issue(gemmini_cosa_enc_{call});")
    return '#include "gemmini_cosa.h"\n' + HOST_HOOKS + "int main(void) {\n" + "\n".join(body) + "\n  return 0;\n}\n"


@pytest.mark.parametrize("issue", [True, False])
def test_native_header_matches_isa(tmp_path, issue):
    pairs = _command_set()
    source = tmp_path / "encodings.c"
    source.write_text(_program(pairs, issue))
    binary = tmp_path / "encodings"
    subprocess.run(["gcc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", f"-I{INCLUDE}", str(source),
                    "-o", str(binary)], check=True, capture_output=True, text=True)
    log = subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout
    logged = isa.decode_stream(log)
    expected = tuple(cmd for cmd, _ in pairs)
    assert len(logged) == len(expected)
    for got, want in zip(logged, expected):
        assert got == want, f"{isa.disassemble(want)}: C gave {got}"


def test_header_compiles_as_cplusplus(tmp_path):
    source = tmp_path / "encodings.cpp"
    source.write_text('#include <cstdint>\n' + _program(_command_set(seed=3)[:5], True))
    subprocess.run(["g++", "-Wall", "-Werror", "-c", f"-I{INCLUDE}", str(source), "-o", str(tmp_path / "x.o")],
                   check=True, capture_output=True, text=True)


RISCV_GCC = "riscv64-unknown-elf-gcc"


@pytest.mark.parametrize("opt", ["-O0", "-O2"])
def test_riscv_object_contains_custom3(tmp_path, opt):
    # a test requirement, not optional: `.ci/run` installs gcc-riscv64-unknown-elf and picolibc
    assert shutil.which(RISCV_GCC), f"{RISCV_GCC} is missing: apt-get install gcc-riscv64-unknown-elf picolibc-riscv64-unknown-elf"
    pairs = _command_set(seed=11)
    calls = "\n".join(f"  gemmini_cosa_{call};" for _, call in pairs)
    source = tmp_path / "kernel.c"
    source.write_text('#include "gemmini_cosa.h"\nvoid kernel(void) {\n' + calls + "\n}\n")
    obj = tmp_path / "kernel.o"
    subprocess.run([RISCV_GCC, "--specs=picolibc.specs", "-march=rv64gc", "-mcmodel=medany", opt, "-Wall",
                    "-Werror", f"-I{INCLUDE}", "-c", str(source), "-o", str(obj)],
                   check=True, capture_output=True, text=True)
    dump = subprocess.run([RISCV_GCC.replace("gcc", "objdump"), "-d", str(obj)], check=True,
                          capture_output=True, text=True).stdout
    words = [int(w, 16) for w in re.findall(r"^\s*[0-9a-f]+:\s+([0-9a-f]{8})\s", dump, flags=re.M)]
    rocc = [w for w in words if w & 0x7F == isa.OPCODE_CUSTOM3]
    assert rocc, "no custom-3 instruction in the object"
    for word in rocc:
        assert (word >> 12) & 7 == isa.ROCC_FUNCT3 and (word >> 7) & 0x1F == 0
    functs = {word >> 25 for word in rocc}
    wanted = {cmd.funct for cmd, _ in pairs if cmd.funct != isa.FENCE}
    assert re.search(r"\bfence\b", dump)
    if opt == "-O2":  # the issue switch folds: one instruction per issued command, its own funct
        assert functs == wanted
        assert len(rocc) == sum(1 for cmd, _ in pairs if cmd.funct != isa.FENCE)
    else:  # unoptimised, the whole issue switch is there: every funct the header knows (loop words included)
        assert functs == wanted | {isa.MVIN, isa.MVIN2, isa.MVIN3} | set(isa_loops.LOOP_FUNCTS)
