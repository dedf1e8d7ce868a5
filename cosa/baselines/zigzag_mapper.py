"""ZigZag's own mapper and cost model as a peer: LOMA run on the layer and arch, its best mapping read back,
validated and priced by our cost model; and any of our mappings priced by ZigZag's model.

ZigZag (KU Leuven, ``zigzag-dse`` on PyPI) is an optional extra (``pip install cosa-framework[zigzag]``).  The
inputs come from ``cosa.baselines.zigzag_io``.  The search is ZigZag's pipeline for one layer: its spatial
mapping generator (``spatial_mappings`` candidates, with mixed unrollings when ``mix``), LOMA over the loop
orders of each (loop prime factors merged down to ``lpf_limit``), ZigZag's cost model on every candidate and
the best by the objective.  ``SETTINGS`` names ZigZag's defaults ("default": 6 prime factors, 3 spatial
mappings, no mixing) and a larger search ("large": twice the spatial mappings, mixed unrollings among them;
7 prime factors took over 15 times the default's CPU time on one MobileNet-V2 layer, too long to bench here).
LOMA enumerates, so it takes no seed.
"""

from __future__ import annotations

import contextlib
import io
import logging
import time
from dataclasses import dataclass, field

from ..schedule import Schedule, SchedulingError, SolverStats
from .zigzag_io import (MEM_OPERAND, ZigZagConversionError, nearest_mapping, padded_dims, padded_layer,
                        to_zigzag_loops, zigzag_accelerator, zigzag_layer, zigzag_mapping_entry)

EXTRA = "pip install cosa-framework[zigzag]"
SETTINGS = {
    "default": {"lpf_limit": 6, "spatial_mappings": 3, "mix": False},
    "large": {"lpf_limit": 6, "spatial_mappings": 6, "mix": True},
}
"""LOMA search settings: ZigZag's API defaults, and a larger search."""


@dataclass(frozen=True)
class ZigZagCost:
    """ZigZag's model on one mapping: ``cycles`` (its latency with on- and off-loading), ``energy_pj``,
    ``accesses``: {operand: [per memory, innermost first: {direction: words of our word size}]}, and
    ``double_buffered``: {operand: [per memory: whether ZigZag lets its transfers overlap compute]}."""

    cycles: float
    energy_pj: float
    mac_energy_pj: float
    accesses: dict
    double_buffered: dict
    memories: dict
    temporal_cycles: float = 0.0
    stall_cycles: float = 0.0
    onload_cycles: float = 0.0
    offload_cycles: float = 0.0
    stalls: tuple = ()

    def to_dict(self) -> dict:
        return {"cycles": self.cycles, "energy_pj": self.energy_pj, "mac_energy_pj": self.mac_energy_pj,
                "accesses": self.accesses, "double_buffered": self.double_buffered, "memories": self.memories,
                "temporal_cycles": self.temporal_cycles, "stall_cycles": self.stall_cycles,
                "onload_cycles": self.onload_cycles, "offload_cycles": self.offload_cycles,
                "stalls": [s.to_dict() for s in self.stalls]}


@dataclass(frozen=True)
class ZigZagStall:
    """One transfer ZigZag stalls on: operand ``op`` (O, W, I) moving ``direction`` (ZigZag's: rd_out_to_low,
    wr_in_by_high, rd_out_to_high, wr_in_by_low) at memory ``memory``, whose other end is ``other`` (a memory
    name, or "MAC" below the innermost); per period ``transfer`` cycles against an ``allowed`` window, over
    ``periods`` periods, ``cycles`` stalled in all; ``double_buffered``: whether ZigZag double-buffers the end
    that sets the window."""

    op: str
    memory: str
    other: str
    direction: str
    transfer: float
    allowed: float
    periods: int
    cycles: float
    double_buffered: bool

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def zigzag_version() -> str | None:
    """The installed ZigZag's version, or None when it does not import."""
    try:
        import zigzag  # noqa: F401
    except ImportError:
        return None
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("zigzag-dse")
    except PackageNotFoundError:
        return "unknown"


def require_zigzag(source: str = "zigzag") -> str:
    """ZigZag's version; SchedulingError (exit 2) naming the extra when it does not import."""
    found = zigzag_version()
    if found is None:
        raise SchedulingError(f"ZigZag is not installed: {EXTRA}", source=source, field="scheduler")
    return found


