"""Timeloop's mapping YAML, so that timeloop-model can evaluate our mappings and we can read its mappings.

Format: ``mapping: [{target: <level name>, type: temporal|spatial|bypass, ...}]``.

* ``temporal``: ``factors: "K=4 C=2 ..."`` (every dim, 1 included) and
  ``permutation``: the dims listed INNER to OUTER (``"QPKC..."``; separated by
  spaces when a dim name has more than one letter).
* ``spatial`` (only for levels with fan-out > 1): factors, permutation and
  ``split``: the first ``split`` dims of the permutation go on the X axis
  (our level's first spatial axis), the rest on Y.
* ``bypass`` (Timeloop also says ``datatype``): ``keep`` and ``bypass`` lists of
  data-space (tensor) names, for every level but the outermost.

Level ``i`` of our mapping is the storage level ``arch.levels[i].name``; the
architecture given to Timeloop must name its storage levels the same way.
On import, factor 0 means the whole bound (Timeloop's convention); unknown
targets, dims or tensors raise MappingError.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from workloads.yamlio import read_yaml

from .mapping import LevelMapping, Mapping, MappingError
from .validate import assign_to_axes

_FACTOR = re.compile(r"\s*([A-Za-z_][A-Za-z_0-9]*?)\s*=\s*(\d+)\s*|\s*([A-Za-z])(\d+)\s*")


_DIRECTIVE_KEYS = {"target", "type", "factors", "permutation", "split", "keep", "bypass"}


def _permutation_text(dims: list[str]) -> str:
    return "".join(dims) if all(len(d) == 1 for d in dims) else " ".join(dims)


def _factors_text(factors: dict[str, int], dims) -> str:
    return " ".join(f"{d}={factors.get(d, 1)}" for d in dims)


def to_timeloop(mapping: Mapping, workload, arch) -> dict:
    """``{"mapping": [...]}`` for ``mapping`` of ``workload`` on ``arch`` (dump it with yaml)."""
    if len(mapping.levels) != len(arch.levels):
        raise MappingError(f"the mapping has {len(mapping.levels)} levels but arch {arch.name} has {len(arch.levels)}",
                           source=f"mapping of {workload.name}", field="levels")
    dims = list(workload.dims)
    directives = []
    for i, (lm, level) in enumerate(zip(mapping.levels, arch.levels)):
        outer_to_inner = list(lm.loop_order(dims))
        directives.append({"target": level.name, "type": "temporal",
                           "factors": _factors_text(lm.temporal, dims),
                           "permutation": _permutation_text(outer_to_inner[::-1])})
        if level.fanout > 1:
            on_x, on_y = _split_spatial(lm, level, workload)
            rest = [d for d in dims if d not in on_x and d not in on_y]
            directives.append({"target": level.name, "type": "spatial",
                               "factors": _factors_text(lm.spatial, dims),
                               "permutation": _permutation_text(on_x + on_y + rest),
                               "split": len(on_x) if on_y else len(dims)})
        if i > 0:
            keep = [t.name for t in workload.tensors if mapping.stores(i, t, arch)]
            skip = [t.name for t in workload.tensors if not mapping.stores(i, t, arch)]
            directives.append({"target": level.name, "type": "bypass", "keep": keep, "bypass": skip})
    return {"mapping": directives}


def _split_spatial(lm: LevelMapping, level, workload) -> tuple[list[str], list[str]]:
    """Spatial dims on the X axis (the level's first spatial axis) and on Y."""
    spatial = {d: f for d, f in lm.spatial.items() if f > 1}
    axes = tuple(getattr(level, "spatial_axes", ()) or ())
    if len(axes) < 2 or not spatial:
        return sorted(spatial, key=list(workload.dims).index), []
    assignment, _ = assign_to_axes(spatial, axes, workload)
    order = list(workload.dims)
    if assignment is None:  # not placeable; keep everything on X and let validation report it
        return sorted(spatial, key=order.index), []
    on_x = sorted((d for d, a in assignment.items() if a == axes[0].name), key=order.index)
    on_y = sorted((d for d, a in assignment.items() if a != axes[0].name), key=order.index)
    return on_x, on_y


def dump_timeloop(mapping: Mapping, workload, arch) -> str:
    """Timeloop mapping YAML text."""
    return yaml.safe_dump(to_timeloop(mapping, workload, arch), sort_keys=False, default_flow_style=False)


def _parse_factors(text: Any, dims: dict[str, int], source: str, field: str) -> dict[str, int]:
    if isinstance(text, dict):
        items = list(text.items())
    else:
        items, pos, text = [], 0, str(text)
        while pos < len(text):
            m = _FACTOR.match(text, pos)
            if not m or m.end() == pos:
                shown, rest = (t if len(t) <= 60 else t[:55] + " ..." for t in (text, text[pos:]))
                raise MappingError(f"cannot parse factors '{shown}' at '{rest}' (expected e.g. 'K=4 C=2')",
                                   source=source, field=field)
            digits = m.group(2) or m.group(4)
            if len(digits) > 18:  # no loop bound has that many digits (and int() refuses 4,300)
                raise MappingError(f"factor of '{m.group(1) or m.group(3)}' has {len(digits):,} digits",
                                   source=source, field=field)
            items.append((m.group(1) or m.group(3), int(digits)))
            pos = m.end()
    out = {}
    for dim, factor in items:
        if dim not in dims:
            raise MappingError(f"unknown dimension '{dim}'; the workload has {list(dims)}", source=source, field=field)
        if isinstance(factor, bool) or not isinstance(factor, int) or factor < 0:
            raise MappingError(f"factor of '{dim}' must be a non-negative integer, got {factor!r}", source=source,
                               field=field)
        out[dim] = dims[dim] if factor == 0 else factor
    return out


def _parse_permutation(value: Any, dims: dict[str, int], source: str, field: str) -> list[str]:
    if isinstance(value, list):
        tokens = [str(v) for v in value]
    else:
        text = str(value).strip()
        tokens = re.split(r"[\s,]+", text) if re.search(r"[\s,]", text) else list(text)
    unknown = [t for t in tokens if t not in dims]
    if unknown:
        raise MappingError(f"permutation names unknown dimension(s) {unknown}; the workload has {list(dims)}",
                           source=source, field=field)
    if len(set(tokens)) != len(tokens):
        raise MappingError(f"permutation repeats a dimension: {tokens}", source=source, field=field)
    return tokens


def from_timeloop(doc: dict | list | str | Path, workload, arch, source: str = "<timeloop mapping>") -> Mapping:
    """A Mapping from Timeloop's mapping format (a dict, its YAML text, or a file path)."""
    if isinstance(doc, Path) or (isinstance(doc, str) and "\n" not in doc and doc.endswith((".yaml", ".yml"))):
        source = str(doc)
        try:
            doc = read_yaml(Path(doc).read_text(), source, MappingError)
        except OSError as exc:
            raise MappingError(f"cannot read: {exc.strerror or exc}", source=source) from None
    elif isinstance(doc, str):
        doc = read_yaml(doc, source, MappingError)
    directives = doc.get("mapping") if isinstance(doc, dict) else doc
    if not isinstance(directives, list):
        raise MappingError("expected 'mapping:' with a list of directives", source=source, field="mapping")
    names = [lv.name for lv in arch.levels]
    dims = dict(workload.dims)
    tensor_names = [t.name for t in workload.tensors]
    temporal: dict[int, dict] = {}
    spatial: dict[int, dict] = {}
    order: dict[int, tuple] = {}
    bypass: dict[int, set] = {}
    seen = set()
    for k, directive in enumerate(directives):
        where = f"mapping[{k}]"
        if not isinstance(directive, dict):
            raise MappingError(f"must be a mapping, got {directive!r}", source=source, field=where)
        unknown = sorted(set(directive) - _DIRECTIVE_KEYS)
        if unknown:
            raise MappingError(f"unknown key '{unknown[0]}' (known: {sorted(_DIRECTIVE_KEYS)}); remove it",
                               source=source, field=f"{where}.{unknown[0]}")
        target, kind = directive.get("target"), directive.get("type")
        if isinstance(target, int) and not isinstance(target, bool):
            if not 0 <= target < len(names):
                raise MappingError(f"target index {target} is not a level (0..{len(names) - 1})", source=source,
                                   field=f"{where}.target")
            index = target
        elif target in names:
            index = names.index(target)
        else:
            raise MappingError(f"target {target!r} is not a level of arch {arch.name}; levels are {names}",
                               source=source, field=f"{where}.target")
        kind = {"datatype": "bypass", "bypassing": "bypass"}.get(kind, kind) if isinstance(kind, str) else kind
        if kind not in ("temporal", "spatial", "bypass"):
            raise MappingError(f"type {directive.get('type')!r} is not temporal, spatial or bypass", source=source,
                               field=f"{where}.type")
        where = f"mapping[{k}] ({names[index]} {kind})"
        if (index, kind) in seen:
            raise MappingError("directive given twice for this level", source=source, field=where)
        seen.add((index, kind))
        if kind in ("temporal", "spatial"):
            factors = _parse_factors(directive.get("factors", ""), dims, source, f"{where}.factors")
            (temporal if kind == "temporal" else spatial)[index] = factors
            if kind == "temporal" and "permutation" in directive:
                inner_to_outer = _parse_permutation(directive["permutation"], dims, source, f"{where}.permutation")
                order[index] = tuple(inner_to_outer[::-1])
        else:
            keep = directive.get("keep") or []
            skip = directive.get("bypass") or []
            for group, field in ((keep, "keep"), (skip, "bypass")):
                if not isinstance(group, list) or any(not isinstance(t, str) or t not in tensor_names for t in group):
                    raise MappingError(f"must list data spaces of the workload {tensor_names}, got {group!r}",
                                       source=source, field=f"{where}.{field}")
            for tname in keep:
                if not arch.levels[index].may_hold(workload.tensor(tname)):
                    raise MappingError(f"keeps '{tname}', which this level cannot hold", source=source,
                                       field=f"{where}.keep")
            # a tensor the level cannot hold is bypassed anyway; record only real choices
            bypass[index] = {t for t in skip if arch.levels[index].may_hold(workload.tensor(t))}
    levels = []
    for i in range(len(names)):
        levels.append(LevelMapping(temporal=temporal.get(i, {}), spatial=spatial.get(i, {}),
                                   order=_trim_order(order.get(i, ()), list(dims)),
                                   bypass=frozenset(bypass.get(i, set()))))
    return Mapping(tuple(levels))


def _trim_order(order: tuple[str, ...], dims: list[str]) -> tuple[str, ...]:
    """The shortest prefix of ``order`` that LevelMapping completes to the same loop order."""
    full = list(order) + [d for d in dims if d not in order]
    for length in range(len(full) + 1):
        prefix = full[:length]
        if prefix + [d for d in dims if d not in prefix] == full:
            return tuple(prefix)
    return tuple(full)


# --- timeloop-model as an outside oracle -----------------------------------------------------

_CNN_DIMS = ("R", "S", "P", "Q", "C", "K", "N")
TIMELOOP_ENV = "TIMELOOP_MODEL"
"""Environment variable naming a timeloop-model binary (tests and ``bench/peers.py`` skip without it)."""


class TimeloopRunError(MappingError):
    """timeloop-model is missing or failed; the message names its log."""


def timeloop_problem(workload) -> dict:
    """Timeloop's problem YAML (``shape: cnn-layer``) for a convolution or matmul over R S P Q C K N.

    Timeloop's CNN layer indexes the input width as Wstride*P + Wdilation*R and
    its height as Hstride*Q + Hdilation*S, as our loader reads CoSA's files.
    Raises MappingError for a workload that is not such a layer (groups > 1, other dims).
    """
    src = f"workload {workload.name}"
    other = [d for d in workload.dims if d not in _CNN_DIMS]
    if other:
        raise MappingError(f"dims {other} have no place in Timeloop's cnn-layer shape (R S P Q C K N)", source=src,
                           field="dims")
    op = dict(getattr(workload, "op", {}) or {})
    if op.get("groups", 1) != 1:
        raise MappingError(f"groups={op['groups']} has no place in Timeloop's cnn-layer shape", source=src,
                           field="groups")
    stride = op.get("stride", (1, 1))
    dilation = op.get("dilation", (1, 1))
    problem = {"shape": "cnn-layer"}
    problem.update({d: int(workload.dims.get(d, 1)) for d in _CNN_DIMS})
    problem.update({"Hstride": int(stride[0]), "Wstride": int(stride[1]),
                    "Hdilation": int(dilation[0]), "Wdilation": int(dilation[1])})
    return {"problem": problem}


_LEVEL_HEAD = re.compile(r"^=== (\S+) ===\s*$")
_STAT = re.compile(r"^\s+(Scalar reads|Scalar updates|Scalar fills|Utilized instances \(max\)|Utilized instances|"
                   r"Energy \(per-scalar-access\)|Energy \(total\)|Cycles|Bandwidth throttling|Link transfers|"
                   r"Computes \(total\))(?: \(per-[a-z]+\))?\s*:\s*([-+0-9.eE]+)")
_TENSOR_HEAD = re.compile(r"^\s+([A-Za-z_][A-Za-z_0-9]*):\s*$")
_NETWORK_HEAD = re.compile(r"^(\S+) <==> (\S+)\s*$")
_STAT_KEYS = {"Scalar reads": "reads", "Scalar updates": "updates", "Scalar fills": "fills",
              "Utilized instances (max)": "instances", "Energy (per-scalar-access)": "pj_per_access",
              "Energy (total)": "energy_pj", "Link transfers": "link_transfers"}


def parse_timeloop_stats(text: str) -> dict:
    """The numbers of ``timeloop-model.stats.txt`` we compare with.

    ``{"cycles", "energy_pj", "computes", "mac_energy_pj", "levels": {level: {"cycles", "slowdown",
    "tensors": {tensor: {"reads", "updates", "fills" (per utilized instance, as Timeloop prints them),
    "instances" (utilized), "pj_per_access", "energy_pj" (all instances)}}}}, "networks": {"A <==> B":
    {tensor: {"link_transfers", "energy_pj"}}}}``.  ``energy_pj`` is the sum of the printed parts
    (the summary line has two decimals in uJ).
    """
    levels: dict = {}
    networks: dict = {}
    out: dict = {"levels": levels, "networks": networks}
    section = tensor = None
    in_networks = False
    for line in text.splitlines():
        if line.startswith("Operational Intensity Stats") or line.startswith("Summary Stats"):
            break
        if line.startswith("Networks"):
            in_networks, section, tensor = True, None, None
            continue
        head = (_NETWORK_HEAD if in_networks else _LEVEL_HEAD).match(line)
        if head:
            name = f"{head.group(1)} <==> {head.group(2)}" if in_networks else head.group(1)
            section = (networks if in_networks else levels).setdefault(name, {"tensors": {}})
            tensor = None
            continue
        if section is None:
            continue
        m = _STAT.match(line)
        if m:
            key, value = m.group(1), float(m.group(2))
            if key == "Cycles":
                section["cycles"] = value
            elif key == "Bandwidth throttling":
                section["slowdown"] = value
            elif key == "Computes (total)":
                section["computes"] = value
            elif tensor is not None:
                tensor[_STAT_KEYS.get(key, key)] = value
            elif key == "Energy (total)":
                section["energy_pj"] = value
            continue
        th = _TENSOR_HEAD.match(line)
        if th and th.group(1) not in ("STATS", "MAPPING", "SPECS"):
            tensor = section["tensors"].setdefault(th.group(1), {})
    for line in text.splitlines():
        m = re.match(r"^(Cycles|Energy|Computes)\s*[:=]\s*([-+0-9.eE]+)", line)
        if m:
            value = float(m.group(2))
            out[{"Cycles": "cycles", "Energy": "summary_energy_pj", "Computes": "computes"}[m.group(1)]] = \
                value * 1e6 if m.group(1) == "Energy" else value
    for sec in levels.values():  # the printed pJ per access has two decimals: recompute it from the energy
        for t in sec["tensors"].values():
            words = (t.get("reads", 0) + t.get("fills", 0) + t.get("updates", 0)) * t.get("instances", 1)
            if words and t.get("energy_pj"):
                t["pj_per_access"] = t["energy_pj"] / words
    arith = levels.pop("__ARITH__", {})
    out["mac_energy_pj"] = arith.get("energy_pj", 0.0)
    out["energy_pj"] = out["mac_energy_pj"] + sum(
        t.get("energy_pj", 0.0) for group in (levels, networks) for sec in group.values()
        for t in sec["tensors"].values())
    if "cycles" not in out:
        raise MappingError("no 'Cycles:' line in Timeloop's stats (not a timeloop-model.stats.txt?)",
                           source="timeloop stats", field="Cycles")
    return out


def run_timeloop_model(binary: str | Path, arch_file: str | Path, workload, mapping: Mapping, arch,
                       workdir: str | Path, timeout_s: float = 120.0, env: dict | None = None) -> dict:
    """Run ``binary ARCH PROBLEM MAP`` in ``workdir`` on our ``mapping``; its parsed stats.

    Writes problem.yaml and map.yaml (``dump_timeloop``) there; the run's output goes to
    ``timeloop.log``.  A missing binary, a failed run or stats we cannot read raise
    TimeloopRunError with one line naming the log.  ``env``: extra environment variables
    (``TIMELOOP_DISABLE_LINK_TRANSFERS=1`` turns off its neighbour-to-neighbour forwarding).
    """
    import os
    import subprocess

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "problem.yaml").write_text(yaml.safe_dump(timeloop_problem(workload), sort_keys=False))
    (workdir / "map.yaml").write_text(dump_timeloop(mapping, workload, arch))
    log = workdir / "timeloop.log"
    cmd = [str(binary), str(Path(arch_file).resolve()), "problem.yaml", "map.yaml"]
    try:
        with open(log, "w") as fh:
            proc = subprocess.run(cmd, cwd=workdir, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s,
                                  env={**os.environ, **(env or {})})
    except FileNotFoundError:
        raise TimeloopRunError(f"timeloop-model binary not found: {binary}", source=str(binary)) from None
    except subprocess.TimeoutExpired:
        raise TimeloopRunError(f"timeloop-model ran past {timeout_s:.0f} s; log: {log}", source=str(binary)) from None
    stats = workdir / "timeloop-model.stats.txt"
    if proc.returncode != 0 or not stats.exists():
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or ["(empty)"]
        raise TimeloopRunError(f"timeloop-model failed (exit {proc.returncode}): {tail[0][:160]}; log: {log}",
                               source=str(binary))
    return parse_timeloop_stats(stats.read_text(errors="replace"))


