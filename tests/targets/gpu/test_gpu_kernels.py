"""Every kernel emitted here runs on OpenCL (PoCL on the CPU) and matches NumPy; its CUDA twin compiles with nvcc.

Mappings: seeded random valid mappings on a small gpu arch (cosa.baselines
sampler) and, for a GEMM and a convolution, the MIP's.  Tolerance: the
targets' shared ``targets.cpu.reference.TOLERANCE`` (1e-5 x max(1, max
|reference|) for fp32, exact for integers).
"""

import dataclasses
import itertools
import random
import zlib

import pytest

import cosa
import costmodel
import workloads as W
from cosa.baselines.mapspace import random_mapping
from mappings.validate import group_dims
from targets.gpu import build_kernel, print_kernel, run_many
from targets.gpu.cuda import compile_cuda
from targets.gpu.kernel import kernel_name
from targets.gpu.layout import tile_layout
from workloads.dtypes import apply_dtype

ARCH = costmodel.preset("gpu", sms=8, lanes_per_sm=32, shared_kib=8, register_words=32)


def _typed(nest, dtype):
    return apply_dtype(nest, dtype, False, "test", "dtype")


CASES = {
    "gemm": W.matmul("gemm", M=16, N=12, K=10, bits=32),
    "bmm": W.matmul("bmm", M=8, N=6, K=6, batch=2, bits=32),
    "conv_stride_pad": W.conv2d("conv_stride_pad", C=4, K=6, H=9, W=9, R=3, S=3, stride=2, padding=1, bits=32),
    "conv_dilation": W.conv2d("conv_dilation", C=3, K=4, H=10, W=10, R=3, S=3, dilation=2, padding=2, bits=32),
    "conv_groups": W.conv2d("conv_groups", C=8, K=4, H=6, W=6, R=3, S=3, groups=2, padding=1, bits=32),
    "depthwise": W.depthwise_conv2d("depthwise", C=6, H=8, W=8, R=3, S=3, padding=1, stride=2, bits=32),
    "mttkrp": W.einsum("ijk,jr,kr->ir", {"i": 6, "j": 4, "k": 5, "r": 4}, name="mttkrp", bits=32),
    "einsum": W.einsum("abc,cd->abd", {"a": 3, "b": 4, "c": 6, "d": 5}, name="einsum", bits=32),
    "gemm_fp64": W.matmul("gemm_fp64", M=12, N=8, K=9, bits=64),
    "conv_int8": _typed(W.conv2d("conv_int8", C=4, K=4, H=7, W=7, R=3, S=3, padding=1),
                        {"input": "int8", "weight": "int8", "output": "int32"}),
}
RANDOM_MAPPINGS = 5
MIP = ("gemm", "conv_stride_pad")


@pytest.fixture(scope="module")
def mappings():
    out = {}
    for name, nest in CASES.items():
        rng = random.Random(zlib.crc32(name.encode()))
        maps = [random_mapping(nest, ARCH, rng) for _ in range(RANDOM_MAPPINGS)]
        if name in MIP:
            maps.append(cosa.schedule(nest, ARCH, time_limit_s=20, bound=False).mapping)
        out[name] = maps
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_opencl_runs_and_matches_numpy(name, mappings):
    runs = run_many(CASES[name], ARCH, mappings[name], "opencl", optimize=False)
    assert len(runs) == len(mappings[name])
    for k, r in enumerate(runs):
        assert r.verified, f"{name} mapping {k}: max |err| {r.max_abs_err}"
        if name == "conv_int8":
            assert r.max_abs_err == 0


def test_optimised_opencl_build_matches_numpy(mappings):
    runs = run_many(CASES["conv_groups"], ARCH, mappings["conv_groups"][:2], "opencl", repeat=2)
    assert all(r.verified for r in runs)
    assert all(len(r.runs) == 2 and r.seconds > 0 and r.gflops > 0 for r in runs)


def test_every_cuda_kernel_compiles_with_nvcc(mappings):
    sources = []
    for name, nest in CASES.items():
        for k, m in enumerate(mappings[name]):
            desc = build_kernel(nest, ARCH, m)
            sources.append(print_kernel(dataclasses.replace(desc, name=f"{kernel_name(nest)}_{k}"), "cuda"))
    source = "\n".join(sources)
    ptx = compile_cuda(source, "ptx").read_text()
    for nest in CASES.values():
        assert f".entry {kernel_name(nest)}_0(" in ptx
    assert compile_cuda(sources[0], "cubin", "sm_90").stat().st_size > 0


def test_random_mappings_cover_every_tile_layout(mappings):
    """The sampled mappings exercise strided gaps, group blocks and whole-axis tiles (padding guards)."""
    kinds = set()
    for name, nest in CASES.items():
        for m in mappings[name]:
            for level in (2, 3):
                extents = m.tile_extents(level, nest.dims)
                for t in nest.tensors:
                    for a in tile_layout(t, extents, group_dims(nest), nest.dims).axes:
                        if a.whole:
                            kinds.add("whole")
                        elif any(e > 1 for _, _, e in a.groups):
                            kinds.add("groups")
                        elif a.step > 1:
                            kinds.add("step")
            desc = build_kernel(nest, ARCH, m)
            kinds.add("atomic" if desc.atomic else "owned")
            kinds.add("ranks" if desc.ranks > 1 else "one rank")
    assert kinds == {"whole", "groups", "step", "atomic", "owned", "ranks", "one rank"}