def _quiet():
    """ZigZag logs at INFO and prints warnings; keep our output to one line per failure."""
    logging.getLogger("zigzag").setLevel(logging.ERROR)
    return contextlib.redirect_stdout(io.StringIO())


def build(workload, arch):
    """ZigZag's Accelerator and LayerNode for ``workload`` on ``arch``, and the conversion records."""
    from zigzag.parser.accelerator_factory import AcceleratorFactory
    from zigzag.parser.accelerator_validator import AcceleratorValidator
    from zigzag.parser.mapping_validator import MappingValidator
    from zigzag.parser.workload_factory import WorkloadFactory
    from zigzag.parser.workload_validator import WorkloadValidator

    layer = zigzag_layer(workload)
    hw = zigzag_accelerator(arch, workload)
    src = f"ZigZag inputs of {workload.name} on {arch.name}"
    checks = AcceleratorValidator(hw.entry)
    if not checks.validate():
        raise ZigZagConversionError(f"ZigZag rejects the hardware: {checks.validator.errors}", source=src, field="arch")
    accelerator = AcceleratorFactory(checks.normalized_data).create()
    wl = WorkloadValidator([layer.entry])
    if not wl.validate():
        raise ZigZagConversionError(f"ZigZag rejects the workload: {wl.validator.errors}", source=src)
    maps = MappingValidator(zigzag_mapping_entry(hw))
    if not maps.validate():
        raise ZigZagConversionError(f"ZigZag rejects the mapping input: {maps.validator.errors}", source=src)
    with _quiet():
        node = WorkloadFactory(wl.normalized_data, maps.normalized_data).create().node_list[0]
    return accelerator, node, layer, hw


def run_loma(workload, arch, objective: str = "latency", lpf_limit: int = 6, spatial_mappings: int = 3,
             mix: bool = False):
    """ZigZag's search on one layer: (best cost model evaluation, converted inputs, wall seconds, CPU seconds)."""
    from zigzag.mapping.temporal_mapping import TemporalMappingType
    from zigzag.stages.evaluation.cost_model_evaluation import CostModelStage
    from zigzag.stages.mapping.spatial_mapping_generation import SpatialMappingGeneratorStage
    from zigzag.stages.mapping.temporal_mapping_generator_stage import TemporalMappingGeneratorStage
    from zigzag.stages.results.reduce_stages import MinimalEDPStage, MinimalEnergyStage, MinimalLatencyStage

    reduce = {"latency": MinimalLatencyStage, "energy": MinimalEnergyStage, "edp": MinimalEDPStage}[objective]
    accelerator, node, layer, hw = build(workload, arch)
    stages = [reduce, SpatialMappingGeneratorStage, reduce, TemporalMappingGeneratorStage, CostModelStage]
    start, cpu = time.perf_counter(), time.process_time()
    with _quiet():
        first = stages[0](stages[1:], accelerator=accelerator, layer=node, loma_lpf_limit=lpf_limit,
                          nb_mappings_generated=spatial_mappings, enable_mix_spatial_mapping_generation=mix,
                          temporal_mapping_type=TemporalMappingType.UNEVEN, loma_show_progress_bar=False,
                          access_same_data_considered_as_no_access=True)
        cme, _ = next(iter(first.run()))
    return cme, (accelerator, node, layer, hw), time.perf_counter() - start, time.process_time() - cpu


def loops_of(cme, layer) -> tuple[dict, dict]:
    """ZigZag's chosen loops in ``zigzag_io``'s form: temporal per operand and memory, spatial per array dim."""
    temporal = {str(op): [[(str(d), float(f)) for d, f in lv] for lv in levels]
                for op, levels in cme.temporal_mapping.mapping_dic_origin.items()}
    spatial = {str(oa): {str(d): float(f) for d, f in single.items()}
               for oa, single in cme.layer.spatial_mapping.items()}
    return ({op: [[(d, int(f)) if f == int(f) else (d, f) for d, f in lv] for lv in levels]
             for op, levels in temporal.items()}, spatial)


