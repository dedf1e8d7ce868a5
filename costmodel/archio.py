"""Reading and writing architectures: preset names, our YAML form, CoSA/Timeloop v0.2 files.

``load_arch(path_or_name)`` accepts:

* a preset name (``costmodel.presets.list_presets()``), optionally with
  ``:key=value,...`` overrides: ``gemmini:dim=8,dataflow=os``;
* a CoSA/Timeloop v0.2 file (top-level ``arch: {arithmetic, storage}``), see
  ``costmodel.cosa_arch``;
* our YAML form::

      name: my-accel                 # required
      macs_per_cycle: 1              # per innermost instance (default 1)
      mac_energy_pj: 0.3             # pJ per MAC (default 0)
      frequency_hz: 1.0e9            # (default 1e9)
      dataflow: ws                   # optional label
      source: where the numbers come from
      params: {...}                  # free-form facts for back ends
      levels:                        # outermost (DRAM) first
        - name: DRAM                 # required, unique
          capacity_bytes: null       # bytes per instance; null = unbounded
          holds: [input, weight, output]   # roles it may keep (default: all)
          word_bits: null            # storage word size overriding the tensors' bits
          read_bandwidth: 16.0       # bytes/cycle per instance; null = unlimited
          write_bandwidth: 16.0
          read_energy_pj_per_byte: 160.0
          write_energy_pj_per_byte: 160.0
          fanout: 1                  # instances of the next level (or MAC units) per instance
          spatial_axes:              # optional shape of the fan-out
            - {name: rows, size: 16, roles: [input, weight], window_dims: false, dims: [], excluded: [R, S]}
          double_buffered: false     # transfers overlap compute; capacity split in two
          multicast: true            # one read serves all children needing the word
          separate_channels: false   # reads and writes on their own channels at once (Timeloop); else one port
          partial_sum_bits: null     # bits per word of partial sums spilled to the outer holder
          init_fill_bits: null       # bits per word of an initial value (bias) read per output tile
          compute_quantum: 1         # iterations per residency round up to a multiple of this
          compute_rows: null         # most iterations of this level's loops one compute command streams
          compute_overhead_cycles: 0 # cycles each compute command adds (with compute_rows)
          row_bytes: null            # row-addressed: bytes per row (null = counted in words)
          row_axes: {}               # role -> spatial axis whose unrolled block one row holds
          read_row_extra_cycles: 0   # cycles each row read from this level adds to its beats
          read_row_min_cycles: 0     # least cycles one row read from this level takes
          write_row_extra_cycles: 0  # the same for rows written to this level
          write_row_min_cycles: 0
          max_transfer_row_bytes: null  # most bytes one row moved to/from the outer holder carries

  Level field names are those of ``costmodel.arch.Level``; anything else is an error.

``arch_to_dict(arch)`` gives that form as a dict (``cosa arch show --json``);
``dump_arch(arch, path=None)`` writes it as YAML (and returns the text).
Errors are ``ArchError`` naming the file, the field and the reason.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import yaml

from workloads import ROLES
from workloads.yamlio import load_yaml, read_text_file, read_yaml

from .arch import Arch, ArchError, Level, SpatialAxis
from .cosa_arch import from_cosa_v02
from .energy import parse_energy_table
from .presets import list_presets, preset

_LEVEL_FIELDS = {f.name for f in dataclasses.fields(Level)}
_ARCH_FIELDS = {"name", "levels", "macs_per_cycle", "mac_energy_pj", "frequency_hz", "dataflow", "source", "params"}
_AXIS_FIELDS = {"name", "size", "roles", "window_dims", "dims", "excluded"}


def _parse_value(text: str):
    try:
        return load_yaml(text)
    except yaml.YAMLError:
        return text


def _from_preset_spec(spec: str) -> Arch:
    name, _, args = spec.partition(":")
    kwargs = {}
    if args:
        for item in args.split(","):
            key, eq, value = item.partition("=")
            if not eq or not key.strip():
                raise ArchError(f"expected key=value, got '{item}'", source=f"preset {name}", field="arguments")
            kwargs[key.strip()] = _parse_value(value.strip())
    return preset(name, **kwargs)


def load_arch(path_or_name: str | Path) -> Arch:
    """An ``Arch`` from a preset name or a YAML file (see the module docstring)."""
    text = str(path_or_name)
    if text.split(":", 1)[0].lower() in list_presets() and not Path(text).is_file():
        return _from_preset_spec(text)
    path = Path(text)
    if not path.is_file():
        raise ArchError(f"no such file, and not a preset (known presets: {list_presets()})", source=text)
    doc = read_yaml(read_text_file(path, str(path), ArchError), str(path), ArchError)
    return arch_from_dict(doc, source=str(path), default_name=path.stem)


def arch_from_dict(doc: Any, source: str = "arch", default_name: str = "arch") -> Arch:
    """An ``Arch`` from a parsed document of either YAML form."""
    if not isinstance(doc, dict):
        raise ArchError("the file must hold a mapping", source=source)
    if "arch" in doc:
        extra = set(doc) - {"arch", "ERT", "energy_table"}
        if extra:
            raise ArchError(f"unknown top-level keys {sorted(extra)} beside 'arch'", source=source)
        arch = from_cosa_v02(doc["arch"], source=source, name=default_name)
        return _with_energy_table(arch, doc, source)
    if "architecture" in doc:
        raise ArchError("Timeloop v0.3/v0.4 'architecture' trees are not supported; use the v0.2 'arch' form "
                        "or ours", source=source, field="architecture")
    unknown = set(doc) - _ARCH_FIELDS
    if unknown:
        raise ArchError(f"unknown field(s) {sorted(unknown)}; known: {sorted(_ARCH_FIELDS)}", source=source,
                        field=sorted(unknown)[0])
    if "levels" not in doc or not isinstance(doc["levels"], list) or not doc["levels"]:
        raise ArchError("missing or empty 'levels' list", source=source, field="levels")
    levels = tuple(_level(lv, i, source) for i, lv in enumerate(doc["levels"]))
    kwargs = {"name": str(doc.get("name", default_name)), "levels": levels}
    for key, kind, least, positive in (("macs_per_cycle", int, 1, True), ("mac_energy_pj", float, 0, False),
                                       ("frequency_hz", float, None, True)):
        if key in doc:
            kwargs[key] = _num(doc[key], kind, source, key, minimum=least, positive=positive)
    for key in ("dataflow", "source"):
        if doc.get(key) is not None:
            kwargs[key] = str(doc[key])
    if "params" in doc:
        if not isinstance(doc["params"], dict):
            raise ArchError("must be a mapping", source=source, field="params")
        kwargs["params"] = dict(doc["params"])
        _check_params(kwargs["params"], source)
    if "energy_table" in (kwargs.get("params") or {}):
        kwargs["params"]["energy_table"] = parse_energy_table(kwargs["params"], source)
    try:
        return Arch(**kwargs)
    except ArchError as exc:
        raise ArchError(exc.reason, source=source, field=exc.field) from None


# the presets' parameters that code reads back (the Gemmini heuristic and code generator, the CPU, GPU and
# cluster targets): in a file they must make sense too
_POSITIVE_INT_PARAMS = ("dim", "sp_banks", "acc_banks", "pe_rows", "pe_cols", "cores", "simd_lanes",
                        "fma_per_cycle", "nodes", "sms", "lanes_per_sm", "register_words")
_POSITIVE_SIZE_PARAMS = ("scratchpad_kib", "accumulator_kib", "glb_kib", "l1_kib", "l2_kib", "l3_mib",
                         "shared_kib", "l2_mib", "link_bytes_per_cycle")


def _check_params(params: dict, source: str) -> None:
    for key in _POSITIVE_INT_PARAMS:
        if key in params:
            _num(params[key], int, source, f"params.{key}", minimum=1)
    for key in _POSITIVE_SIZE_PARAMS:
        if key in params:
            _num(params[key], float, source, f"params.{key}", positive=True)
    if "compute_overhead_cycles" in params:
        _num(params["compute_overhead_cycles"], int, source, "params.compute_overhead_cycles", minimum=0)
    if "pack_cycles_per_word" in params:
        _num(params["pack_cycles_per_word"], float, source, "params.pack_cycles_per_word", minimum=0)
    if "dataflow" in params and params["dataflow"] not in ("ws", "os"):
        raise ArchError(f"must be 'ws' or 'os', got {params['dataflow']!r}", source=source, field="params.dataflow")
    for key in ("pipelined", "refill_needs_room", "fill_before_compute"):
        if key in params and not isinstance(params[key], bool):
            raise ArchError(f"expected true or false, got {params[key]!r}", source=source, field=f"params.{key}")


def _with_energy_table(arch: Arch, doc: dict, source: str) -> Arch:
    """``arch`` with the per-access energies of ``doc``'s ``ERT:`` or ``energy_table:`` (if any) in
    ``params["energy_table"]``, which ``evaluate`` then prices accesses with."""
    if "ERT" not in doc and "energy_table" not in doc:
        return arch
    key = "ERT" if "ERT" in doc else "energy_table"
    table = parse_energy_table({key: doc[key]}, source)
    return dataclasses.replace(arch, params={**arch.params, "energy_table": table})


def _num(value, kind, source, field, allow_none=False, minimum=None, positive=False, none_means=""):
    """A finite number of ``kind``; ``minimum``: the least value allowed; ``positive``: > 0
    (``none_means``: what null would say instead, named in the message)."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ArchError(f"expected {'an integer' if kind is int else 'a number'}, got {value!r}", source=source,
                        field=field)
    if not math.isfinite(value):
        raise ArchError(f"must be finite, got {value!r}", source=source, field=field)
    if kind is int and int(value) != value:
        raise ArchError(f"expected an integer, got {value!r}", source=source, field=field)
    if positive and value <= 0:
        raise ArchError(f"must be > 0, got {value!r}" + (f" (null: {none_means})" if none_means else ""),
                        source=source, field=field)
    if minimum is not None and value < minimum:
        raise ArchError(f"must be >= {minimum}, got {value!r}", source=source, field=field)
    return kind(value)