def mapspace_constraints(workload, arch) -> dict:
    """Timeloop's mapspace for our arch: per level below DRAM, keep the tensors whose role it may hold and
    bypass the others (CoSA's mapspace; spatial and order choices are left to the mapper)."""
    constraints = []
    for lv in arch.levels[1:]:
        keep = [t.name for t in workload.tensors if lv.may_hold(t)]
        skip = [t.name for t in workload.tensors if not lv.may_hold(t)]
        if skip:
            constraints.append({"target": lv.name, "type": "datatype", "keep": keep, "bypass": skip})
    return {"mapspace": {"constraints": constraints}}


def run_timeloop_mapper_files(binary: str | Path, arch_file: str | Path, problem: dict, mapspace: dict | str | Path,
                              workdir: str | Path, search_size: int, timeout_s: float,
                              algorithm: str = "random-pruned") -> tuple[Path, dict, float]:
    """Run ``binary ARCH PROBLEM MAPSPACE MAPPER`` in ``workdir`` on Timeloop's own documents: the path of its best
    mapping (Timeloop's format), its parsed stats and its seconds.

    ``problem``: Timeloop's problem document (``timeloop_problem``); ``mapspace``: a constraints document or a
    file.  The mapper stops after ``search_size`` valid mappings (one thread; its own ``timeout``, invalid
    mappings in a row, set high so that the search size decides).  A missing binary, a run past
    ``timeout_s`` or a failed run raise TimeloopRunError with one line naming the log.
    """
    import subprocess
    import time

    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "problem.yaml").write_text(yaml.safe_dump(problem, sort_keys=False))
    if isinstance(mapspace, dict):
        (workdir / "mapspace.yaml").write_text(yaml.safe_dump(mapspace, sort_keys=False))
        mapspace = workdir / "mapspace.yaml"
    (workdir / "mapper.yaml").write_text(yaml.safe_dump({"mapper": {
        "algorithm": algorithm, "optimization-metrics": ["delay", "energy"], "num-threads": 1,
        "search-size": int(search_size), "timeout": 100000, "victory-condition": 0,
        "max-permutations-per-if-visit": 16, "live-status": False, "diagnostics": False}}))
    log = workdir / "timeloop-mapper.log"
    cmd = [str(binary), str(Path(arch_file).resolve()), "problem.yaml", str(Path(mapspace).resolve()),
           "mapper.yaml"]
    t0 = time.perf_counter()
    try:
        with open(log, "w") as fh:
            proc = subprocess.run(cmd, cwd=workdir, stdout=fh, stderr=subprocess.STDOUT, timeout=timeout_s)
    except FileNotFoundError:
        raise TimeloopRunError(f"timeloop-mapper binary not found: {binary}", source=str(binary)) from None
    except subprocess.TimeoutExpired:
        raise TimeloopRunError(f"timeloop-mapper ran past {timeout_s:.0f} s; log: {log}", source=str(binary)) from None
    seconds = time.perf_counter() - t0
    found, stats = workdir / "timeloop-mapper.map.yaml", workdir / "timeloop-mapper.stats.txt"
    if proc.returncode != 0 or not found.exists() or not stats.exists():
        tail = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or ["(empty)"]
        raise TimeloopRunError(f"timeloop-mapper failed (exit {proc.returncode}): {tail[0][:160]}; log: {log}",
                               source=str(binary))
    return found, parse_timeloop_stats(stats.read_text(errors="replace")), seconds


def run_timeloop_mapper(binary: str | Path, arch_file: str | Path, workload, arch, workdir: str | Path,
                        search_size: int, timeout_s: float, mapspace_file: str | Path | None = None,
                        algorithm: str = "random-pruned") -> tuple[Mapping, dict, float]:
    """timeloop-mapper on ``workload``: its best mapping as ours, its stats, its seconds
    (``run_timeloop_mapper_files``; the mapspace: ``mapspace_file``, else ``mapspace_constraints`` of ``arch``)."""
    found, stats, seconds = run_timeloop_mapper_files(
        binary, arch_file, timeloop_problem(workload),
        mapspace_file if mapspace_file is not None else mapspace_constraints(workload, arch), workdir,
        search_size, timeout_s, algorithm)
    return from_timeloop(found, workload, arch), stats, seconds
