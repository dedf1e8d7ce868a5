"""Record the command stream of the real gemmini.h for a ``VendorProgram``.

``record(program, checkout)`` compiles ``recorder/record.c`` with the host C
compiler against a user's checkout of ucb-bar/gemmini-rocc-tests (its
``include/gemmini.h``, ``include/gemmini_nn.h`` and ``gemmini_params.h``),
with our ``recorder/shim`` first on the include path so that the library's
RoCC macros call a recording function and its fences are recorded as the
FENCE pseudo-command (funct 128).  The program's buffers are placed in an
arena mapped at ``program.base`` (MAP_FIXED_NOREPLACE), so the recorded
addresses are the ones ``gemmini.vendor.stream`` computes.

Command line (writes the committed test data)::

    python -m gemmini.vendor.record --checkout PATH [--out FILE] [--cc CC] [--cases all|square-conv]
        [--commit SHA]

records every case of ``cases()`` (or ``square_conv_cases()``) and writes one JSON document:
``{"gemmini_rocc_tests_commit": ..., "cases": [{"program": ..., "stream": [[f, rs1, rs2], ...]}]}``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from ..errors import SimulationError
from .calls import SIGNATURES, VendorProgram

HERE = Path(__file__).resolve().parent
RECORDER_C = HERE / "recorder" / "record.c"
SHIM_DIR = HERE / "recorder" / "shim"


class RecorderError(SimulationError):
    """The recorder could not be built or run (exit 1: a failed run)."""


def checkout_commit(checkout: str | os.PathLike) -> str:
    """The checkout's HEAD commit ("unknown" when it is not a git work tree)."""
    try:
        out = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True,
                             check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def build(checkout: str | os.PathLike, cc: str | None = None, cache_dir: str | os.PathLike | None = None) -> Path:
    """Compile the recorder against ``checkout``; returns the executable (cached by source hash)."""
    checkout = Path(checkout)
    header = checkout / "include" / "gemmini.h"
    if not header.is_file():
        raise RecorderError(f"no include/gemmini.h under {checkout}", source="recorder", field="checkout")
    cc = cc or os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise RecorderError("no host C compiler (looked for $CC, cc, gcc)", source="recorder", field="cc")
    digest = hashlib.sha256()
    for path in [RECORDER_C, SHIM_DIR / "rocc-software" / "src" / "xcustom.h"] + sorted(
            (checkout / "include").glob("*.h")):
        digest.update(path.read_bytes())
    digest.update(cc.encode())
    cache = Path(cache_dir or Path(tempfile.gettempdir()) / "cosa-gemmini-recorder")
    cache.mkdir(parents=True, exist_ok=True)
    exe = cache / f"record-{digest.hexdigest()[:16]}"
    if exe.exists():
        return exe
    tmp = exe.with_suffix(f".{os.getpid()}.tmp")
    cmd = [cc, "-std=gnu11", "-O1", "-w", "-fPIE", "-pie", f"-I{SHIM_DIR}", f"-I{checkout}", str(RECORDER_C),
           "-o", str(tmp), "-lm"]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise RecorderError(f"compiling the recorder failed: {done.stderr.strip()[-2000:]}", source="recorder",
                            field="cc")
    os.replace(tmp, exe)
    return exe


def _fmt(kind: str, value) -> str:
    if kind == "p":
        if value is None:
            return "0"
        return f"{value.buffer}+{int(value.offset)}"
    if kind == "f":
        return repr(float(value))
    return str(int(value))


def script(program: VendorProgram) -> str:
    """The recorder's input for ``program`` (arena, buffers, calls)."""
    lines = [f"arena {program.base:#x} {max(program.arena_bytes, 1)}"]
    lines += [f"buffer {b.name} {b.offset}" for b in program.buffers]
    for call in program.calls:
        kinds = dict(SIGNATURES[call.fn])
        lines.append("call " + call.fn + " " + " ".join(_fmt(kinds[n], v) for n, v in call.args))
    return "\n".join(lines) + "\n"


