"""Gemmini programs on a Chipyard Verilator simulator of a Rocket + Gemmini SoC (``gemmini.chipyard``).

The live tests run our ELFs on the user's simulator (``CHIPYARD_SIM``: a ``simulator-<config>`` built from
Gemmini's generated RTL) and are skipped without it.  The rest check the run's plumbing against a fake
simulator (a script in tmp_path that prints what Chipyard's harness prints): the program's own check and
cycles, and every error path (missing simulator, failing simulator, cycle limit, wall time-out: one line
naming which and the log, exit 1), plus the timed main, the vendor stream as C and the gemmini_params.h reader.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

import workloads
from cosa.cli import main as cli_main
from cosa.scheduler import schedule
from gemmini import DEFAULT_CONFIG, codegen
from gemmini.build import build_elf, parse_cycles, timed_source
from gemmini.chipyard import (ChipyardRun, find_simulator, loop_conv_layout, parse_run, run_chipyard, vendor_c,
                              vendor_elf)
from gemmini.config import ParamsError, read_params
from gemmini.errors import SimulationError
from gemmini.vendor.calls import from_workload

DATA = Path(__file__).parent.parent / "data" / "chipyard"
SIM = os.environ.get("CHIPYARD_SIM")

PASS_OUT = "gemmini cycles: 1234 (core cycle 56789 at the end)\ngemmini mm: PASS (0 of 4096 mismatches)\n"


def _fake(tmp_path, body: str) -> str:
    """An executable fake simulator: a Python script with ``body`` (argv in ``args``)."""
    path = tmp_path / "simulator-fake"
    path.write_text(f"#!{sys.executable}\nimport sys, time\nargs = sys.argv[1:]\n{body}\n")
    path.chmod(0o755)
    return str(path)


def _elf(tmp_path) -> Path:
    elf = tmp_path / "prog.elf"
    elf.write_bytes(b"\x7fELF")
    return elf


# --- output parsing -------------------------------------------------------------------------------------
def test_parse_run_reads_the_programs_check_and_cycles():
    d = parse_run("[UART] UART0 is here\n" + PASS_OUT, "- TestDriver.v:151: Verilog $finish\n", 0)
    assert d["verified"] and d["cycles"] == 1234 and d["core_cycles"] == 56789 and d["exit_code"] == 0
    assert d["check"] == "gemmini mm: PASS (0 of 4096 mismatches)" and not d["cycle_limit"]


def test_parse_run_failed_check_and_exit_code():
    out = "gemmini cycles: 10 (core cycle 20 at the end)\ngemmini mm: FAIL (3 of 4096 mismatches)\n"
    d = parse_run(out, "Assertion failed: *** FAILED *** (exit code =          1)\n", 1)  # Verilog's %d pads
    assert not d["verified"] and d["exit_code"] == 1 and "FAIL" in d["check"]
    # a PASS line is not enough when the program exits non-zero
    assert not parse_run(PASS_OUT, "*** FAILED *** (exit code = 130)\n", 1)["verified"]


def test_parse_run_cycle_limit():
    d = parse_run("", "*** FAILED ***                       (timeout) after                 1001 simulation cycles\n", 255)
    assert d["cycle_limit"] and not d["verified"] and d["cycles"] is None


# --- runs on a fake simulator ---------------------------------------------------------------------------
def test_run_passes_loadmem_and_max_cycles_and_reports(tmp_path):
    sim = _fake(tmp_path, "assert any(a.startswith('+loadmem=') for a in args)\n"
                          "assert '+max-cycles=5000' in args and args[-1].endswith('prog.elf')\n"
                          f"sys.stdout.write({PASS_OUT!r})")
    run = run_chipyard(_elf(tmp_path), simulator=sim, max_cycles=5000, timeout_s=60)
    assert isinstance(run, ChipyardRun) and run.verified and run.cycles == 1234 and run.core_cycles == 56789
    assert run.cycles_per_s == pytest.approx(56789 / run.wall_s) and Path(run.log).is_file()
    assert "PASS" in Path(run.log).read_text()


def test_run_failed_check_is_a_result_not_an_error(tmp_path):
    sim = _fake(tmp_path, "print('gemmini mm: FAIL (5 of 64 mismatches)')\n"
                          "sys.stderr.write('*** FAILED *** (exit code = 1)\\n'); sys.exit(1)")
    run = run_chipyard(_elf(tmp_path), simulator=sim, timeout_s=60)
    assert not run.verified and run.exit_code == 1 and "FAIL" in run.check


def test_cycle_limit_is_one_line_with_the_log(tmp_path):
    sim = _fake(tmp_path, "sys.stderr.write('*** FAILED *** (timeout) after 101 simulation cycles\\n'); sys.exit(1)")
    with pytest.raises(SimulationError, match="cycle limit") as err:
        run_chipyard(_elf(tmp_path), simulator=sim, max_cycles=100, timeout_s=60)
    assert "log: " in str(err.value) and "\n" not in str(err.value) and err.value.exit_code == 1
    assert Path(str(err.value).split("log: ")[1]).is_file()


def test_time_out_kills_the_simulator(tmp_path):
    sim = _fake(tmp_path, "print('started', flush=True)\ntime.sleep(600)")
    t0 = time.perf_counter()
    with pytest.raises(SimulationError, match="time-out") as err:
        run_chipyard(_elf(tmp_path), simulator=sim, timeout_s=1)
    assert time.perf_counter() - t0 < 30 and "log: " in str(err.value)


def test_failing_simulator_names_its_last_line_and_log(tmp_path):
    sim = _fake(tmp_path, "sys.stderr.write('error while loading shared libraries: libfesvr.so\\n'); sys.exit(127)")
    with pytest.raises(SimulationError, match="simulator failed .*libfesvr.*log: "):
        run_chipyard(_elf(tmp_path), simulator=sim, timeout_s=60)


def test_simulator_ending_without_the_programs_check_fails(tmp_path):
    sim = _fake(tmp_path, "print('[UART] UART0 is here (stdin/stdout).')")  # e.g. stopped by a signal, exit 0
    with pytest.raises(SimulationError, match="simulator failed .*log: "):
        run_chipyard(_elf(tmp_path), simulator=sim, timeout_s=60)


def test_missing_simulator(tmp_path, monkeypatch):
    monkeypatch.delenv("CHIPYARD_SIM", raising=False)
    with pytest.raises(SimulationError, match="CHIPYARD_SIM"):
        find_simulator()
    with pytest.raises(SimulationError, match="not found"):
        run_chipyard(_elf(tmp_path), simulator=tmp_path / "no-such-simulator")


def test_cli_sim_chipyard(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("CHIPYARD_SIM", raising=False)
    argv = ["run", "gemmini", str(DATA / "mm_16x16x16.yaml"), "--scheduler", "gemmini-default", "--sim", "chipyard"]
    assert cli_main(argv) == 1
    assert "CHIPYARD_SIM" in capsys.readouterr().err
    sim = _fake(tmp_path, "assert open(args[-1], 'rb').read(4) == b'\\x7fELF'\n"
                          f"sys.stdout.write({PASS_OUT!r})")
    assert cli_main(argv + ["--simulator", sim]) == 0
    out = capsys.readouterr().out
    assert "verified by its own check" in out and "1,234 cycles" in out
    bad = _fake(tmp_path, "sys.stderr.write('*** FAILED *** (timeout) after 9 simulation cycles\\n'); sys.exit(1)")
    assert cli_main(argv + ["--simulator", bad]) == 1
    err = capsys.readouterr().err.strip()
    assert "cycle limit" in err and "log: " in err and len(err.splitlines()) == 1


def test_cli_loops_on_chipyard_reports_the_measured_cycles(tmp_path, capsys, monkeypatch):
    """--style loops --sim chipyard --json: ``cycles`` is what the program measured on the simulator (1,234
    here); the tile search's timing-model figures keep their own keys and never overwrite it."""
    import json

    monkeypatch.delenv("CHIPYARD_SIM", raising=False)
    sim = _fake(tmp_path, f"sys.stdout.write({PASS_OUT!r})")
    argv = ["run", "gemmini", str(DATA / "mm_16x16x16.yaml"), "--scheduler", "gemmini-default", "--sim",
            "chipyard", "--style", "loops", "--simulator", sim, "--json"]
    assert cli_main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["cycles"] == 1234 and doc["cycles_source"].startswith("rdcycle")
    assert doc["model_cycles"] > 0 and doc["model_cycles"] != 1234 and doc["verified"]