def zigzag_cost_of(cme, hw) -> ZigZagCost:
    """ZigZag's numbers for one evaluation, its access counts in our words (ZigZag counts port-width words)."""
    accesses, double = {}, {}
    for op, per in cme.memory_word_access.items():
        mem_levels = cme.accelerator.memory_hierarchy.get_memory_levels(cme.memory_operand_links.layer_to_mem_op(op))
        rows = []
        for count, level in zip(per, mem_levels):
            row = {}
            for direction in count.data:
                bw = level.get_max_bandwidth(cme.memory_operand_links.layer_to_mem_op(op), direction) or 0
                words = count.get(direction) * bw / cme.layer.operand_precision[op]
                row[str(direction.name).lower()] = float(words)
            rows.append(row)
        accesses[str(op)] = rows
        double[str(op)] = [bool(x) for x in cme.double_buffer_true[op][1:]]
    return ZigZagCost(float(cme.latency_total2), float(cme.energy_total), float(cme.mac_energy), accesses, double,
                      {op: _names(hw, op) for op in hw.memories}, float(cme.ideal_temporal_cycle),
                      float(cme.stall_slack_comb), float(cme.data_onloading_cycle), float(cme.data_offloading_cycle),
                      _stalls(cme, hw))


def _stalls(cme, hw) -> tuple:
    """The transfers ZigZag stalls on (positive stall per port activity), largest first."""
    out = []
    for ports in getattr(cme, "port_activity_collect", []):
        for activities in ports.values():
            for a in activities:
                if a.stall_or_slack <= 0:
                    continue
                layer_op, lv, direction = a.served_op_lv_dir  # ZigZag's layer operand, its memory index
                op = str(layer_op)
                names = _names(hw, op)
                toward_low = direction.name in ("RD_OUT_TO_LOW", "WR_IN_BY_LOW")
                other = (names[lv - 1] if lv > 0 else "MAC") if toward_low else \
                    (names[lv + 1] if lv + 1 < len(names) else "outside")
                flags = cme.double_buffer_true[layer_op]
                window_end = flags[lv] if toward_low else flags[lv + 1]
                out.append(ZigZagStall(op, names[lv], other, direction.name.lower(), float(a.real_cycle),
                                       float(a.allowed_cycle), int(a.period_count), float(a.stall_or_slack),
                                       bool(window_end)))
    return tuple(sorted(out, key=lambda x: -x.cycles))


def _names(hw, op) -> list[str]:
    """ZigZag memory names of operand ``op``, innermost first."""
    names = list(hw.entry["memories"])
    return [n for n in names if MEM_OPERAND[op] in hw.entry["memories"][n]["operands"]]


def zigzag_evaluate(workload, arch, mapping) -> ZigZagCost:
    """Our ``mapping`` priced by ZigZag's cost model (ZigZagConversionError when not expressible)."""
    from zigzag.cost_model.cost_model import CostModelEvaluation
    from zigzag.datatypes import LayerDim, LayerOperand, OADimension
    from zigzag.mapping.spatial_mapping import MappingSingleOADim, SpatialMapping
    from zigzag.mapping.temporal_mapping import TemporalMapping, TemporalMappingType
    from zigzag.stages.evaluation.cost_model_evaluation import CostModelStage
    from zigzag.stages.mapping.spatial_mapping_conversion import SpatialMappingConversionStage

    accelerator, node, layer, hw = build(workload, arch)
    temporal, spatial = to_zigzag_loops(mapping, workload, arch, layer, hw)
    user = SpatialMapping({OADimension(d): MappingSingleOADim({LayerDim(x): f for x, f in v.items()})
                           for d, v in spatial.items() if v})
    user.initialize_oa_dims(accelerator.operational_array.dimension_sizes)
    node.spatial_mapping = user
    with _quiet():
        converter = SpatialMappingConversionStage([CostModelStage], accelerator=accelerator, layer=node)
        sm, sm_int = converter.convert_user_spatial_mapping(user)
        tm = TemporalMapping({LayerOperand(op): [[(LayerDim(x), f) for x, f in lv] for lv in levels]
                              for op, levels in temporal.items()}, node, TemporalMappingType.UNEVEN)
        cme = CostModelEvaluation(accelerator=accelerator, layer=node, spatial_mapping=sm, spatial_mapping_int=sm_int,
                                  temporal_mapping=tm, access_same_data_considered_as_no_access=True)
    return zigzag_cost_of(cme, hw)


