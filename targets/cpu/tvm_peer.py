"""TVM as a peer on the CPU: MetaSchedule tunes the same loop nest, its best schedule is compiled and run on
the same inputs as our kernel, and checked against the same NumPy reference.

TVM (``apache-tvm`` on PyPI) is an optional extra (``pip install cosa-framework[tvm]``); ``require_tvm``
names it when TVM does not import.  The loop nest becomes a TE compute (``te_compute``): every output index
must be a plain loop dim, the other dims are reductions, an input whose indices reach outside its stored
shape (convolution padding) gets a zero-padded stage first, products are taken in the output's dtype.

Tuning (``tune``): ``meta_schedule.tune_tir`` for ``trials`` measured candidates (``num_trials_per_iter``
= min(64, trials)), seed ``seed``, in a temporary work directory (removed afterwards), for the target
``{"kind": "llvm", "mcpu": <this CPU as LLVM names it>, "num-cores": 1}``: one core, to stand beside our
single-thread kernel and OpenBLAS on one thread.  TVM's builder and runner workers run with
``TVM_NUM_THREADS=1``; this process's TVM thread pool is set to one thread before the kernel runs.  The
builder compiles each candidate with ``tvm.driver.build`` rather than MetaSchedule's default build, which
imports every tensor intrinsic in each fresh worker (about 15 s per worker and batch on a 2-core machine,
past TVM's 30 s build time-out) and drops the input layout rewrites of the schedule; here a rewrite runs
inside each call, in tuning and in the final kernel alike, as our kernel packs its tiles in each call.
``tuning_s``: wall seconds of ``tune_tir``, the compile of the best schedule not included.

Timing (``run_kernel``): one verified call, then ``repeat`` calls timed one by one with the wall clock
(``targets.cpu.result.time_call``, the timer ``cosa run cpu`` uses for our kernel); ``seconds`` is their
median.  The arrays are converted to TVM tensors once, outside the timed calls.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import statistics
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np

from .. import TargetError
from .plan import _dtypes, needs_guard, stored_shape
from .reference import compare, random_inputs, reference

EXTRA = "pip install cosa-framework[tvm]"
DEFAULT_TRIALS = 64
BUILD_TIMEOUT_S = 60.0
RUN_TIMEOUT_S = 60.0


def tvm_version() -> str | None:
    """The installed TVM's version, or None when it does not import."""
    try:
        import tvm
        from tvm.s_tir import meta_schedule  # noqa: F401
    except ImportError:
        return None
    return str(getattr(tvm, "__version__", "unknown"))


def require_tvm(source: str = "tvm") -> str:
    """TVM's version; TargetError (exit 2) naming the extra when TVM or its MetaSchedule does not import."""
    found = tvm_version()
    if found is None:
        raise TargetError(f"TVM is not installed: {EXTRA}", source=source, field="scheduler")
    return found


def host_target() -> dict:
    """TVM's target for this CPU on one core: LLVM's name of the host CPU as ``mcpu``."""
    from tvm.target import codegen

    return {"kind": "llvm", "mcpu": str(codegen.llvm_get_system_cpu()), "num-cores": 1}


def te_compute(workload):
    """``(placeholders, output)`` TE tensors of ``workload`` (inputs in tensor order, then the output)."""
    from tvm import te, tirx

    src = f"TVM compute of {workload.name}"
    dims = workload.dims
    dtypes = _dtypes(workload)
    out = workload.output
    out_dims = []
    for axis, expr in enumerate(out.indices):
        if len(expr.terms) != 1 or expr.terms[0][1] != 1 or expr.offset != 0 or expr.terms[0][0] in out_dims:
            raise TargetError(f"output index {expr} is not a plain loop dim, which a TE compute needs", source=src,
                              field=f"tensors.{out.name}.indices[{axis}]")
        out_dims.append(expr.terms[0][0])
    if tuple(stored_shape(out, dims)) != tuple(dims[d] for d in out_dims):
        raise TargetError(f"output shape {stored_shape(out, dims)} is not its dims' bounds", source=src,
                          field=f"tensors.{out.name}.shape")
    sparse = [t.name for t in workload.tensors if t.density < 1.0]
    if sparse:
        raise TargetError(f"sparse tensor(s) {sparse}: the TVM peer runs dense loop nests only", source=src,
                          field="tensors")
    reduce_dims = [d for d in dims if d not in out_dims]
    placeholders, sources = [], {}
    for t in workload.inputs:
        shape = stored_shape(t, dims)
        ph = te.placeholder(shape, dtypes[t.name], name=t.name)
        placeholders.append(ph)
        sources[t.name] = (_padded(te, tirx, ph, t, dims, shape), _pads(t, dims))
    acc = dtypes[out.name]

    def body(*index):
        env = dict(zip(out_dims, index))
        env.update(zip(reduce_dims, axes))
        term = None
        for t in workload.inputs:
            tensor, pads = sources[t.name]
            at = [_affine(e, env) + lo for e, (lo, _) in zip(t.indices, pads)]
            value = tensor[tuple(at)].astype(acc)
            term = value if term is None else term * value
        return te.sum(term, axis=axes) if axes else term

    axes = [te.reduce_axis((0, dims[d]), name=f"r{d}") for d in reduce_dims]
    output = te.compute(stored_shape(out, dims), body, name=out.name)
    return placeholders, output


