"""Fuzzing the command line: seed files of every input kind, their mutations (text, bytes, ONNX fields,
and parsed documents with fields removed, of the wrong type, huge or tiny) and the in-process harness
that runs one ``cosa`` command with a time limit and checks its outcome (``tests/cosa/test_fuzz_*.py``)."""

from __future__ import annotations

import contextlib
import io
import json
import random
import re
import signal
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CASE_LIMIT_S = 30.0

# ------------------------------------------------------------------ seed files (text)
V03_CONV = """\
problem:
  shape:
    name: CNN-Layer
    dimensions: [ C, M, R, S, N, P, Q ]
    coefficients:
      - {name: Wstride, default: 1}
      - {name: Hstride, default: 1}
      - {name: Wdilation, default: 1}
      - {name: Hdilation, default: 1}
    data-spaces:
      - name: Weights
        projection: [ [[C]], [[M]], [[R]], [[S]] ]
      - name: Inputs
        projection:
          - [ [N] ]
          - [ [C] ]
          - [ [R, Wdilation], [P, Wstride] ]
          - [ [S, Hdilation], [Q, Hstride] ]
      - name: Outputs
        projection: [ [[N]], [[M]], [[Q]], [[P]] ]
        read-write: True
  instance: {C: 16, M: 32, R: 3, S: 3, N: 1, P: 8, Q: 8, Wstride: 2}
"""

V04_GEMM = """\
problem:
  version: 0.4
  shape:
    name: gemm
    dimensions: [ M, N, K ]
    data_spaces:
      - name: A
        projection: [ [[M]], [[K]] ]
      - name: B
        projection: [ [[K]], [[N]] ]
      - name: Z
        projection: [ [[M]], [[N]] ]
        read_write: True
  instance:
    M: 32
    N: 24
    K: 16
    densities:
      A: 0.5
      B: {density: 0.25}
"""

FLAT_CNN = """\
problem: {shape: cnn-layer, N: 1, C: 32, K: 64, P: 14, Q: 14, R: 3, S: 3,
          Wstride: 1, Hstride: 1, Wdilation: 1, Hdilation: 1}
"""

SHORT_MATMUL = "kind: matmul\nname: fc\nM: 64\nN: 32\nK: 48\nbits: {input: 8, weight: 8, output: 32}\n"
SHORT_EINSUM = "kind: einsum\nname: bmm\nspec: 'bik,bkj->bij'\nbounds: {b: 2, i: 16, j: 8, k: 24}\nbits: 8\n"
SHORT_LOOPNEST = """\
kind: loopnest
name: conv1d
dims: {K: 8, C: 4, P: 16, R: 3}
tensors:
  - {name: W, role: weight, indices: [K, C, R]}
  - {name: I, role: input, indices: [C, "P + R"]}
  - {name: O, role: output, indices: [K, P], bits: 32}
"""
SHORT_LIST = """\
source: a two-layer network
defaults: {bits: 8}
layers:
  - {kind: conv2d, name: a, C: 8, K: 16, H: 10, W: 10, R: 3, S: 3, padding: 1}
  - {kind: depthwise, name: b, C: 16, H: 10, W: 10, R: 3, S: 3, stride: 2}
"""

CONV3X3 = (ROOT / "examples" / "conv3x3.yaml").read_text()
SINGLE_LAYER = [CONV3X3, V03_CONV, V04_GEMM, FLAT_CNN, SHORT_MATMUL, SHORT_EINSUM, SHORT_LOOPNEST]
NETWORKS = [(ROOT / "workloads" / "zoo" / f"{n}.yaml").read_text() for n in ("resnet50", "mobilenet_v2", "bert_base_128")]
NETWORKS.append(SHORT_LIST)

COSA_V02_ARCH = """\
arch:
  arithmetic: {name: MAC, instances: 16, word-bits: 8}
  storage:
    - {name: Registers, entries: 4, instances: 16, word-bits: 8}
    - {name: GlobalBuffer, entries: 16384, instances: 1, word-bits: 8, read_bandwidth: 16, write_bandwidth: 16}
    - {name: DRAM, instances: 1, word-bits: 8}
"""