def _roles(value, source, field) -> frozenset:
    if not isinstance(value, (list, tuple, set, frozenset)):
        raise ArchError(f"expected a list of roles, got {value!r}", source=source, field=field)
    bad = [r for r in value if r not in ROLES]
    if bad:
        raise ArchError(f"unknown roles {bad}; known {list(ROLES)}", source=source, field=field)
    return frozenset(value)


def _level(doc, index: int, source: str) -> Level:
    where = f"levels[{index}]"
    if not isinstance(doc, dict) or "name" not in doc:
        raise ArchError("each level must be a mapping with a 'name'", source=source, field=where)
    where = f"levels.{doc['name']}"
    unknown = set(doc) - _LEVEL_FIELDS
    if unknown:
        raise ArchError(f"unknown field(s) {sorted(unknown)}; known: {sorted(_LEVEL_FIELDS)}", source=source,
                        field=f"{where}.{sorted(unknown)[0]}")
    kw: dict[str, Any] = {"name": str(doc["name"])}
    if "capacity_bytes" in doc:
        kw["capacity_bytes"] = _num(doc["capacity_bytes"], int, source, f"{where}.capacity_bytes", True,
                                    positive=True, none_means="an unbounded level")
    elif index > 0:
        raise ArchError("missing capacity (use capacity_bytes: null for an unbounded level)", source=source,
                        field=f"{where}.capacity_bytes")
    if "holds" in doc:
        kw["holds"] = _roles(doc["holds"], source, f"{where}.holds")
    if "word_bits" in doc:
        kw["word_bits"] = _num(doc["word_bits"], int, source, f"{where}.word_bits", True, 1)
    for key in ("read_bandwidth", "write_bandwidth"):
        if key in doc:
            kw[key] = _num(doc[key], float, source, f"{where}.{key}", True, positive=True,
                           none_means="unlimited bandwidth")
    for key in ("read_energy_pj_per_byte", "write_energy_pj_per_byte"):
        if key in doc:
            kw[key] = _num(doc[key], float, source, f"{where}.{key}", False, 0)
    if "fanout" in doc:
        kw["fanout"] = _num(doc["fanout"], int, source, f"{where}.fanout", False, 1)
    for key in ("partial_sum_bits", "init_fill_bits"):
        if key in doc:
            kw[key] = _num(doc[key], int, source, f"{where}.{key}", True, 1)
    if "compute_quantum" in doc:
        kw["compute_quantum"] = _num(doc["compute_quantum"], int, source, f"{where}.compute_quantum", False, 1)
    if "compute_rows" in doc:
        kw["compute_rows"] = _num(doc["compute_rows"], int, source, f"{where}.compute_rows", True, 1)
    if "compute_overhead_cycles" in doc:
        kw["compute_overhead_cycles"] = _num(doc["compute_overhead_cycles"], int, source,
                                             f"{where}.compute_overhead_cycles", False, 0)
    for key in ("read_row_extra_cycles", "read_row_min_cycles", "write_row_extra_cycles", "write_row_min_cycles"):
        if key in doc:
            kw[key] = _num(doc[key], float, source, f"{where}.{key}", False, 0)
    if "max_transfer_row_bytes" in doc:
        kw["max_transfer_row_bytes"] = _num(doc["max_transfer_row_bytes"], int, source,
                                            f"{where}.max_transfer_row_bytes", True, 1)
    if "row_bytes" in doc:
        kw["row_bytes"] = _num(doc["row_bytes"], int, source, f"{where}.row_bytes", True, 1)
    if "row_axes" in doc:
        axes = doc["row_axes"] or {}
        if not isinstance(axes, dict) or not all(isinstance(a, str) for a in axes.values()):
            raise ArchError("expected a mapping of role -> spatial axis name", source=source,
                            field=f"{where}.row_axes")
        _roles(list(axes), source, f"{where}.row_axes")
        kw["row_axes"] = dict(axes)
    for key in ("double_buffered", "multicast", "separate_channels"):
        if key in doc:
            if not isinstance(doc[key], bool):
                raise ArchError(f"expected true or false, got {doc[key]!r}", source=source, field=f"{where}.{key}")
            kw[key] = doc[key]
    if "spatial_axes" in doc:
        axes = doc["spatial_axes"] or []
        if not isinstance(axes, list):
            raise ArchError("expected a list of axes", source=source, field=f"{where}.spatial_axes")
        kw["spatial_axes"] = tuple(_axis(a, j, source, f"{where}.spatial_axes[{j}]") for j, a in enumerate(axes))
    return Level(**kw)