def record(program: VendorProgram, checkout: str | os.PathLike, cc: str | None = None) -> list:
    """The ``(funct, rs1, rs2)`` triples the checkout's gemmini.h issues for ``program``."""
    exe = build(checkout, cc)
    done = subprocess.run([str(exe)], input=script(program), capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        msg = (done.stderr.strip() or done.stdout.strip())[-500:]
        raise RecorderError(f"the library refused or the recorder failed (exit {done.returncode}): {msg}",
                            source=f"recorder program {program.name}")
    return [tuple(int(x) for x in cmd) for cmd in json.loads(done.stdout)["stream"]]


def cases() -> list:
    """The layer shapes whose recorded streams are committed as test data (batch 1 unless noted)."""
    from . import calls as C

    return [
        # ResNet-50 (resnet50.c's calls)
        C.conv("resnet50_conv1_pool", 1, 224, 224, 3, 64, 7, stride=2, padding=3, relu=True, scale=0.05,
               pool=(3, 2, 1)),
        C.conv("resnet50_conv1", 1, 224, 224, 3, 64, 7, stride=2, padding=3, relu=True, scale=0.05),
        C.conv("resnet50_res2a_branch2b", 1, 56, 56, 64, 64, 3, padding=1, relu=True, scale=0.02),
        C.conv("resnet50_res2a_branch2a", 1, 56, 56, 64, 64, 1, relu=True, scale=0.02),
        C.conv("resnet50_res3a_branch2a", 1, 56, 56, 256, 128, 1, relu=True, scale=0.02),
        C.conv("resnet50_res4a_branch1_downsample", 1, 28, 28, 512, 1024, 1, stride=2, scale=0.02,
               downsample_call=True),
        C.conv("resnet50_res5a_branch1", 1, 14, 14, 1024, 2048, 1, stride=2, scale=0.02),
        C.conv("resnet50_res5a_branch2b", 1, 7, 7, 512, 512, 3, padding=1, relu=True, scale=0.02),
        C.conv("resnet50_res4a_branch2b_s2", 1, 28, 28, 256, 256, 3, stride=2, padding=1, relu=True, scale=0.02),
        C.fc("resnet50_fc", 1, 2048, 1000, scale=0.05),
        # MobileNet-V2 (mobilenet.c's calls)
        C.depthwise("mobilenet_dw_s1", 1, 56, 56, 24, 3, padding=1, relu=True, scale=0.1),
        C.depthwise("mobilenet_dw_s2", 1, 28, 28, 32, 3, stride=2, padding=1, relu=True, scale=0.1),
        C.conv("mobilenet_pw_expand", 1, 28, 28, 32, 192, 1, relu=True, scale=0.02),
        C.conv("mobilenet_pw_project", 1, 14, 14, 384, 64, 1, scale=0.02),
        # BERT-base GEMMs (seq 128)
        C.gemm("bert_qkv", 128, 768, 768, scale=0.01),
        C.gemm("bert_ffn1", 128, 3072, 768, relu=True, scale=0.01),
        C.gemm("bert_ffn2", 128, 768, 3072, scale=0.01),
        # odd and ragged sizes, both dataflows, with and without bias / ReLU
        C.gemm("mm_100x70x33_ws", 100, 70, 33, relu=True, scale=0.5),
        C.gemm("mm_100x70x33_ws_nobias", 100, 70, 33, bias=False, scale=0.5),
        C.gemm("mm_100x70x33_os", 100, 70, 33, dataflow="os", relu=True, scale=0.5),
        C.gemm("mm_50x40x20_os_nobias", 50, 40, 20, dataflow="os", bias=False, scale=0.25),
        C.gemm("mm_300x500x700_ws", 300, 500, 700, scale=0.01),
        C.conv("conv_23x23_c40_k3", 1, 23, 23, 40, 40, 3, padding=1, relu=True, scale=0.05),
        C.conv("conv_23x23_c40_k3_s2_nobias", 1, 23, 23, 40, 56, 3, stride=2, padding=1, bias=False, scale=0.05),
        C.conv("conv_1x1_s2_odd_image", 1, 15, 15, 24, 40, 1, stride=2, scale=0.05),
        C.conv("conv_5x5_dil2_b2", 2, 20, 20, 8, 24, 5, padding=4, dilation=2, relu=True, scale=0.05),
        C.depthwise("dw_5x5_c20_ragged", 1, 21, 19, 20, 5, stride=2, padding=2, scale=0.1),
        C.grouped("grouped_g4_c32_k64", 1, 12, 12, 32, 64, 3, 4, padding=1, relu=True, scale=0.05),
    ]


def square_conv_cases() -> list:
    """Small square-image convolutions (LOOP_CONV_WS), whose streams from gemmini-rocc-tests ab748c5 (the
    header Gemmini f13847e pins: ``loop_conv_layout`` "f13847e") are committed as test data."""
    from . import calls as C

    return [
        C.conv("sq_conv_3x3", 1, 8, 8, 16, 16, 3, padding=1, relu=True, scale=0.1),
        C.conv("sq_conv_3x3_s2", 1, 10, 10, 16, 16, 3, stride=2, padding=1, scale=0.1),
        C.conv("sq_conv_1x1_s2_downsample", 1, 8, 8, 32, 48, 1, stride=2, scale=0.1),
        C.conv("sq_conv_3x3_maxpool", 1, 12, 12, 16, 16, 3, padding=1, relu=True, scale=0.1, pool=(3, 2, 1)),
        C.conv("sq_conv_7x7_s2_first_layer", 1, 20, 20, 3, 16, 7, stride=2, padding=3, relu=True, scale=0.1),
        C.conv("sq_conv_28x28_c64_tiled", 1, 28, 28, 64, 64, 3, padding=1, scale=0.1),
        C.depthwise("sq_dw_3x3_s2", 1, 10, 10, 20, 3, stride=2, padding=1, relu=True, scale=0.1),
    ]


CASE_SETS = {"all": cases, "square-conv": square_conv_cases}


def dumps(doc: dict) -> str:
    """The test-data JSON: one case per line (program, then stream), compact within a line."""
    head = {k: v for k, v in doc.items() if k != "cases"}
    lines = [json.dumps(c, separators=(",", ":")) for c in doc["cases"]]
    return (json.dumps(head)[:-1] + ', "cases": [\n' + ",\n".join(lines) + "\n]}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkout", default=os.environ.get("GEMMINI_ROCC_TESTS"),
                    help="a gemmini-rocc-tests checkout (default: $GEMMINI_ROCC_TESTS)")
    ap.add_argument("--out", default="-", help="output JSON file (default: stdout)")
    ap.add_argument("--cc", default=None, help="host C compiler (default: $CC, cc, gcc)")
    ap.add_argument("--cases", choices=sorted(CASE_SETS), default="all", help="which layer shapes (default: all)")
    ap.add_argument("--commit", default=None, help="the checkout's commit, for a checkout that is not a git work tree")
    ns = ap.parse_args(argv)
    if not ns.checkout:
        print("record: give --checkout or set GEMMINI_ROCC_TESTS", file=sys.stderr)
        return 2
    doc = {"gemmini_rocc_tests_commit": ns.commit or checkout_commit(ns.checkout), "cases": []}
    for program in CASE_SETS[ns.cases]():
        doc["cases"].append({"program": program.to_dict(), "stream": [list(c) for c in record(program, ns.checkout,
                                                                                            ns.cc)]})
    text = dumps(doc)
    if ns.out == "-":
        sys.stdout.write(text)
    else:
        Path(ns.out).parent.mkdir(parents=True, exist_ok=True)
        Path(ns.out).write_text(text)
        print(f"{len(doc['cases'])} streams, {sum(len(c['stream']) for c in doc['cases'])} commands -> {ns.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