# --- the programs ---------------------------------------------------------------------------------------
def _program(wl, scheduler="cosa"):
    arch = DEFAULT_CONFIG.arch("ws")
    mapping = schedule(wl, arch, scheduler=scheduler, time_limit_s=10, bound=False).mapping
    return codegen.generate(wl, mapping, arch, dataflow="ws", scale="auto")


MM16 = workloads.matmul("mm16", M=16, N=16, K=16)


def test_timed_source_times_the_layer_call():
    from gemmini.codegen.c import emit_c

    src = timed_source(emit_c(_program(MM16, "gemmini-default"), with_main=True))
    main = src[src.index("int main(void)"):]
    t0, call, fence, t1 = (main.index(s) for s in ("gemmini_t0 = gemmini_rdcycle()", "mm16(mm16_test_input",
                                                    'volatile("fence"', "gemmini_t1 = gemmini_rdcycle()"))
    assert t0 < call < fence < t1 < main.index("gemmini cycles: %lu") < main.index("mismatches = 0")
    assert parse_cycles("gemmini cycles: 7 (core cycle 9 at the end)") == (7, 9)
    assert parse_cycles("no cycles here") == (None, None)


def test_vendor_c_embeds_the_stream_and_a_check():
    prog = from_workload(MM16, bias=True, relu=True, scale=0.01)
    src = timed_source(vendor_c(prog))
    assert "gemmini_cosa_loop_ws" in src and "mm16_expected" in src and "gemmini cycles" in src
    # addresses are the embedded arrays', not the recorder's arena
    assert "GEMMINI_COSA_PTR(mm16_test_A)" in src and "GEMMINI_COSA_PTR(mm16_test_C)" in src