DIMS = ["N", "C", "K", "M", "P", "Q", "R", "S", "H", "W"]
BAD_NUMBERS = ["0", "-1", "-7", "1.5", "abc", "''", "null", "true", "1e999", "-.inf", ".nan", "[1, 2]", "{a: 1}",
               "1" + "0" * 40, "999999999999999999", "2147483647", "16777217", "65521", "65536", "0x10", "0o17", "1_000",
               "2020-01-01", "2020-13-45", "1:30", "~", "3" * 5000, "!!binary aGVsbG8=", "!!python/object:os.system x"]
_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w.])")
_KEY_LINE = re.compile(r"^(\s*-?\s*)([\w-]+)\s*:")


# ------------------------------------------------------------------ mutations of text
def _deep(depth: int, flow: str = "[") -> str:
    close = {"[": "]", "{a: ": "}"}[flow]
    return flow * depth + "1" + close * depth


def _bomb(levels: int = 9) -> str:
    lines = ['x0: &x0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"x{i}: &x{i} [" + ", ".join([f"*x{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def mutate(rng: random.Random, text: str, how: str) -> str | bytes:
    lines = text.splitlines(keepends=True)
    numbers = list(_NUMBER.finditer(text))
    if how == "truncate":
        return text[:rng.randrange(len(text))]
    if how == "number" and numbers:
        m = rng.choice(numbers)
        return text[:m.start()] + rng.choice(BAD_NUMBERS) + text[m.end():]
    if how == "duplicate_key":
        keyed = [i for i, line in enumerate(lines) if _KEY_LINE.match(line)]
        if keyed:
            i = rng.choice(keyed)
            copy = _KEY_LINE.sub(lambda m: " " * len(m.group(1)) + m.group(2) + ":", lines[i], count=1)
            return "".join(lines[:i + 1] + [copy] + lines[i + 1:])
    if how in ("unknown_dim", "swap_dims"):
        present = [d for d in DIMS if re.search(rf"\b{d}\b", text)]
        if how == "unknown_dim" and present:
            d = rng.choice(present)
            hits = list(re.finditer(rf"\b{d}\b", text))
            m = rng.choice(hits)
            return text[:m.start()] + rng.choice(["Z", "X9", "k", "N N", ""]) + text[m.end():]
        if how == "swap_dims" and len(present) >= 2:
            a, b = rng.sample(present, 2)
            return re.sub(rf"\b({a}|{b})\b", lambda m: b if m.group(1) == a else a, text)
    if how == "swap_values" and len(numbers) >= 2:
        m1, m2 = sorted(rng.sample(numbers, 2), key=lambda m: m.start())
        return text[:m1.start()] + m2.group() + text[m1.end():m2.start()] + m1.group() + text[m2.end():]
    if how == "tabs":
        indented = [i for i, line in enumerate(lines) if line.startswith(" ")]
        if indented and rng.random() < 0.7:
            i = rng.choice(indented)
            lines[i] = "\t" + lines[i].lstrip(" ")
            return "".join(lines)
        at = rng.randrange(len(text) + 1)
        return text[:at] + "\t" + text[at:]
    if how == "binary":
        data = text.encode()
        at = rng.randrange(len(data) + 1)
        junk = rng.choice([b"\x00", b"\xff\xfe", b"\x1b[31m", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))])
        return data[:at] + junk + data[at:] if rng.random() < 0.8 else junk * 10
    if how == "empty":
        return rng.choice(["", "\n", "   \n", "---\n", "...\n", "null\n", "[]\n", "{}\n", "# only a comment\n", "42\n",
                           "- a\n- b\n", "'text'\n", "--- 1\n--- 2\n", "problem:\n", "kind:\n", "levels:\n",
                           "mapping:\n", "arch:\n"])
    if how == "alias_bomb":
        choice = rng.randrange(4)
        if choice == 0:  # the bomb's value used where a number goes
            if numbers:
                m = rng.choice(numbers)
                return _bomb() + text[:m.start()] + "*x8" + text[m.end():]
        if choice == 1:
            return _bomb() + text
        if choice == 2:  # an alias inside its own anchor: a cyclic value
            if numbers:
                m = rng.choice(numbers)
                return text[:m.start()] + "&cyc [1, *cyc]" + text[m.end():]
        return "a: &a [*a]\n" + text
    if how == "deep_nesting" and numbers:
        m = rng.choice(numbers)
        depth = rng.choice([5000, 1000, 101, 99, 60])
        return text[:m.start()] + _deep(depth, rng.choice(["[", "{a: "])) + text[m.end():]
    if how == "lines" and len(lines) > 1:
        i, j = rng.randrange(len(lines)), rng.randrange(len(lines))
        op = rng.randrange(3)
        if op == 0:
            del lines[i]
        elif op == 1:
            lines.insert(j, lines[i])
        else:
            lines[i], lines[j] = lines[j], lines[i]
        return "".join(lines)
    if how == "chars":
        chars = list(text)
        for _ in range(rng.randrange(1, 6)):
            chars[rng.randrange(len(chars))] = rng.choice(":-[]{}&*!|>'\"#%@` ,\n")
        return "".join(chars)
    if how == "problem_wrapper":
        return "problem: " + _deep(5000) + "\n"
    return text[: len(text) // 2]  # the mutation found nothing to change: truncate instead


HUGE = [2**24, 2**24 + 1, 2**31, 2**40, 2**63, 10**30, 1e300, 4294967296]
TINY = [0, -1, -2**31, 1e-300, 0.001, 0.5, 1]
WRONG_TYPES = ["text", "", [1, 2], [], {"a": 1}, {}, True, None, 1.5, "8 KiB", ["x"]]
STRUCT_MUTATIONS = ["missing", "wrong_type", "huge", "tiny"]


def _paths(doc, path=()):
    """Every place in a parsed document that holds a value: (path, value), containers included."""
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield path + (k,), v
            yield from _paths(v, path + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield path + (i,), v
            yield from _paths(v, path + (i,))


def mutate_structure(rng: random.Random, text: str, how: str) -> str:
    """``text`` parsed, one field removed (``missing``), given a value of the wrong type, or a huge or tiny
    number (numbers preferred), and written back as YAML."""
    import yaml

    doc = yaml.safe_load(text)
    places = list(_paths(doc))
    if how in ("huge", "tiny"):
        numbers = [(p, v) for p, v in places if isinstance(v, (int, float)) and not isinstance(v, bool)]
        places = numbers or places
    if not places:
        return text[: len(text) // 2]
    path, _ = rng.choice(places)
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    last = path[-1]
    if how == "missing":
        del parent[last]
    else:
        parent[last] = rng.choice({"wrong_type": WRONG_TYPES, "huge": HUGE, "tiny": TINY}[how])
    return yaml.safe_dump(doc, sort_keys=False)


TEXT_MUTATIONS = ["truncate", "number", "duplicate_key", "unknown_dim", "swap_dims", "swap_values", "tabs", "binary",
                  "empty", "alias_bomb", "deep_nesting", "lines", "chars"]


# ------------------------------------------------------------------ ONNX models and byte mutations
def _onnx_models() -> list[bytes]:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def init(name, shape):
        return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)

    conv = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv", strides=[1, 1], pads=[1, 1, 1, 1],
                          kernel_shape=[3, 3])],
        "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=[init("w", (16, 8, 3, 3))])
    net = helper.make_graph(
        [helper.make_node("Conv", ["x", "w1"], ["y1"], name="stem", strides=[2, 2], pads=[1, 1, 1, 1]),
         helper.make_node("Flatten", ["y1"], ["f"], axis=1),
         helper.make_node("Gemm", ["f", "w2"], ["g"], name="fc", transB=1),
         helper.make_node("MatMul", ["q", "k"], ["s"], name="scores")],
        "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8]),
                helper.make_tensor_value_info("q", TensorProto.FLOAT, ["batch", 4, 5, 7]),
                helper.make_tensor_value_info("k", TensorProto.FLOAT, [2, 4, 7, 9])],
        [helper.make_tensor_value_info("g", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, None)],
        initializer=[init("w1", (4, 3, 3, 3)), init("w2", (10, 64))])
    return [helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
            for g in (conv, net)]


