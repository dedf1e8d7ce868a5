"""ZigZag's inputs from our workloads and architectures, and ZigZag's mappings back into our ``Mapping``.

Plain data only (this module does not import ZigZag): ``zigzag_layer`` gives the workload entry of ZigZag's
YAML/list form, ``zigzag_accelerator`` its hardware entry and ``zigzag_mapping_entry`` its mapping entry
(memory-operand links and, for arrays with shaped axes, which layer dims each array dimension may unroll).
``to_zigzag_loops`` writes one of our mappings as ZigZag's loops (temporal loops per operand and memory level,
innermost first; spatial unrolling per array dimension) and ``from_zigzag_loops`` reads ZigZag's loops back.

How the two descriptions line up:

* Tensors: the output is ZigZag's ``O``, the weight ``W`` (memory operand ``I2``), the input ``I`` (``I1``);
  a workload with another set of roles is not expressible.  A tensor axis indexed by one dim stays one axis;
  an axis ``a*X + b*Y`` whose terms tile it exactly (``G*Cg + C`` of a grouped convolution) becomes one axis
  per term; any other two-term axis (a sliding window, stride and dilation included) becomes a ZigZag
  relation dim (``IA0 = a*X + b*Y``) with the axis offset as padding and the stored extent as its size.
* Levels: ours from the innermost out are ZigZag's memories (listed innermost first); a level's held roles
  are its operands.  Every level with a fan-out gives one operational-array dimension (or one per spatial
  axis); a memory serves the array dimensions of the fan-outs at and below it.  Our per-level word sizes
  (``Level.word_bits``) are kept by scaling the memory's sizes, bandwidths and per-access energies so that
  one of ZigZag's words is one of ours (ZigZag has one precision per operand); per-byte energies become
  per-access energies of the full port width, with a 1-bit minimum width so that ZigZag does not round
  accesses up.  A level whose bandwidths are unlimited (None) gets one port per operand and direction,
  each a word per cycle for every MAC unit the memory serves: ZigZag serialises the transfers that share a
  port (one shared port made a psum scratchpad that is read and written every cycle stall three cycles in
  four), and counts accesses of the full port width, the total rounded down, so a port far wider than the
  traffic would lose energy.  A level with a bandwidth keeps one shared port, or a read and a write port
  with ``separate_channels``, as our model shares it.
* Mappings: a temporal loop of our level ``l`` sits, for each operand, in the memory of the deepest level at
  or above ``l`` that stores it.  Reading back needs one level for each loop that agrees for every operand;
  ZigZag can place a loop inside one operand's inner tile and outside another's where our levels nest them
  the other way round (the caller may then try the arch's ``sibling_orders``, or take the nearest mapping),
  and ZigZag pads a dim to fill an array dimension (``pad``: the mapping is then of the padded layer,
  ``padded_layer``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..schedule import SchedulingError

OPERAND = {"output": "O", "weight": "W", "input": "I"}
"""Our tensor role -> ZigZag's layer operand."""
MEM_OPERAND = {"O": "O", "W": "I2", "I": "I1"}
"""ZigZag's layer operand -> its memory operand."""
DRAM_BITS = 10 ** 15
"""Size in bits given to an unbounded level."""
MAX_ARRAY_DIMS = 4  # ZigZag's operational arrays have D1..D4
_DIM_NAME = re.compile(r"^[A-Z]+\d*$")


class ZigZagConversionError(SchedulingError):
    """A workload, architecture or mapping has no equivalent on the other side; the message says why."""


@dataclass(frozen=True)
class ZigZagLayer:
    """One of our workloads in ZigZag's terms.

    ``entry``: the workload entry (ZigZag's YAML fields).  ``dims``: our dim -> ZigZag's dim name.
    ``tensors``: ZigZag operand (O, W, I) -> our tensor name.
    """

    entry: dict
    dims: dict[str, str]
    tensors: dict[str, str]