def test_vendor_c_encodes_the_conv_loop_words_for_the_hardware(monkeypatch):
    from gemmini import isa_loops as L
    from gemmini.chipyard import LAYOUT_ENV, vendor_stream

    prog = from_workload(workloads.conv2d("c3", C=16, K=16, H=8, W=8, R=3, S=3, padding=1), scale=0.01)
    old, new = vendor_stream(prog, layout="f13847e"), vendor_stream(prog)
    assert [c[0] for c in old] == [c[0] for c in new] and old != new
    cfg1 = next(c for c in old if c[0] == L.LOOP_CONV_WS_CONFIG_1)
    assert L.decode_word(*cfg1, layout="f13847e")["in_col_dim"] == 8
    assert "Gemmini f13847e decodes" in vendor_c(prog, layout="f13847e")
    monkeypatch.delenv(LAYOUT_ENV, raising=False)
    assert loop_conv_layout() == "f13847e"  # Chipyard 1.10.0's Gemmini
    monkeypatch.setenv(LAYOUT_ENV, "180c468")
    assert loop_conv_layout() == "180c468"
    monkeypatch.setenv(LAYOUT_ENV, "newest")
    with pytest.raises(SimulationError) as err:
        loop_conv_layout()
    assert err.value.field == LAYOUT_ENV and "180c468" in str(err.value)


# --- gemmini_params.h ------------------------------------------------------------------------------------
def test_read_params_of_the_soc():
    params = read_params(DATA / "custom_gemmini_soc_params.h")
    assert params.config == DEFAULT_CONFIG and (params.elem_t, params.acc_t) == ("int8_t", "int32_t")
    assert params.config.sp_rows == 4 * 4096 and params.config.acc_rows == 1024 and params.loop_conv
    assert read_params(DATA / "custom_gemmini_soc_params.h", acc_banks=1).config.acc_banks == 1


def test_read_params_other_sizes(tmp_path):
    f = tmp_path / "gemmini_params.h"
    f.write_text("#define DIM 8\n#define BANK_NUM 2\n#define BANK_ROWS 2048 // rows\n#define ACC_ROWS (512)\n"
                 "#define ROUND(x, s) ((x) >> (s))\ntypedef int8_t elem_t;\ntypedef int32_t acc_t;\n")
    cfg = read_params(f).config
    assert (cfg.dim, cfg.sp_banks, cfg.sp_kib, cfg.acc_kib) == (8, 2, 32, 16)