def _field_mutation(rng: random.Random, data: bytes, wide: bool = False) -> bytes:
    """A well-formed model with a wrong field: a dim, an attribute, an initializer or an input removed;
    ``wide``: also attributes of the wrong type, a node without outputs or op type, huge or tiny
    initializer dims and value-info shapes."""
    import onnx
    from onnx import helper

    model = onnx.load_from_string(data)
    graph = model.graph
    op = rng.randrange(9 if wide else 6)
    if op == 0:
        dims = [d for vi in graph.input for d in vi.type.tensor_type.shape.dim]
        d = rng.choice(dims)
        d.Clear()
        if rng.random() < 0.5:
            d.dim_value = rng.choice([0, -1, 1, 10**12, 2**62, 7])
        else:
            d.dim_param = rng.choice(["batch", "", "n"])
    elif op == 1:
        node = rng.choice(list(graph.node))
        name, value = rng.choice([("strides", [0, 0]), ("strides", [-1, 2]), ("pads", [-3, 0, 0, 0]),
                                  ("pads", [1, 1]), ("dilations", [0, 1]), ("group", 0), ("group", 3),
                                  ("kernel_shape", [5, 5]), ("kernel_shape", [0]), ("transB", 7),
                                  ("auto_pad", "SAME_UPPER"), ("auto_pad", "BOGUS"), ("axis", 9)])
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute(name, value)])
    elif op == 2 and len(graph.initializer):
        init = rng.choice(list(graph.initializer))
        if rng.random() < 0.5:
            graph.initializer.remove(init)
        else:
            del init.dims[:]
            init.dims.extend(rng.choice([[0], [3, 3], [2**40, 2], [-1, 4, 3, 3]]))
    elif op == 3:
        node = rng.choice(list(graph.node))
        if node.input:
            node.input[rng.randrange(len(node.input))] = rng.choice(["", "nothing", node.output[0]])
    elif op == 4:
        vi = rng.choice(list(graph.input))
        vi.type.tensor_type.elem_type = rng.choice([0, 8, 99, 2])
    elif op == 5:
        model.opset_import[0].version = rng.choice([1, 0, 999])
    elif op == 6:  # an attribute of the wrong type
        node = rng.choice(list(graph.node))
        name = rng.choice(["strides", "pads", "group", "kernel_shape", "transB", "dilations", "alpha"])
        value = rng.choice(["two", 2.5, [1.5, 2.5], b"\x00", ["a", "b"], [2**40, -2**40]])
        kept = [a for a in node.attribute if a.name != name]
        del node.attribute[:]
        node.attribute.extend(kept + [helper.make_attribute(name, value)])
    elif op == 7:  # a missing field
        node = rng.choice(list(graph.node))
        which = rng.randrange(4)
        if which == 0:
            del node.output[:]
        elif which == 1:
            node.op_type = ""
        elif which == 2:
            del graph.output[:]
        else:
            del node.input[:]
    else:  # huge or tiny sizes
        vi = rng.choice(list(graph.input))
        dims = vi.type.tensor_type.shape.dim
        value = rng.choice([2**24, 2**31, 2**40, 2**63 - 1, 0, 1])
        for d in dims[1:] if rng.random() < 0.5 else dims[-1:]:
            d.Clear()
            d.dim_value = value
    return model.SerializeToString()