def _pads(tensor, dims) -> list[tuple[int, int]]:
    """Zeros before and after each axis that the indices reach outside the stored shape."""
    shape = stored_shape(tensor, dims)
    pads = []
    for expr, size in zip(tensor.indices, shape):
        lo, hi = expr.value_range(dims)
        pads.append((max(0, -lo), max(0, hi - (size - 1))))
    return pads


def _padded(te, tirx, ph, tensor, dims, shape):
    """``ph`` itself, or a zero-padded stage when some index reaches outside ``shape``."""
    if not needs_guard(tensor, dims, shape):
        return ph
    pads = _pads(tensor, dims)
    padded_shape = [size + lo + hi for size, (lo, hi) in zip(shape, pads)]

    def pad(*index):
        inside = [tirx.all(i >= lo, i < lo + size) for i, size, (lo, hi) in zip(index, shape, pads) if lo or hi]
        at = tuple(i - lo for i, (lo, _) in zip(index, pads))
        return tirx.if_then_else(tirx.all(*inside), ph[at], tirx.const(0, ph.dtype))

    return te.compute(padded_shape, pad, name=f"{tensor.name}_pad")


def _affine(expr, env):
    value = expr.offset
    for d, c in expr.terms:
        value = env[d] * c + value
    return value


@dataclass
class TvmKernel:
    """TVM's best schedule of one workload, compiled for one core.  ``tuning_s``: wall seconds of the search;
    ``func``: the compiled module (called with TVM tensors in tensor order, the output last)."""

    workload: object
    target: dict
    trials: int
    seed: int
    tuning_s: float
    func: object = field(repr=False)
    dtypes: dict = field(default_factory=dict)
    shapes: dict = field(default_factory=dict)

    def bind(self, arrays: dict):
        """``(call, result)``: ``call()`` runs the kernel on TVM copies of ``arrays`` made once here,
        ``result()`` the output as a NumPy array."""
        import tvm

        dev = tvm.cpu()
        args = [tvm.runtime.tensor(np.ascontiguousarray(arrays[t.name]), dev) for t in self.workload.inputs]
        out = self.workload.output
        args.append(tvm.runtime.tensor(np.zeros(self.shapes[out.name], dtype=self.dtypes[out.name]), dev))
        return (lambda: self.func(*args)), (lambda: args[-1].numpy())


@contextlib.contextmanager
def _one_thread_env():
    """``TVM_NUM_THREADS=1`` for the worker processes TVM starts meanwhile (restored afterwards)."""
    before = os.environ.get("TVM_NUM_THREADS")
    os.environ["TVM_NUM_THREADS"] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("TVM_NUM_THREADS", None)
        else:
            os.environ["TVM_NUM_THREADS"] = before


def one_thread_pool() -> None:
    """This process's TVM thread pool: one thread."""
    import tvm

    config = tvm.get_global_func("runtime.config_threadpool", allow_missing=True)
    if config is not None:
        config(0, 1)  # mode 0 (big cores), one thread


def tune(workload, trials: int = DEFAULT_TRIALS, seed: int = 0, work_dir: str | None = None,
         quiet: bool = True) -> TvmKernel:
    """MetaSchedule's best schedule of ``workload`` after ``trials`` measured candidates, compiled.
    TargetError naming the layer when TVM fails or finds no valid schedule."""
    require_tvm(f"tvm on {workload.name}")
    if not isinstance(trials, int) or trials < 1:
        raise TargetError(f"trials must be a positive integer, got {trials!r}", source="tvm", field="--tvm-trials")
    placeholders, output = te_compute(workload)
    src = f"tvm on {workload.name}"
    try:
        return _tune(workload, placeholders, output, trials, seed, work_dir, quiet)
    except TargetError:
        raise
    except Exception as err:  # TVM raises many kinds (TVMError, ValueError, RuntimeError): one line each
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise TargetError(f"TVM failed: {type(err).__name__}: {first}", source=src, exit_code=1) from None