def _axis(doc, j, source, where) -> SpatialAxis:
    if not isinstance(doc, dict) or "name" not in doc or "size" not in doc:
        raise ArchError("an axis needs 'name' and 'size'", source=source, field=where)
    unknown = set(doc) - _AXIS_FIELDS
    if unknown:
        raise ArchError(f"unknown field(s) {sorted(unknown)}", source=source, field=f"{where}.{sorted(unknown)[0]}")
    dims, excluded = doc.get("dims") or [], doc.get("excluded") or []
    for key, value in (("dims", dims), ("excluded", excluded)):
        if not isinstance(value, list):
            raise ArchError("expected a list of dims", source=source, field=f"{where}.{key}")
    window = doc.get("window_dims", False)
    if not isinstance(window, bool):
        raise ArchError(f"expected true or false, got {window!r}", source=source, field=f"{where}.window_dims")
    return SpatialAxis(str(doc["name"]), _num(doc["size"], int, source, f"{where}.size", False, 1),
                       _roles(doc.get("roles", []), source, f"{where}.roles"), window,
                       frozenset(str(d) for d in dims), frozenset(str(d) for d in excluded))


def _level_to_dict(lv: Level) -> dict:
    out = {
        "name": lv.name,
        "capacity_bytes": lv.capacity_bytes,
        "holds": [r for r in ROLES if r in lv.holds],
        "word_bits": lv.word_bits,
        "read_bandwidth": lv.read_bandwidth,
        "write_bandwidth": lv.write_bandwidth,
        "read_energy_pj_per_byte": lv.read_energy_pj_per_byte,
        "write_energy_pj_per_byte": lv.write_energy_pj_per_byte,
        "fanout": lv.fanout,
        "double_buffered": lv.double_buffered,
        "multicast": lv.multicast,
    }
    # calibration fields: written only when set, so the other presets' files stay as they were
    for key, default in (("partial_sum_bits", None), ("init_fill_bits", None), ("compute_quantum", 1),
                         ("compute_rows", None), ("compute_overhead_cycles", 0), ("row_bytes", None),
                         ("read_row_extra_cycles", 0.0), ("read_row_min_cycles", 0.0),
                         ("write_row_extra_cycles", 0.0), ("write_row_min_cycles", 0.0),
                         ("max_transfer_row_bytes", None)):
        if getattr(lv, key) != default:
            out[key] = getattr(lv, key)
    if lv.separate_channels:
        out["separate_channels"] = True
    if lv.row_axes:
        out["row_axes"] = dict(lv.row_axes)
    if lv.spatial_axes:
        out["spatial_axes"] = [{"name": a.name, "size": a.size, "roles": [r for r in ROLES if r in a.roles],
                                "window_dims": a.window_dims, "dims": sorted(a.dims),
                                **({"excluded": sorted(a.excluded)} if a.excluded else {})} for a in lv.spatial_axes]
    return out