def mutate_onnx(rng: random.Random, data: bytes, how: str) -> bytes:
    if how in ("fields", "fields-wide"):
        return _field_mutation(rng, data, wide=how == "fields-wide")
    out = bytearray(data)
    if how == "flip":
        for _ in range(rng.randrange(1, 12)):
            out[rng.randrange(len(out))] = rng.randrange(256)
        return bytes(out)
    if how == "truncate":
        return bytes(out[:rng.randrange(len(out))])
    if how == "insert":
        at = rng.randrange(len(out) + 1)
        return bytes(out[:at]) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))) + bytes(out[at:])
    if how == "zero":
        a = rng.randrange(len(out))
        out[a:a + rng.randrange(1, 32)] = bytes(min(32, len(out) - a))
        return bytes(out)
    return rng.choice([b"", b"\x00" * 64, bytes(rng.randrange(256) for _ in range(256)), b"not a model\n"])


ONNX_MUTATIONS = ["flip", "truncate", "insert", "zero", "junk", "fields", "fields"]


# ------------------------------------------------------------------ the cases
@dataclass(frozen=True)
class Case:
    ident: str
    kind: str          # 'workload', 'arch', 'mapping' or 'onnx'
    command: str       # which command reads the file
    content: str | bytes
    suffix: str = ".yaml"