@dataclass(frozen=True)
class LomaResult:
    """LOMA's search on one layer: ZigZag's cost of its best mapping (``zigzag``); that mapping read back
    (``mapping``, on ``arch``: the layer's arch or one of its ``sibling_orders``, the one that places every
    loop where ZigZag does when there is one; exact when ``moved`` is empty, else the nearest that fits,
    ``nearest_mapping`` inward, else outward; None with ``readback_error`` when it cannot be stated);
    ``padded``: {dim: (bound, covered)} where ZigZag pads a dim to fill an array dimension, so the mapping is
    of ``workload`` (the layer padded so, ``padded_layer``); the search's wall and CPU seconds."""

    setting: str
    zigzag: ZigZagCost
    mapping: object
    moved: tuple[str, ...]
    readback_error: str | None
    wall_s: float
    cpu_s: float
    version: str
    arch: object = None
    workload: object = None
    padded: dict = field(default_factory=dict)


MAX_CHOICES = 4
"""A nearest mapping tries every inward/outward choice for up to this many moved loops (else all one way)."""


def read_back(temporal: dict, spatial: dict, workload, arch, layer, rank=None) -> tuple:
    """ZigZag's loops as one of our mappings: (mapping, moved loops, arch it is on, padded layer, padded dims,
    error).  Tries ``arch`` and its ``sibling_orders`` for an exact placement, each loop where ZigZag puts it.
    Failing that, the nearest mapping: on the orders that move the fewest loops, each moved loop inwards or
    outwards (every choice for up to ``MAX_CHOICES`` of them), the valid ones ranked by ``rank(mapping, arch,
    layer)`` (lower first; LOMA's caller passes how far ZigZag's model prices it from LOMA's own), else the
    first valid one."""
    from itertools import product

    from costmodel.arch import sibling_orders
    from mappings import MappingError, validate

    def attempt(candidate, hw, inward):
        mapping, moved = nearest_mapping(temporal, spatial, workload, candidate, layer, hw, inward=inward, pad=True)
        padded = padded_dims(mapping, workload)
        target = padded_layer(workload, padded)
        try:
            validate(mapping, target, candidate)
        except MappingError as err:
            if padded and err.field.endswith(".capacity"):  # ZigZag sizes a padded dim's tiles at its bound
                raise MappingError(f"{err.reason} (the layer padded as ZigZag pads it: {', '.join(sorted(padded))} at "
                                   "the padded extents, which ZigZag's capacity check does not count)",
                                   source=err.source, field=err.field) from None
            raise
        return mapping, moved, candidate, target, padded, None

    error, fewest = None, []
    for candidate in sibling_orders(arch):
        hw = zigzag_accelerator(candidate, workload)
        try:
            got = attempt(candidate, hw, False)
            if not got[1]:
                return got
        except (MappingError, ZigZagConversionError) as err:  # ZigZag's tiles do not fit ours, or not stated
            error = str(err)
            continue
        fewest.append((len(got[1]), candidate, hw))
    best_moves = min((k for k, _, _ in fewest), default=0)
    found, seen = [], set()
    for k, candidate, hw in fewest:
        if k != best_moves:
            continue
        choices = product((True, False), repeat=k) if k <= MAX_CHOICES else [(True,) * k, (False,) * k]
        for choice in choices:
            try:
                got = attempt(candidate, hw, tuple(choice))
            except (ZigZagConversionError, MappingError) as err:
                error = str(err)
                continue
            key = (candidate.level_names, repr(got[0]))
            if key not in seen:
                seen.add(key)
                found.append(got)
    if not found:
        return None, [], arch, workload, {}, error
    if rank is None:
        return found[0]
    return min(found, key=lambda got: rank(got[0], got[2], got[3]))