def arch_to_dict(arch: Arch) -> dict:
    """Our YAML form as a dict (what ``dump_arch`` writes and ``arch_from_dict`` reads)."""
    return {
        "name": arch.name,
        "macs_per_cycle": arch.macs_per_cycle,
        "mac_energy_pj": arch.mac_energy_pj,
        "frequency_hz": arch.frequency_hz,
        "dataflow": arch.dataflow,
        "source": arch.source,
        "params": dict(arch.params),
        "levels": [_level_to_dict(lv) for lv in arch.levels],
    }


def describe_arch(arch: Arch) -> dict:
    """What ``cosa arch show --json`` prints: ``arch_to_dict`` with derived facts.  ``pes``: MAC units
    (instances below the innermost level); ``macs_per_cycle_per_pe``: the file's ``macs_per_cycle``
    (per innermost instance); ``macs_per_cycle``: the total of all PEs (256 on a 16 x 16 Gemmini);
    ``instances`` of each level.  Not an arch file (``arch_from_dict`` refuses the derived keys)."""
    out = {}
    for key, value in arch_to_dict(arch).items():
        if key == "macs_per_cycle":
            out["macs_per_cycle"] = arch.total_macs_per_cycle
            out["macs_per_cycle_per_pe"] = arch.macs_per_cycle
            out["pes"] = arch.instances(len(arch.levels))
        else:
            out[key] = value
    for i, lv in enumerate(out["levels"]):
        lv["instances"] = arch.instances(i)
    return out


def dump_arch(arch: Arch, path: str | Path | None = None) -> str:
    """Our YAML form of ``arch``; written to ``path`` when given.  Returns the text."""
    text = yaml.safe_dump(arch_to_dict(arch), sort_keys=False)
    if path is not None:
        Path(path).write_text(text)
    return text
