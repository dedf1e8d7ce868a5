"""Emit, build, run and verify a mapping as a CUDA or OpenCL kernel."""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field

from .errors import GpuError
from .kernel import KernelDesc, build_kernel, kernel_name
from .printers import print_kernel
from targets.cpu.reference import compare, random_inputs, reference
from targets.exceptions import UNCHECKED, check_mode, reads, scan

LANGUAGES = ("cuda", "opencl")


def _language(language: str) -> str:
    if language not in LANGUAGES:
        raise GpuError(f"unknown language '{language}'; choose one of {list(LANGUAGES)}", source="gpu target",
                       field="language")
    return language


def emit(workload, arch, mapping, language: str = "cuda") -> tuple[KernelDesc, str]:
    """(kernel description, source text) of ``mapping`` in ``language`` ("cuda" or "opencl")."""
    desc = build_kernel(workload, arch, mapping)
    return desc, print_kernel(desc, _language(language))


@dataclass(frozen=True)
class GpuRun:
    """A verified run.  seconds: median over ``runs`` launches (kernel only); gflops: 2 x MACs / seconds."""

    target: str
    device: str
    verified: bool
    max_abs_err: float
    seconds: float
    runs: list[float]
    gflops: float
    blocks: int
    threads: int
    shared_bytes: int
    mapping: dict = field(default_factory=dict)
    reference: str = "numpy"
    exception_status: dict = field(default_factory=lambda: UNCHECKED.to_dict())

    def to_dict(self) -> dict:
        return {"target": self.target, "device": self.device, "verified": self.verified,
                "max_abs_err": self.max_abs_err, "reference": self.reference, "seconds": self.seconds,
                "runs_s": self.runs, "gflops": self.gflops, "blocks": self.blocks, "threads": self.threads,
                "shared_bytes": self.shared_bytes, "mapping": self.mapping, "exception_status": self.exception_status}


def run(workload, arch, mapping, target: str = "opencl", repeat: int = 1, seed: int = 0,
        optimize: bool = True, exceptions: str = "ieee") -> GpuRun:
    """Build ``mapping`` as a ``target`` kernel, run it ``repeat`` times on random inputs and compare with the
    targets' shared NumPy reference (``targets.cpu.reference``: within 1e-5 x max(1, max |reference|) for fp32,
    exact for integers).  ``optimize=False``: OpenCL builds
    without optimisation (quicker to build on PoCL; for tests)."""
    return run_many(workload, arch, [mapping], target, repeat, seed, optimize, exceptions)[0]


def _backend(target: str):
    if target == "opencl":
        from . import opencl as backend
    else:
        from . import cuda as backend
    return backend


def _status(desc: KernelDesc, inputs: dict, out, alpha, beta, c, exceptions: str):
    """``targets.exceptions.scan`` of one call: the arguments it read, in kernel order, and its output."""
    names = [t.name for t in desc.workload.tensors]
    read_in, read_c = reads(alpha, beta)
    args, outs = [], []
    for k, (name, p) in enumerate(zip(names, desc.params)):
        if p.output:
            outs.append((k + 1, name, out))
            if read_c:
                args.append((k + 1, name, c))
        elif read_in:
            args.append((k + 1, name, inputs[name]))
    return scan(args, outs, exceptions)


def call(workload, arch, mapping, inputs: dict, target: str = "opencl", *, alpha: float = 1.0, beta: float = 0.0,
         c=None, exceptions: str = "ieee", optimize: bool = True):
    """(output, ExceptionStatus) of one launch of ``mapping``'s kernel on ``inputs`` (tensor name -> array):
    output := alpha * nest + beta * c under ``targets.exceptions``; CUDA needs a GPU here."""
    check_mode(exceptions)
    _language(target)
    desc = build_kernel(workload, arch, mapping)
    source = print_kernel(desc, target)
    if beta != 0 and c is None:
        raise GpuError("beta != 0 reads the output: pass c", source="gpu target", field="c")
    out, _ = _backend(target).run(desc, source, inputs, 1, optimize, alpha, beta, c)
    return out, _status(desc, inputs, out, alpha, beta, c, exceptions)


def run_many(workload, arch, mappings, target: str = "opencl", repeat: int = 1, seed: int = 0,
             optimize: bool = True, exceptions: str = "ieee") -> list[GpuRun]:
    """``run`` for several mappings of one workload: one program holds every kernel (one compiler call), all
    run on the same inputs; ``exceptions="check"`` scans each run's inputs and output."""
    from mappings import mapping_to_dict

    _language(target)
    check_mode(exceptions)
    descs = [dataclasses.replace(build_kernel(workload, arch, m), name=f"{kernel_name(workload)}_{k}")
             for k, m in enumerate(mappings)]
    source = "\n".join(print_kernel(d, target) for d in descs)
    if target == "opencl":
        from . import opencl as backend
    else:
        from . import cuda as backend
        backend.compile_cuda(source, "ptx")  # compile errors surface even where no GPU runs it
    if not descs:
        return []
    types = {t.name: p.dtype for t, p in zip(workload.tensors, descs[0].params)}
    shapes = {t.name: p.shape for t, p in zip(workload.tensors, descs[0].params)}
    inputs = random_inputs(workload, types, shapes, seed)
    ref = reference(workload, inputs, shapes, descs[0].acc_dtype)
    out = []
    for desc, mapping in zip(descs, mappings):
        result, seconds = backend.run(desc, source, inputs, repeat, optimize)
        verified, err = compare(result, ref, desc.acc_dtype)
        status = _status(desc, inputs, result, 1, 0, None, exceptions)
        median = statistics.median(seconds)
        out.append(GpuRun(target, backend.device_name(), verified, err, median, seconds,
                          2 * workload.macs / median / 1e9 if median > 0 else 0.0, desc.blocks, desc.threads,
                          desc.shared_bytes, mapping_to_dict(mapping, arch), exception_status=status.to_dict()))
    return out
