"""The bundled workload zoo: one short-form YAML file per network in this folder.

Names: ``names()`` lists the networks; ``network("resnet50")`` returns its
distinct layers (``repeat`` = how often each occurs); ``layer("resnet50/res2a_branch2b")``
returns one.  Each file starts with a one-line ``source`` note.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..errors import WorkloadError
from ..ir import LoopNest

ZOO_DIR = Path(__file__).resolve().parent


def names() -> list[str]:
    """Network names, sorted."""
    return sorted(p.stem for p in ZOO_DIR.glob("*.yaml"))


def path(name: str) -> Path:
    """The YAML file of network ``name``."""
    file = ZOO_DIR / f"{name}.yaml"
    if not file.is_file():
        raise WorkloadError(f"no network '{name}' in the zoo; have {names()}", source="zoo")
    return file


@lru_cache(maxsize=None)
def _network(name: str) -> tuple[LoopNest, ...]:
    from ..loaders import load_yaml_file

    return tuple(load_yaml_file(path(name)))


def _copy(nest: LoopNest) -> LoopNest:
    """A fresh copy, so that callers editing ``dims`` or ``op`` do not change the cached network."""
    return LoopNest(nest.name, dict(nest.dims), nest.tensors, nest.repeat, dict(nest.op))


def distinct(nests) -> list[LoopNest]:
    """The distinct layers of ``nests`` in first-seen order, each with ``repeat`` = how many share its loop
    bounds, operator (stride, padding, groups, input size) and word sizes; the first one's name is kept."""
    seen: dict = {}
    for n in nests:
        key = (tuple(n.dims.items()), repr(sorted((k, v) for k, v in n.op.items() if k != "note")),
               tuple((t.name, t.bits) for t in n.tensors))
        if key in seen:
            first = seen[key]
            seen[key] = LoopNest(first.name, dict(first.dims), first.tensors, first.repeat + n.repeat, dict(first.op))
        else:
            seen[key] = _copy(n)
    return list(seen.values())


def network(name: str) -> list[LoopNest]:
    """The distinct layers of network ``name`` with their repeat counts."""
    return [_copy(n) for n in _network(name)]


def source(name: str) -> str:
    """The one-line source note of network ``name``."""
    import yaml

    return str(yaml.safe_load(path(name).read_text()).get("source", ""))


def layer(qualified: str) -> LoopNest:
    """One layer by ``network/layer`` name."""
    if "/" not in qualified:
        raise WorkloadError(f"expected 'network/layer', got '{qualified}'", source="zoo")
    net, _, lname = qualified.partition("/")
    for nest in _network(net):
        if nest.name == lname:
            return _copy(nest)
    raise WorkloadError(f"network '{net}' has no layer '{lname}'; have {[n.name for n in _network(net)]}",
                        source="zoo")


def has(name: str) -> bool:
    """Whether ``name`` is a network or a ``network/layer`` of the zoo."""
    net, _, lname = str(name).partition("/")
    if net not in names():
        return False
    return not lname or any(n.name == lname for n in _network(net))


def layer_names(name: str) -> list[str]:
    """Qualified ``network/layer`` names of a network's layers."""
    return [f"{name}/{n.name}" for n in _network(name)]