def _arch_seeds() -> list[str]:
    from costmodel import dump_arch, preset

    return [dump_arch(preset("gemmini")), dump_arch(preset("gemmini", dim=4, dataflow="os")),
            dump_arch(preset("simba")), COSA_V02_ARCH]


def _mapping_seeds() -> list[str]:
    from costmodel import preset
    from cosa.scheduler import schedule
    from mappings import dump_mapping
    from mappings.timeloop import to_timeloop
    from workloads import load_one
    import yaml

    arch = preset("gemmini")
    nest = load_one(ROOT / "examples" / "conv3x3.yaml")
    mapping = schedule(nest, arch, scheduler="gemmini-default", bound=False).mapping
    return [dump_mapping(mapping, arch), yaml.safe_dump(to_timeloop(mapping, nest, arch), sort_keys=False)]

class _Hang(BaseException):
    """Raised by the per-case alarm; a BaseException so no handler in the code under test swallows it."""


def run_in_process(argv: list[str], limit_s: float = CASE_LIMIT_S) -> tuple[int, str, str]:
    from cosa.cli import main

    def alarm(signum, frame):
        raise _Hang(f"no answer within {limit_s} s")

    out, err = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return code, out.getvalue(), err.getvalue()


def check_outcome(code: int, out: str, err: str, json_out: bool = True, note: str | None = None,
                  may_fail: bool = False) -> None:
    """Exit 0 with JSON on stdout (``json_out``) and nothing on stderr but a line starting with ``note``;
    or exit 2 with one line; ``may_fail``: exit 1 (a failed run, e.g. a scheduler that failed on a layer)
    is also an answer."""
    assert "Traceback" not in err and "Traceback" not in out, (err or out)[-2000:]
    assert code in ((0, 1, 2) if may_fail else (0, 2)), f"exit {code}; stderr: {err[-500:]!r}"
    if code == 1:
        assert err.strip() and all(line.strip() for line in err.splitlines()[:1]), "exit 1 without a word"
        return
    if code == 0:
        lines = err.splitlines()
        assert err == "" or (note and len(lines) == 1 and lines[0].startswith(note)), \
            f"exit 0 but stderr says {err[:500]!r}"
        if json_out:
            json.loads(out)
    else:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("cosa: "), f"stderr is not one line: {err[:1000]!r}"
        assert len(lines[0]) < 2000, f"a {len(lines[0])}-character error line"


def _write(case: Case, directory: Path) -> Path:
    path = directory / f"case{case.suffix}"
    if isinstance(case.content, bytes):
        path.write_bytes(case.content)
    else:
        path.write_text(case.content)
    return path
