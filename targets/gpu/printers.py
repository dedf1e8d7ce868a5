"""Print a ``KernelDesc`` as CUDA C or as OpenCL C: the same statements, two dialects.

Only the kernel signature, the memory-space qualifiers, the thread and block
ids, the barrier and the atomic add differ; index and value expressions are
plain C, common to both.
"""

from __future__ import annotations

from .errors import GpuError
from .kernel import Barrier, Comment, If, KernelDesc, Let, Loop, Store

CUDA_STATIC_SHARED_BYTES = 48 * 1024
"""The most shared memory a CUDA kernel may declare statically (more needs dynamic shared memory)."""


class Dialect:
    name = ""
    types: dict[str, str] = {}
    shared = ""
    barrier = ""
    tid = ""
    bid = ""

    def prologue(self, desc: KernelDesc) -> list[str]:
        return []

    def signature(self, desc: KernelDesc) -> str:
        raise NotImplementedError

    def atomic_add(self, dtype: str, address: str, value: str) -> str:
        raise NotImplementedError

    def ab_signature(self, desc: KernelDesc, ctype: str) -> str:
        raise NotImplementedError

    gid = ""


class Cuda(Dialect):
    name = "cuda"
    types = {"float32": "float", "float64": "double", "int8": "signed char", "int32": "int"}
    shared = "__shared__ "
    barrier = "__syncthreads();"
    tid = "threadIdx.x"
    bid = "blockIdx.x"

    def signature(self, desc: KernelDesc) -> str:
        args = ", ".join(f"{'' if p.output else 'const '}{self.types[p.dtype]}* __restrict__ {p.name}"
                         for p in desc.params)
        return f'extern "C" __global__ void __launch_bounds__({desc.threads}) {desc.name}({args})'

    def atomic_add(self, dtype: str, address: str, value: str) -> str:
        return f"atomicAdd({address}, {value});"

    gid = "(int)(blockIdx.x * blockDim.x + threadIdx.x)"

    def ab_signature(self, desc: KernelDesc, ctype: str) -> str:
        return (f'extern "C" __global__ void {desc.name}_ab({ctype}* out, const {ctype}* c, {ctype} alpha, '
                f'{ctype} beta, int n)')


class OpenCL(Dialect):
    name = "opencl"
    types = {"float32": "float", "float64": "double", "int8": "char", "int32": "int"}
    shared = "__local "
    barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
    tid = "(int)get_local_id(0)"
    bid = "(int)get_group_id(0)"

    def prologue(self, desc: KernelDesc) -> list[str]:
        lines = []
        uses_double = any(p.dtype == "float64" for p in desc.params)
        if uses_double:
            lines.append("#pragma OPENCL EXTENSION cl_khr_fp64 : enable")
        if desc.atomic and desc.acc_dtype == "float32":
            lines += ["#ifndef COSA_ATOMIC_ADD_F32", "#define COSA_ATOMIC_ADD_F32",
                      "inline void atomic_add_f32(volatile __global float *p, float v) {",
                      "  union { unsigned int u; float f; } old, upd;",
                      "  do { old.f = *p; upd.f = old.f + v; }",
                      "  while (atomic_cmpxchg((volatile __global unsigned int *)p, old.u, upd.u) != old.u);",
                      "}", "#endif"]
        if desc.atomic and desc.acc_dtype == "float64":
            lines += ["#pragma OPENCL EXTENSION cl_khr_int64_base_atomics : enable",
                      "#ifndef COSA_ATOMIC_ADD_F64", "#define COSA_ATOMIC_ADD_F64",
                      "inline void atomic_add_f64(volatile __global double *p, double v) {",
                      "  union { unsigned long u; double f; } old, upd;",
                      "  do { old.f = *p; upd.f = old.f + v; }",
                      "  while (atom_cmpxchg((volatile __global unsigned long *)p, old.u, upd.u) != old.u);",
                      "}", "#endif"]
        return lines

    def signature(self, desc: KernelDesc) -> str:
        args = ", ".join(f"__global {'' if p.output else 'const '}{self.types[p.dtype]}* restrict {p.name}"
                         for p in desc.params)
        return f"__kernel __attribute__((reqd_work_group_size({desc.threads}, 1, 1))) void {desc.name}({args})"

    def atomic_add(self, dtype: str, address: str, value: str) -> str:
        if dtype == "int32":
            return f"atomic_add({address}, {value});"
        return f"atomic_add_{'f32' if dtype == 'float32' else 'f64'}({address}, {value});"

    gid = "(int)get_global_id(0)"

    def ab_signature(self, desc: KernelDesc, ctype: str) -> str:
        return (f"__kernel void {desc.name}_ab(__global {ctype}* out, __global const {ctype}* c, const {ctype} alpha, "
                f"const {ctype} beta, const int n)")