@dataclass(frozen=True)
class ZigZagArch:
    """One of our architectures in ZigZag's terms (for one workload's word sizes).

    ``entry``: the hardware entry.  ``memories``: per ZigZag operand, our level indices of its memories,
    innermost first.  ``array_dims``: ZigZag array dimension -> (our level index, axis name or None, size).
    ``hints``: array dimension -> ZigZag dims it may unroll (only for levels with shaped axes).
    """

    entry: dict
    memories: dict[str, tuple[int, ...]]
    array_dims: dict[str, tuple[int, str | None, int]]
    hints: dict[str, tuple[str, ...]]


def _fail(message: str, source: str, field: str = "workload") -> ZigZagConversionError:
    """Bad input (exit 2) for workloads and archs; a failed run (exit 1) for a mapping that does not convert."""
    return ZigZagConversionError(message, source=source, field=field, exit_code=1 if field == "mapping" else None)


def _dim_names(workload) -> dict[str, str]:
    names, used = {}, set()
    for k, dim in enumerate(workload.dims):
        name = dim.upper()
        if not _DIM_NAME.match(name) or name in used or name.startswith("IA"):
            name = f"L{k}"
        names[dim] = name
        used.add(name)
    return names


def zigzag_layer(workload, layer_id: int = 0) -> ZigZagLayer:
    """``workload`` (a LoopNest) as ZigZag's workload entry; ZigZagConversionError when not expressible."""
    src = f"ZigZag workload of {workload.name}"
    if any(t.density < 1.0 for t in workload.tensors):
        raise _fail("ZigZag models dense tensors; this workload has a sparse operand", src)
    roles = sorted(t.role for t in workload.tensors)
    if roles != ["input", "output", "weight"]:
        raise _fail(f"ZigZag takes one input, one weight and one output; this workload has roles {roles}", src)
    names = _dim_names(workload)
    operands, tensors, relations, pr_dims, pr_sizes, padding = {}, {}, [], [], [], []
    for t in workload.tensors:
        op = OPERAND[t.role]
        tensors[op] = t.name
        axes, window = [], []
        for k, expr in enumerate(t.indices):
            terms = sorted(expr.terms, key=lambda dc: (dc[1], workload.dims[dc[0]]))  # size-1 dims first
            if not terms:
                continue
            if len(terms) == 1 and terms[0][1] == 1:
                axes.append(names[terms[0][0]])
                continue
            if expr.offset == 0 and _tiles_exactly(terms, workload.dims):
                axes.extend(names[d] for d, _ in reversed(terms))
                continue
            if len(terms) == 1:  # a strided single index: a window with a size-1 partner is not in the nest
                raise _fail(f"tensor {t.name} axis {k} ({expr}) scales one dim; ZigZag has no such index", src)
            if len(terms) > 2 or op != "I" or any(c < 0 for _, c in terms):
                raise _fail(f"tensor {t.name} axis {k} ({expr}) is not expressible in ZigZag: only the input may "
                            "have a two-term (sliding-window) index", src)
            out_dims = next(x for x in workload.tensors if x.role == "output").dims
            # the stride's term first: the larger coefficient, else the output's dim (ZigZag's ox of ix = ox + fx)
            (a_dim, a), (b_dim, b) = sorted(terms, key=lambda dc: (-dc[1], dc[0] not in out_dims))
            pr = f"IA{len(pr_dims)}"
            relations.append(f"{pr.lower()}={a}*{names[a_dim].lower()}+{b}*{names[b_dim].lower()}")
            before = max(0, -expr.offset)
            span = _pr_size(a, workload.dims[a_dim], b, workload.dims[b_dim])
            size = t.shape[k] if t.shape is not None else span
            pr_dims.append(pr)
            pr_sizes.append(int(size))
            padding.append([before, max(0, span - before - int(size))])
            window.append(pr)
        if not axes and not window:
            raise _fail(f"tensor {t.name} has no axis that a dim indexes", src)
        operands[op] = axes + window  # relation axes rightmost, as ZigZag asks
    bits = {OPERAND[t.role]: t.bits for t in workload.tensors}
    eq = "O" + _axes(operands["O"]) + "+=W" + _axes(operands["W"]) + "*I" + _axes(operands["I"])
    entry = {
        "id": layer_id, "name": workload.name,
        "operator_type": "Gemm" if workload.op.get("kind") == "matmul" else "Conv",
        "equation": eq, "dimension_relations": relations,
        "loop_dims": [names[d] for d in workload.dims], "loop_sizes": [int(b) for b in workload.dims.values()],
        "operand_precision": {"W": bits["W"], "I": bits["I"], "O": bits["O"], "O_final": bits["O"]},
        "operand_source": {"W": layer_id, "I": layer_id},
    }
    if pr_dims:
        entry.update(pr_loop_dims=pr_dims, pr_loop_sizes=pr_sizes, padding=padding)
    return ZigZagLayer(entry, names, tensors)