def _bypassing(mapping, level, names):
    levels = list(mapping.levels)
    lm = levels[level]
    levels[level] = dataclasses.replace(lm, bypass=frozenset(names))
    return dataclasses.replace(mapping, levels=tuple(levels))


@pytest.mark.parametrize("name", ["conv_stride_pad", "mttkrp"])
def test_bypassed_levels_read_and_write_the_next_holder(name, mappings):
    """Tensors the mapping keeps out of shared memory or registers are read from the next outer holder in the
    MAC (global memory with padding guards, or the shared tile) and the output goes straight to global memory."""
    nest = CASES[name]
    inputs = [t.name for t in nest.inputs]

    def takes_turns(m):   # threads that share an output element add to global memory in turn
        d = build_kernel(nest, ARCH, _bypassing(m, 2, [nest.output.name, inputs[0]]))
        return d.ranks > 1 and not d.atomic
    rng = random.Random(zlib.crc32(b"turns" + name.encode()))
    pool = itertools.chain(mappings[name], (random_mapping(nest, ARCH, rng) for _ in range(200)))
    turns = next((m for m in pool if takes_turns(m)), None)
    assert turns is not None, "no mapping among 200 draws has a reduction dim on the threads alone"
    variants = []
    for k, m in enumerate([turns] + mappings[name][:3]):
        if k % 2 == 0:
            m = _bypassing(m, 2, [nest.output.name, inputs[0]])   # output and one input skip shared memory
        else:
            m = _bypassing(m, 3, inputs)                            # inputs skip registers
        variants.append(m)
    runs = run_many(nest, ARCH, variants, "opencl", optimize=False)
    assert all(r.verified for r in runs), [r.max_abs_err for r in runs]
    descs = [build_kernel(nest, ARCH, m) for m in variants]
    compile_cuda("\n".join(print_kernel(dataclasses.replace(d, name=f"bypass_{k}"), "cuda")
                           for k, d in enumerate(descs)), "ptx")
    assert any(d.ranks > 1 and not d.atomic for d in descs[::2])  # threads take turns on global memory


def test_register_tile_of_a_padded_window():
    """Registers keep a whole padded input plane (the tile is wider than the tensor, so it keeps the whole axis
    and skips the padding when it is filled): the case a ResNet-50 3x3 layer's MIP mapping takes."""
    from mappings import LevelMapping, Mapping

    nest = W.conv2d("conv_window", C=2, K=2, H=3, W=3, R=3, S=3, padding=1, bits=32)
    levels = (LevelMapping(), LevelMapping(spatial={"K": 2}), LevelMapping(spatial={"C": 2}),
              LevelMapping(temporal={"P": 3, "Q": 3, "R": 3, "S": 3}))
    mapping = Mapping(levels)
    extents = mapping.tile_extents(3, nest.dims)
    assert all(a.whole for a in tile_layout(nest.tensor("Inputs"), extents, group_dims(nest), nest.dims).axes[2:])
    bypass = dataclasses.replace(mapping, levels=levels[:2] + (LevelMapping(spatial={"C": 2}, bypass={"Inputs"}),)
                                 + levels[3:])
    runs = run_many(nest, ARCH, [mapping, bypass], "opencl", optimize=False)
    assert all(r.verified for r in runs), [r.max_abs_err for r in runs]
    compile_cuda(print_kernel(build_kernel(nest, ARCH, mapping), "cuda"), "ptx")


@pytest.mark.parametrize("spec,bounds", [("i,i->", {"i": 12}), ("ii->i", {"i": 6}), ("i,j->ij", {"i": 4, "j": 5})],
                         ids=["dot", "diagonal", "outer"])
def test_einsum_edge_cases(spec, bounds):
    """A scalar output, a dim used twice by one tensor, no reduction dim."""
    nest = W.einsum(spec, bounds, name="edge", bits=32)
    rng = random.Random(2)
    maps = [random_mapping(nest, ARCH, rng) for _ in range(2)]
    runs = run_many(nest, ARCH, maps, "opencl", optimize=False)
    assert all(r.verified for r in runs), [r.max_abs_err for r in runs]
    compile_cuda("\n".join(print_kernel(dataclasses.replace(build_kernel(nest, ARCH, m), name=f"edge_{k}"), "cuda")
                           for k, m in enumerate(maps)), "ptx")


@pytest.mark.parametrize("nest", [
    W.conv2d("h200_conv", C=8, K=16, H=8, W=8, R=3, S=3, padding=1, bits=32),
    W.matmul("h200_gemm", M=64, N=32, K=48, bits=32),
], ids=["conv", "gemm"])
def test_mip_mapping_on_the_h200_preset(nest):
    arch = costmodel.preset("gpu-h200")
    mapping = cosa.schedule(nest, arch, time_limit_s=20, bound=False).mapping
    (run,) = run_many(nest, arch, [mapping], "opencl", optimize=False)
    assert run.verified, run.max_abs_err
    compile_cuda(print_kernel(build_kernel(nest, arch, mapping), "cuda"), "ptx")