def loma(workload, arch, objective: str = "latency", setting: str = "default") -> LomaResult:
    """Run LOMA (``SETTINGS[setting]``) and read its best mapping back (``read_back``); SchedulingError for
    bad input (exit 2) and for ZigZag's own failure (one line naming the layer, exit 1)."""
    src = f"zigzag on {workload.name}"
    version = require_zigzag(src)
    if setting not in SETTINGS:
        raise SchedulingError(f"unknown ZigZag setting '{setting}'; choose one of {sorted(SETTINGS)}", source=src,
                              field="setting")
    if objective not in ("latency", "energy", "edp"):
        raise SchedulingError(f"ZigZag optimises latency, energy or edp, not '{objective}'", source=src,
                              field="objective")
    try:
        cme, (_, _, layer, hw), seconds, cpu_s = run_loma(workload, arch, objective, **SETTINGS[setting])
    except ZigZagConversionError:
        raise
    except Exception as err:  # ZigZag's own failure: one line naming the layer
        first = str(err).splitlines()[0] if str(err) else ""
        raise SchedulingError(f"ZigZag failed on layer {workload.name}: {type(err).__name__}: {first}".rstrip(": "),
                              source=src, field="scheduler", exit_code=1) from None
    temporal, spatial = loops_of(cme, layer)
    own = zigzag_cost_of(cme, hw)

    def distance(mapping, on, target) -> tuple:  # how far ZigZag's model prices a nearest mapping from LOMA's
        try:
            got = zigzag_evaluate(target, on, mapping)
        except Exception:  # noqa: BLE001 - a mapping ZigZag cannot price ranks last
            return (float("inf"), float("inf"))
        return (abs(got.cycles / own.cycles - 1), abs(got.energy_pj / own.energy_pj - 1))

    mapping, moved, on, target, padded, error = read_back(temporal, spatial, workload, arch, layer, distance)
    return LomaResult(setting, own, mapping, tuple(moved), error, seconds, cpu_s, version, on, target, padded)


def zigzag_schedule(workload, arch, objective: str = "latency", time_limit_s: float = 60.0, seed: int = 0,
                    setting: str = "default") -> Schedule:
    """LOMA's best mapping of ``workload`` on ``arch`` as a validated Schedule priced by our model.

    ``setting``: a key of ``SETTINGS``.  ``time_limit_s`` is recorded only: LOMA enumerates its space.
    ``extra``: ZigZag's own cycles and energy, its seconds and setting, whether the mapping read back is
    LOMA's (``exact``) or the nearest one (``moved_loops``, with ZigZag's cost of it), the dims ZigZag padded
    (``padded``: the Schedule's workload is the layer padded so) and the order of the levels it is stated on
    (``level_order``: the Schedule's arch, the layer's or one of its ``sibling_orders``)."""
    from costmodel import evaluate

    got = loma(workload, arch, objective, setting)
    if got.mapping is None:
        raise ZigZagConversionError(f"ZigZag's best mapping of layer {workload.name} cannot be read back: "
                                    f"{got.readback_error}", source=f"zigzag on {workload.name}", field="mapping",
                                    exit_code=1)
    cost = evaluate(got.workload, got.arch, got.mapping)
    stats = SolverStats(solver=f"zigzag-loma {got.version}", status="adapted" if got.moved else "ok",
                        solve_s=got.wall_s, seed=seed)
    extra = {"zigzag_cycles": got.zigzag.cycles, "zigzag_energy_pj": got.zigzag.energy_pj, "mapper_s": got.wall_s,
             "mapper_cpu_s": got.cpu_s, "zigzag": got.zigzag.to_dict(), "setting": setting, **SETTINGS[setting],
             "zigzag_version": got.version, "exact": not got.moved, "moved_loops": list(got.moved),
             "padded": {x: list(v) for x, v in got.padded.items()}, "level_order": list(got.arch.level_names)}
    if got.moved:  # what ZigZag's model says of the mapping we price
        adapted = zigzag_evaluate(got.workload, got.arch, got.mapping)
        extra.update(adapted_zigzag_cycles=adapted.cycles, adapted_zigzag_energy_pj=adapted.energy_pj)
    return Schedule(got.workload, got.arch, got.mapping, cost, "zigzag", stats, extra)


def zigzag_price_extra(workload, arch, mapping) -> dict:
    """ZigZag's model on one of our mappings as ``extra`` entries (``zigzag_error`` when it does not convert)."""
    try:
        got = zigzag_evaluate(workload, arch, mapping)
    except ZigZagConversionError as err:
        return {"zigzag_error": str(err)}
    except Exception as err:  # ZigZag's own failure on this mapping
        return {"zigzag_error": f"ZigZag failed on layer {workload.name}: {type(err).__name__}: {err}"}
    return {"zigzag_cycles": got.cycles, "zigzag_energy_pj": got.energy_pj}