DIALECTS = {"cuda": Cuda(), "opencl": OpenCL()}


def _statements(stmts, dialect: Dialect, desc: KernelDesc, indent: int, out: list[str]) -> None:
    pad = "  " * indent
    for s in stmts:
        if isinstance(s, Loop):
            if s.unroll:
                out.append(f"{pad}#pragma unroll")
            if s.coop:
                out.append(f"{pad}for (int {s.var} = tid; {s.var} < {s.count}; {s.var} += {desc.threads}) {{")
            else:
                out.append(f"{pad}for (int {s.var} = 0; {s.var} < {s.count}; ++{s.var}) {{")
            _statements(s.body, dialect, desc, indent + 1, out)
            out.append(f"{pad}}}")
        elif isinstance(s, Let):
            out.append(f"{pad}const int {s.var} = {s.expr};")
        elif isinstance(s, Store):
            if s.op == "atomic+=":
                out.append(pad + dialect.atomic_add(desc.acc_dtype, f"&{s.array}[{s.index}]", s.value))
            else:
                out.append(f"{pad}{s.array}[{s.index}] {s.op} {s.value};")
        elif isinstance(s, If):
            out.append(f"{pad}if ({s.cond}) {{")
            _statements(s.body, dialect, desc, indent + 1, out)
            out.append(f"{pad}}}")
        elif isinstance(s, Barrier):
            out.append(pad + dialect.barrier)
        elif isinstance(s, Comment):
            out.append(f"{pad}// {s.text}")
        else:  # pragma: no cover - the builder makes only the statements above
            raise TypeError(f"unknown statement {s!r}")


def print_kernel(desc: KernelDesc, language: str) -> str:
    """Source text of ``desc`` in ``language`` ("cuda" or "opencl")."""
    dialect = DIALECTS[language]
    if language == "cuda" and desc.shared_bytes > CUDA_STATIC_SHARED_BYTES:
        raise GpuError(f"{desc.shared_bytes} B of shared memory per block exceed CUDA's {CUDA_STATIC_SHARED_BYTES} B "
                       "for static shared arrays; lower the arch's shared_kib", source=f"kernel {desc.name}",
                       field="shared")
    out = [f"// {desc.name}: generated by cosa-framework's gpu target ({dialect.name})"]
    out += [f"// {line}" for line in desc.notes]
    out += dialect.prologue(desc)
    out.append(dialect.signature(desc) + " {")
    for a in desc.arrays:
        space = dialect.shared if a.space == "shared" else ""
        out.append(f"  {space}{dialect.types[a.dtype]} {a.name}[{a.words}];")
    out.append(f"  const int tid = {dialect.tid};")
    out.append(f"  const int bid = {dialect.bid};")
    out.append("  (void)tid; (void)bid;")
    _statements(desc.body, dialect, desc, 1, out)
    out.append("}")
    out += ab_kernel(desc, dialect)
    return "\n".join(out) + "\n"


AB_BLOCK = 64
"""Threads per block (work-group) of the ``_ab`` epilogue kernel."""


def ab_kernel(desc: KernelDesc, dialect: Dialect) -> list[str]:
    """``<name>_ab(out, c, alpha, beta, n)``: out := alpha * out + beta * c on the ``n`` output words, after the
    main kernel wrote ``out`` (``targets.exceptions``: alpha = 0 ignores ``out`` (the host then runs no main
    kernel, so A and B are not read), beta = 0 does not read ``c``, both zero give exact zeros)."""
    ct = dialect.types[desc.acc_dtype]
    return [f"// {desc.name}_ab: out := alpha * out + beta * c (NaN/Inf rules: targets/exceptions.py)",
            dialect.ab_signature(desc, ct) + " {",
            f"  const int i = {dialect.gid};",
            "  if (i >= n) return;",
            f"  if (alpha == ({ct})0) out[i] = (beta == ({ct})0) ? ({ct})0 : beta * c[i];",
            "  else out[i] = (beta == (" + ct + ")0) ? alpha * out[i] : alpha * out[i] + beta * c[i];",
            "}"]