def _tune(workload, placeholders, output, trials, seed, work_dir, quiet) -> TvmKernel:
    import tvm
    import tvm.driver
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    target_dict = host_target()
    target = tvm.target.Target(target_dict)
    func = te.create_prim_func([*placeholders, output])
    mod = tvm.IRModule({"main": func})
    if quiet:
        logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    with contextlib.ExitStack() as stack:
        stack.enter_context(_one_thread_env())
        wd = work_dir or stack.enter_context(tempfile.TemporaryDirectory(prefix="cosa-tvm-"))
        if quiet:
            stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        builder = ms.builder.LocalBuilder(timeout_sec=BUILD_TIMEOUT_S, f_build=tvm.driver.build)
        runner = ms.runner.LocalRunner(timeout_sec=RUN_TIMEOUT_S)
        start = time.perf_counter()
        database = ms.tune_tir(mod, target, wd, max_trials_global=trials, num_trials_per_iter=min(64, trials),
                               builder=builder, runner=runner, seed=seed)
        tuning_s = time.perf_counter() - start
        sch = ms.tir_integration.compile_tir(database, mod, target)
        if sch is None:
            raise TargetError(f"TVM found no valid schedule in {trials} trials (every candidate failed to build "
                              "or run)", source=f"tvm on {workload.name}", exit_code=1)
        compiled = tvm.compile(sch.mod, target=target)
    dims = workload.dims
    return TvmKernel(workload, target_dict, trials, seed, tuning_s, compiled, _dtypes(workload),
                     {t.name: stored_shape(t, dims) for t in workload.tensors})


@dataclass(frozen=True)
class TvmRun:
    """TVM's kernel on one workload: ``seconds`` the median of the timed calls, ``gflops`` 2 * MACs over it
    (1e9 FLOP/s), ``tuning_s`` the search's wall seconds, ``verified``/``max_abs_err`` against NumPy."""

    verified: bool
    max_abs_err: float
    seconds: float
    gflops: float
    tuning_s: float
    trials: int
    seed: int
    target: dict
    times_s: list
    threads: int = 1

    def to_dict(self) -> dict:
        return {"verified": self.verified, "max_abs_err": self.max_abs_err, "seconds": self.seconds,
                "gflops": self.gflops, "tuning_s": self.tuning_s, "trials": self.trials, "seed": self.seed,
                "target": self.target, "times_s": self.times_s, "threads": self.threads}


def measure(workload, trials: int = DEFAULT_TRIALS, seed: int = 0, repeat: int = 5, input_seed: int = 0) -> TvmRun:
    """Tune (``tune``), then ``run_kernel``: the compiled best schedule on our kernel's inputs."""
    return run_kernel(tune(workload, trials=trials, seed=seed), repeat=repeat, input_seed=input_seed)


def run_kernel(kernel: TvmKernel, repeat: int = 5, input_seed: int = 0) -> TvmRun:
    """Run ``kernel`` on ``random_inputs(..., input_seed)`` (the arrays ``targets.cpu.run`` gives our kernel),
    verify against NumPy, time ``repeat`` calls on one thread."""
    from .result import time_call

    workload = kernel.workload
    arrays = random_inputs(workload, kernel.dtypes, kernel.shapes, input_seed)
    one_thread_pool()
    call, result = kernel.bind(arrays)
    try:
        call()
        out = result()
        times = time_call(call, repeat)
    except Exception as err:  # a failure inside TVM's runtime: one line
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise TargetError(f"TVM's kernel failed: {first}", source=f"tvm on {workload.name}", exit_code=1) from None
    out_dtype = kernel.dtypes[workload.output.name]
    ok, err = compare(out, reference(workload, arrays, kernel.shapes, out_dtype), out_dtype)
    seconds = statistics.median(times)
    return TvmRun(ok, err, seconds, 2 * workload.macs / seconds / 1e9, kernel.tuning_s, kernel.trials, kernel.seed,
                  kernel.target, times)