@pytest.mark.parametrize("text, field", [
    ("#define BANK_NUM 4\n#define BANK_ROWS 4096\n#define ACC_ROWS 1024\ntypedef int8_t elem_t;\ntypedef int32_t acc_t;\n",
     "DIM"),
    ("#define DIM sixteen\n#define BANK_NUM 4\n#define BANK_ROWS 4096\n#define ACC_ROWS 1024\n", "DIM"),
    ("#define DIM 16\n#define BANK_NUM 4\n#define BANK_ROWS 4096\n#define ACC_ROWS 1024\ntypedef float elem_t;\n"
     "typedef float acc_t;\n", "input_bits"),
    ("#define DIM 16\n#define BANK_NUM 4\n#define BANK_ROWS 4096\n#define ACC_ROWS 1024\ntypedef int8_t elem_t;\n",
     "acc_t"),
])
def test_read_params_bad_input(tmp_path, text, field):
    f = tmp_path / "gemmini_params.h"
    f.write_text(text)
    with pytest.raises(ParamsError) as err:
        read_params(f)
    assert err.value.field == field and str(f) in str(err.value) and err.value.exit_code == 2


# --- live: the real RTL ---------------------------------------------------------------------------------
LAYERS = {
    "matmul 64^3": workloads.matmul("mm64", M=64, N=64, K=64),
    "matmul 37x21x45 (ragged)": workloads.matmul("mm_ragged", M=37, N=21, K=45),
    "conv 3x3 16->16 8x8": workloads.conv2d("c3", C=16, K=16, H=8, W=8, R=3, S=3, padding=1),
    "conv 3x3 stride 2": workloads.conv2d("c3s2", C=16, K=16, H=10, W=10, R=3, S=3, stride=2, padding=1),
    "conv 1x1 32->32": workloads.conv2d("c1", C=32, K=32, H=8, W=8, R=1, S=1),
    "depthwise 3x3 16 ch": workloads.depthwise_conv2d("dw", C=16, H=8, W=8, R=3, S=3, padding=1),
}
live = pytest.mark.skipif(not SIM, reason="CHIPYARD_SIM (a Chipyard Verilator simulator of Rocket + Gemmini) not set")


@live
@pytest.mark.parametrize("scheduler", ["cosa", "vendor"])
@pytest.mark.parametrize("label", list(LAYERS))
def test_live_layer_passes_on_the_real_rtl(tmp_path, label, scheduler):
    wl = LAYERS[label]
    program = _program(wl)
    if scheduler == "cosa":
        elf = build_elf(program, tmp_path / f"{wl.name}.elf")
    else:
        vendor = from_workload(wl, bias=program.bias, relu=program.relu, scale=program.scale)
        elf = vendor_elf(vendor, tmp_path / f"{wl.name}_vendor.elf", layout=loop_conv_layout())
    run = run_chipyard(elf, max_cycles=2_000_000, timeout_s=1800)
    assert run.verified, f"{label} {scheduler}: {run.check} (exit {run.exit_code}); log {run.log}"
    assert run.cycles and run.cycles >= program.config.ideal_cycles(wl.macs)


LOOP_CONV = {  # the library's tiled_conv path (one LOOP_CONV_WS each), in the simulator's layout
    "1x1 through tiled_conv_auto": lambda C: C.conv("c1_conv", 1, 8, 8, 32, 32, 1, scale=0.005, conv_call=True),
    "1x1 stride 2 (downsample flag)": lambda C: C.conv("c1s2", 1, 8, 8, 32, 48, 1, stride=2, scale=0.005),
}


@live
@pytest.mark.parametrize("label", list(LOOP_CONV))
def test_live_vendor_conv_loop_passes_on_the_real_rtl(tmp_path, label):
    from gemmini.vendor import calls

    prog = LOOP_CONV[label](calls)
    elf = vendor_elf(prog, tmp_path / f"{prog.name}.elf", layout=loop_conv_layout())
    assert "gemmini_cosa_loop_conv_ws_start" in elf.with_suffix(".c").read_text()
    run = run_chipyard(elf, max_cycles=1_000_000, timeout_s=1200)
    assert run.verified, f"{label}: {run.check} (exit {run.exit_code}); log {run.log}"
