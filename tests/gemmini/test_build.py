"""Bare-metal ELFs of generated programs: our runtime, `cosa build gemmini`, and runs on Spike + libgemmini.

The runtime (start-up, HTIF exit, trap handler) is checked on QEMU's `spike` machine, which implements
HTIF's exit but has no Gemmini: a program that reaches its first Gemmini instruction there ends with the
illegal-instruction status.  The runs on Gemmini's own functional model need a user's Spike with the
libgemmini extension (GEMMINI_SPIKE) and, for the gemmini-h style, a checkout of gemmini-rocc-tests
(GEMMINI_ROCC_TESTS); they are skipped where those are not set.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import numpy as np
import pytest

import workloads
from cosa.cli import main as cli_main
from cosa.scheduler import schedule
from gemmini import GemminiConfig, codegen, run
from gemmini.build import BuildError, build_elf, compile_elf, run_spike

QEMU = shutil.which("qemu-system-riscv64")
NM = shutil.which("riscv64-unknown-elf-nm")


def _qemu(elf) -> int:
    proc = subprocess.run([QEMU, "-machine", "spike", "-bios", "none", "-kernel", str(elf), "-nographic",
                           "-monitor", "none", "-serial", "none"], capture_output=True, timeout=60)
    return proc.returncode


def _program(wl, scheduler="gemmini-default", flow="ws", dim=None, time_limit=10):
    cfg = GemminiConfig(dim=dim) if dim else GemminiConfig()
    arch = cfg.arch(flow)
    mapping = schedule(wl, arch, scheduler=scheduler, time_limit_s=time_limit, bound=False).mapping
    return codegen.generate(wl, mapping, arch, dataflow=flow, scale="auto")


MM = workloads.matmul("mm", M=40, N=24, K=36)


def test_runtime_starts_zeroes_bss_sets_tls_and_exits_with_the_status(tmp_path):
    src = tmp_path / "rt.c"
    src.write_text("#include <errno.h>\nstatic long zeroed[64];\n"
                   "int main(void) {\n  for (int i = 0; i < 64; i++) if (zeroed[i]) return 3;\n"
                   "  errno = 11;\n  if (errno != 11) return 4;\n  return 42;\n}\n")
    elf = compile_elf(src, tmp_path / "rt.elf")
    assert _qemu(elf) == 42


def test_a_gemmini_program_reaches_its_first_rocc_instruction_and_a_trap_ends_the_run(tmp_path):
    # without Gemmini the first RoCC instruction is illegal: the trap handler exits 128 + mcause (2)
    elf = build_elf(_program(MM), tmp_path / "mm.elf")
    assert _qemu(elf) == 130


def test_the_elf_has_htif_words_rocc_instructions_and_its_c_source(tmp_path):
    program = _program(MM)
    elf = build_elf(program, tmp_path / "mm.elf")
    symbols = subprocess.run([NM, str(elf)], capture_output=True, text=True, check=True).stdout.split()
    assert "tohost" in symbols and "fromhost" in symbols and "_start" in symbols
    text = elf.read_bytes()
    assert text[:4] == b"\x7fELF"
    c_source = (tmp_path / "mm.c").read_text()
    assert "int main(void)" in c_source and "PASS" in c_source


@pytest.mark.parametrize("spec", [dict(C=64, K=64, H=14, W=14, R=3, S=3, padding=1),
                                  dict(C=256, K=64, H=7, W=7, R=1, S=1)])
def test_self_checking_scale_leaves_most_outputs_unsaturated(spec):
    program = _program(workloads.conv2d("c", **spec))
    out = run.run_program(program, with_timing=False)
    assert out.verified
    saturated = np.mean(np.abs(out.outputs.astype(int)) >= 127)
    assert saturated < 0.05
    assert np.std(out.outputs.astype(float)) > 20  # the check sees real arithmetic, not a clipped constant


def test_cosa_build_writes_the_elf_and_its_c(tmp_path, capsys):
    out = tmp_path / "prog.elf"
    assert cli_main(["build", "gemmini", "resnet50/res2a_branch2b", "--scheduler", "gemmini-default",
                     "-o", str(out)]) == 0
    assert out.is_file() and out.with_suffix(".c").is_file()
    assert "wrote" in capsys.readouterr().err


def test_missing_toolchain_and_spike_are_one_line_errors(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GEMMINI_RISCV_GCC", str(tmp_path / "no-such-gcc"))
    assert cli_main(["build", "gemmini", "resnet50/res2a_branch2b", "--scheduler", "gemmini-default",
                     "-o", str(tmp_path / "p.elf")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "gcc-riscv64-unknown-elf" in err
    monkeypatch.delenv("GEMMINI_RISCV_GCC")
    monkeypatch.setenv("GEMMINI_SPIKE", str(tmp_path / "no-such-spike"))
    assert cli_main(["run", "gemmini", "resnet50/res2a_branch2b", "--scheduler", "gemmini-default",
                     "--sim", "spike"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "GEMMINI_SPIKE" in err
    monkeypatch.delenv("GEMMINI_ROCC_TESTS", raising=False)
    assert cli_main(["build", "gemmini", "resnet50/res2a_branch2b", "--scheduler", "gemmini-default",
                     "--style", "gemmini-h", "-o", str(tmp_path / "q.elf")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "GEMMINI_ROCC_TESTS" in err


def test_a_compiler_failure_names_the_full_log(tmp_path):
    bad = tmp_path / "bad.c"
    bad.write_text("int main(void) { return undefined_thing; }\n")
    with pytest.raises(BuildError, match="full log") as info:
        compile_elf(bad, tmp_path / "bad.elf")
    assert (tmp_path / "bad.log").is_file() and str(tmp_path / "bad.log") in str(info.value)


# --- live: Gemmini's own functional model (Spike + libgemmini) --------------------------------------

SPIKE_CASES = {
    "matmul": workloads.matmul("mm", M=64, N=48, K=80),
    "matmul_ragged": workloads.matmul("mm_ragged", M=37, N=21, K=45),
    "conv3x3": workloads.conv2d("c3", C=32, K=32, H=10, W=10, R=3, S=3, padding=1),
    "conv_stride2": workloads.conv2d("c3s2", C=16, K=32, H=12, W=12, R=3, S=3, stride=2, padding=1),
    "conv1x1": workloads.conv2d("c1", C=64, K=48, H=8, W=8, R=1, S=1),
    "depthwise": workloads.depthwise_conv2d("dw", C=32, H=10, W=10, R=3, S=3, padding=1),
}
live_spike = pytest.mark.skipif(not os.environ.get("GEMMINI_SPIKE"),
                                reason="GEMMINI_SPIKE (Spike with libgemmini) is not set")


def _spike_params():
    for case in SPIKE_CASES:
        for scheduler in ("cosa", "gemmini-default"):
            for flow in ("ws", "os"):
                if flow == "os" and case not in ("matmul", "matmul_ragged"):
                    continue  # OS convolutions: one pixel dim on the array; covered by the matmuls here
                if scheduler == "gemmini-default" and case == "depthwise":
                    continue
                yield case, scheduler, flow


@live_spike
@pytest.mark.parametrize("case,scheduler,flow", list(_spike_params()))
def test_emitted_isa_programs_pass_on_spike_with_libgemmini(tmp_path, case, scheduler, flow):
    program = _program(SPIKE_CASES[case], scheduler=scheduler, flow=flow)
    result = run_spike(build_elf(program, tmp_path / f"{case}.elf"))
    assert result.verified, result.output


@live_spike
@pytest.mark.skipif(not os.environ.get("GEMMINI_ROCC_TESTS"), reason="GEMMINI_ROCC_TESTS is not set")
@pytest.mark.parametrize("case,scheduler", [(c, s) for c in ("matmul", "matmul_ragged", "conv3x3", "conv_stride2",
                                                             "conv1x1") for s in ("cosa", "gemmini-default")])
def test_gemmini_h_programs_pass_on_spike_with_libgemmini(tmp_path, case, scheduler):
    program = _program(SPIKE_CASES[case], scheduler=scheduler)
    result = run_spike(build_elf(program, tmp_path / f"{case}.elf", style="gemmini-h"))
    assert result.verified, result.output


@live_spike
def test_a_corrupted_program_fails_on_spike(tmp_path):
    program = _program(SPIKE_CASES["matmul"])
    elf = build_elf(program, tmp_path / "mm.elf")
    c_source = (tmp_path / "mm.c").read_text()
    expected = "_expected[" + c_source.split("_expected[", 1)[1].split("]", 1)[0] + "] = {\n  "
    (tmp_path / "bad.c").write_text(c_source.replace(expected, expected + "1 + ", 1))
    result = run_spike(compile_elf(tmp_path / "bad.c", tmp_path / "bad.elf"))
    assert not result.verified and result.exit_code != 0 and "FAIL" in result.output
    assert run_spike(elf).verified