def _axes(names: list[str]) -> str:
    return "".join(f"[{n.lower()}]" for n in names)


def _tiles_exactly(terms, bounds) -> bool:
    """Whether sum(c*d) over ``terms`` (ascending coefficients) is a mixed-radix number: it splits into axes."""
    reach = 1
    for dim, coef in terms:
        if coef != reach:
            return False
        reach *= bounds[dim]
    return len(terms) > 1


def _pr_size(a: int, n_a: int, b: int, n_b: int) -> int:
    """Distinct values of a*x + b*y over x < n_a, y < n_b (ZigZag's count for a relation dim)."""
    g = math.gcd(a, b)
    return n_a * n_b - max(0, n_b - a // g) * (n_a - b // g)


def _array_dims(arch, src: str) -> dict[str, tuple[int, str | None, int]]:
    dims: dict[str, tuple[int, str | None, int]] = {}
    for i, lv in enumerate(arch.levels):
        if lv.fanout <= 1:
            continue
        if lv.spatial_axes:
            if math.prod(a.size for a in lv.spatial_axes) != lv.fanout:
                raise _fail(f"level {lv.name}: spatial axes cover part of the fan-out {lv.fanout}", src, "arch")
            for axis in lv.spatial_axes:
                dims[f"D{len(dims) + 1}"] = (i, axis.name, axis.size)
        else:
            dims[f"D{len(dims) + 1}"] = (i, None, lv.fanout)
    if not dims:
        dims["D1"] = (len(arch.levels) - 1, None, 1)
    if len(dims) > MAX_ARRAY_DIMS:
        raise _fail(f"{len(dims)} fan-out dimensions; ZigZag's array has at most {MAX_ARRAY_DIMS}", src, "arch")
    return dims


_UNSUPPORTED = ("compute_rows", "row_bytes", "partial_sum_bits", "init_fill_bits", "read_row_extra_cycles",
                "read_row_min_cycles", "write_row_extra_cycles", "write_row_min_cycles")


def zigzag_accelerator(arch, workload) -> ZigZagArch:
    """``arch`` as ZigZag's hardware entry, for the word sizes of ``workload``'s tensors."""
    src = f"ZigZag hardware of {arch.name}"
    if arch.macs_per_cycle != 1:
        raise _fail(f"{arch.macs_per_cycle} MACs per cycle per unit; ZigZag's units do one", src, "arch")
    for lv in arch.levels:
        for name in _UNSUPPORTED:
            if getattr(lv, name):
                raise _fail(f"level {lv.name} sets {name}, which ZigZag does not model", src, "arch")
        if lv.compute_quantum != 1:
            raise _fail(f"level {lv.name} sets compute_quantum, which ZigZag does not model", src, "arch")
    array = _array_dims(arch, src)
    by_role = {t.role: t for t in workload.tensors}
    memories: dict[str, list[int]] = {op: [] for op in MEM_OPERAND}
    entries = {}
    for i in reversed(range(len(arch.levels))):
        lv = arch.levels[i]
        ops = [op for role, op in OPERAND.items() if role in lv.holds and role in by_role]
        if not ops:
            continue
        scales = {lv.bytes_per_word(by_role[r]) * 8 / by_role[r].bits for r in OPERAND if r in lv.holds}
        if len(scales) != 1:
            raise _fail(f"level {lv.name} stores its tensors at different word-size ratios {sorted(scales)}; "
                        "ZigZag scales a memory one way", src, "arch")
        scale = scales.pop()  # our bits per ZigZag bit at this level
        for op in ops:
            memories[op].append(i)
        served = [d for d, (owner, _, _) in array.items() if owner >= i]
        size = DRAM_BITS if lv.capacity_bytes is None else int(lv.capacity_bytes * 8 // scale)
        # "unlimited": a word per cycle for every MAC unit below, of the widest operand here
        unlimited = math.prod(array[d][2] for d in served) * max(by_role[r].bits for r in OPERAND if r in lv.holds
                                                                 and r in by_role)
        entries[lv.name] = {
            "size": size, "r_cost": 0.0, "w_cost": 0.0, "area": 0.0, "latency": 1,
            "operands": [MEM_OPERAND[op] for op in ops], "ports": _ports(lv, ops, scale, unlimited),
            "served_dimensions": served,
        }
        rbits = entries[lv.name]["ports"][0]["bandwidth_max"]
        wbits = entries[lv.name]["ports"][-1]["bandwidth_max"]
        # per access of the full port width: (ZigZag bits x scale) / 8 bytes of ours
        entries[lv.name]["r_cost"] = float(lv.read_energy_pj_per_byte * rbits * scale / 8)
        entries[lv.name]["w_cost"] = float(lv.write_energy_pj_per_byte * wbits * scale / 8)
    entry = {"name": arch.name, "memories": entries,
             "operational_array": {"unit_energy": float(arch.mac_energy_pj), "unit_area": 0.0,
                                   "dimensions": list(array), "sizes": [s for _, _, s in array.values()]}}
    hints = {}
    names = _dim_names(workload)
    for d, (owner, axis_name, _) in array.items():
        if axis_name is not None:
            axis = next(a for a in arch.levels[owner].spatial_axes if a.name == axis_name)
            hints[d] = tuple(names[x] for x in workload.dims if axis.admits(x, workload))
    return ZigZagArch(entry, {op: tuple(v) for op, v in memories.items()}, array, hints)


def _ports(lv, ops: list[str], scale: float, unlimited: int) -> list[dict]:
    """Ports of one memory: separate read and write ports with ``separate_channels``, else one shared port;
    ``unlimited``: the bits per cycle of a port whose bandwidth we leave unlimited."""
    def bits(bandwidth):
        return unlimited if bandwidth is None else max(1, int(round(bandwidth * 8 / scale)))

    reads = [f"{MEM_OPERAND[op]}, {d}" for op in ops for d in (("tl", "th") if op == "O" else ("tl",))]
    writes = [f"{MEM_OPERAND[op]}, {d}" for op in ops for d in (("fh", "fl") if op == "O" else ("fh",))]
    if lv.read_bandwidth is None and lv.write_bandwidth is None:
        return [{"name": f"{kind[0]}_port_{k + 1}", "type": kind, "bandwidth_min": 1, "bandwidth_max": unlimited,
                 "allocation": [link]}
                for kind, links in (("read", reads), ("write", writes)) for k, link in enumerate(links)]
    if lv.separate_channels or lv.read_bandwidth != lv.write_bandwidth:
        return [{"name": "r_port_1", "type": "read", "bandwidth_min": 1, "bandwidth_max": bits(lv.read_bandwidth),
                 "allocation": reads},
                {"name": "w_port_1", "type": "write", "bandwidth_min": 1, "bandwidth_max": bits(lv.write_bandwidth),
                 "allocation": writes}]
    return [{"name": "rw_port_1", "type": "read_write", "bandwidth_min": 1, "bandwidth_max": bits(lv.read_bandwidth),
             "allocation": reads + writes}]


def zigzag_mapping_entry(zz_arch: ZigZagArch) -> list[dict]:
    """ZigZag's mapping input: the operand links, and per shaped array dimension the dims it may unroll."""
    entry = {"name": "default", "memory_operand_links": dict(MEM_OPERAND)}
    if zz_arch.hints:
        entry["spatial_mapping_hint"] = {d: list(v) for d, v in zz_arch.hints.items() if v}
    return [entry]


# --- mappings ------------------------------------------------------------------------------------------

Loops = list[tuple[str, int]]


def to_zigzag_loops(mapping, workload, arch, zz_layer: ZigZagLayer, zz_arch: ZigZagArch):
    """Our ``mapping`` as ZigZag's loops: ({operand: [loops per memory, innermost first, each inner to outer]},
    {array dim: {zigzag dim: factor}}).  Dims of factor 1 are left out."""
    from mappings.validate import assign_to_axes

    names = zz_layer.dims
    for i, lm in enumerate(mapping.levels):  # ZigZag's memories are fixed per operand: no bypass by a mapping
        held = sorted(t.name for t in workload.tensors if t.name in lm.bypass and arch.levels[i].may_hold(t))
        if held:
            raise _fail(f"level {arch.levels[i].name} bypasses {held}, which it may hold; ZigZag's memories keep "
                        "every operand they hold", "ZigZag mapping", "mapping")
    spatial: dict[str, dict[str, int]] = {d: {} for d in zz_arch.array_dims}
    for i, lm in enumerate(mapping.levels):
        owned = [d for d, (owner, _, _) in zz_arch.array_dims.items() if owner == i]
        if not lm.spatial:
            continue
        if not owned:
            raise _fail(f"level {arch.levels[i].name} unrolls {lm.spatial} without a fan-out", "ZigZag mapping",
                        "mapping")
        if len(owned) == 1:
            spatial[owned[0]] = {names[x]: f for x, f in lm.spatial.items()}
            continue
        assignment, _ = assign_to_axes(lm.spatial, arch.levels[i].spatial_axes, workload)
        if assignment is None:
            raise _fail(f"level {arch.levels[i].name}: no axis assignment for {lm.spatial}", "ZigZag mapping",
                        "mapping")
        by_axis = {zz_arch.array_dims[d][1]: d for d in owned}
        for x, axis in assignment.items():
            spatial[by_axis[axis]][names[x]] = lm.spatial[x]
    dims = list(workload.dims)
    temporal = {}
    for op, levels in zz_arch.memories.items():
        per_memory: list[Loops] = [[] for _ in levels]
        for i, lm in enumerate(mapping.levels):
            memory = min(k for k, lv in enumerate(levels) if lv <= i)  # innermost first: the deepest at or above
            for x in lm.loop_order(dims):
                if lm.temporal_factor(x) > 1:
                    per_memory[memory].insert(0, (names[x], lm.temporal_factor(x)))
        temporal[op] = per_memory
    return temporal, spatial


def from_zigzag_loops(temporal: dict[str, list[Loops]], spatial: dict[str, dict[str, int]], workload, arch,
                      zz_layer: ZigZagLayer, zz_arch: ZigZagArch):
    """ZigZag's loops (``to_zigzag_loops``' form) as our Mapping; ZigZagConversionError when our levels cannot
    place a loop where ZigZag puts it for every operand, or a factor does not divide its dim."""
    mapping, moved = nearest_mapping(temporal, spatial, workload, arch, zz_layer, zz_arch)
    if moved:
        raise _fail(f"{moved[0]}; our levels nest these memories the other way round, so no level places it for "
                    "every operand", f"ZigZag mapping of {workload.name} on {arch.name}", "mapping")
    return mapping


def nearest_mapping(temporal: dict[str, list[Loops]], spatial: dict[str, dict[str, int]], workload, arch,
                    zz_layer: ZigZagLayer, zz_arch: ZigZagArch, inward=False, pad: bool = False):
    """ZigZag's loops as our Mapping and the loops it had to move: (mapping, [one line per moved loop]).

    Each temporal loop goes to a level that puts it in the memory ZigZag chose for every operand; where none
    does (ZigZag keeps a loop inside one operand's inner tile and outside another's, and our levels nest those
    memories the other way round), it goes outwards to the deepest level that keeps it outside every tile
    ZigZag keeps it outside of (every tile is ZigZag's or smaller, so the mapping fits wherever ZigZag's does),
    or with ``inward`` to the level of the innermost memory ZigZag puts it in (ZigZag's reuse for that operand
    kept, other tiles grown: the caller checks the capacity); ``inward`` is one choice for every such loop, or
    a sequence of choices, the k-th for the k-th loop moved, inner to outer (outwards past its end).  Loop order, factors and spatial unrolling are
    ZigZag's.  Raises ZigZagConversionError for fractional factors, and for ragged ones (factors whose
    product exceeds the dim: ZigZag pads a dim to fill an array dimension) unless ``pad``: the mapping is then
    of the layer padded to those products (``padded_dims``)."""
    from mappings import LevelMapping, Mapping

    src = f"ZigZag mapping of {workload.name} on {arch.name}"
    ours = {v: k for k, v in zz_layer.dims.items()}
    n = len(arch.levels)
    flat = {op: [(loop, k) for k, loops in enumerate(levels) for loop in loops] for op, levels in temporal.items()}
    sequences = {tuple(loop for loop, _ in v) for v in flat.values()}
    if len(sequences) != 1:
        raise _fail("ZigZag's operands list different temporal loops", src, "mapping")
    count = len(next(iter(sequences)))
    temporal_levels: list[dict[str, int]] = [{} for _ in range(n)]
    orders: list[list[str]] = [[] for _ in range(n)]
    moved: list[str] = []
    previous = n - 1
    for p in range(count):  # inner to outer
        lo, hi = 0, n - 1
        for op, loops in flat.items():
            levels = zz_arch.memories[op]
            memory = loops[p][1]
            lo = max(lo, levels[memory])
            if memory > 0:
                hi = min(hi, levels[memory - 1] - 1)
        dim, factor = loops[p][0]
        if factor != int(factor):
            raise _fail(f"temporal loop {ours.get(dim, dim)}={factor} is fractional", src, "mapping")
        level = min(hi, previous)  # as deep as allowed, never deeper than the loop inside it
        if level < lo:  # a conflict: this loop moves inwards or outwards
            step_in = inward if isinstance(inward, bool) else (len(moved) < len(inward) and inward[len(moved)])
            if step_in:
                level = min(lo, previous)
        if level < lo or level > hi:
            where = ", ".join(f"{op} in {arch.levels[zz_arch.memories[op][lp[p][1]]].name}"
                              for op, lp in flat.items())
            moved.append(f"loop {ours.get(dim, dim)}={int(factor)} sits {where} (placed at {arch.levels[level].name})")
        previous = level
        x = ours[dim]
        temporal_levels[level][x] = temporal_levels[level].get(x, 1) * int(factor)
        if x in orders[level]:
            orders[level].remove(x)
        orders[level].insert(0, x)
    spatial_levels: list[dict[str, int]] = [{} for _ in range(n)]
    for d, unroll in spatial.items():
        owner = zz_arch.array_dims[d][0]
        for dim, factor in unroll.items():
            if factor != int(factor):
                raise _fail(f"array dimension {d} unrolls {ours.get(dim, dim)} by {factor}, a fraction (a ragged "
                            "tiling, which our Mapping does not state)", src, "mapping")
            if int(factor) > 1:
                x = ours[dim]
                spatial_levels[owner][x] = spatial_levels[owner].get(x, 1) * int(factor)
    mapping = Mapping(tuple(LevelMapping(temporal_levels[i], spatial_levels[i], tuple(orders[i]))
                            for i in range(n)))
    for x, bound in workload.dims.items():
        if mapping.factor(x) != bound and not (pad and mapping.factor(x) > bound):
            raise _fail(f"ZigZag covers {x}={bound} with factors multiplying to {mapping.factor(x)} (a ragged "
                        "tiling, which our Mapping does not state)", src, "mapping")
    return mapping, moved


def padded_dims(mapping, workload) -> dict[str, tuple[int, int]]:
    """The dims a (ZigZag) mapping covers beyond their bounds: {dim: (bound, covered)}."""
    return {x: (bound, mapping.factor(x)) for x, bound in workload.dims.items() if mapping.factor(x) > bound}


def padded_layer(workload, padded: dict[str, tuple[int, int]]):
    """``workload`` with its ``padded`` dims (``padded_dims``) at their covered extents: the layer a ragged
    mapping runs, its extra iterations on idle units.  Stored tensor shapes stay, so a window that reaches
    past its input reads nothing there; the padded outputs are written (an upper bound on what a ragged
    execution moves)."""
    if not padded:
        return workload
    return workload.with_dims(**{x: covered for x, (_, covered) in padded.items()})
