"""A literal trace counter: the slow reference the analytical model is checked against.

``trace(workload, arch, mapping)`` walks the tiled loop nest of the mapping one
temporal iteration at a time.  For every level that holds a tensor it keeps,
per instance, the resident tile as a Python set of element coordinates
(computed from the affine indices, clipped to the stored tensor), and counts
fills, reads and writes with the definitions of ``costmodel.evaluate``:

* when the tile an instance needs differs from its resident set, the whole
  new tile is loaded (inputs, weights), or the old one is written back and the
  words of the new one that its group of siblings has held before are read
  back (outputs; accumulators start at zero);
* the parent serves the siblings that change at the same step with one read
  per distinct word (multicast), and receives one write per distinct output
  word (spatial reduction), where the fan-out level multicasts;
* at the innermost holder, every iteration reads the operand words the MAC
  units below need (once per distinct word) and updates the distinct output
  words (a read unless the word starts at zero in its residency).

Where the model is not exact: the analytical counts take the parent's reads
(and the output write-backs) from the union of all siblings' tiles; the trace
takes the union of the siblings that actually change.  They differ only when
clipping at a padded border makes some siblings' tiles coincide with the
previous ones while others move, and when output tiles overlap without being
equal (an output index that is not one-to-one).  The tests measure this.

Only for small problems: above ``max_macs`` it refuses with a WorkloadError.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from workloads import WorkloadError

from .cost import Access, PartialSums
from .evaluate import _validate
from .transfers import holders

DEFAULT_MAX_MACS = 1 << 16


class _Coords:
    """Element coordinates of one tensor for a fixed assignment of some loops.

    ``varying`` loops run over their whole range; the others are fixed per call.
    """

    def __init__(self, tensor, loops, varying: list[int]):
        self.tensor, self.loops = tensor, loops
        n_axes = len(tensor.indices)
        self.coef = [[tensor.indices[a].coef(lp.dim) * lp.stride for a in range(n_axes)] for lp in loops]
        self.offset = np.array([e.offset for e in tensor.indices], dtype=np.int64)
        rel = np.zeros((1, n_axes), dtype=np.int64)
        for j in varying:
            step = np.arange(loops[j].factor, dtype=np.int64)[:, None] * np.array(self.coef[j])[None, :]
            rel = (rel[:, None, :] + step[None, :, :]).reshape(-1, n_axes)
        self.rel = rel
        self.hi = None if tensor.shape is None else np.array(tensor.shape, dtype=np.int64)

    def words(self, fixed: dict[int, int]) -> set:
        shift = self.offset.copy()
        for j, x in fixed.items():
            if x:
                shift += x * np.array(self.coef[j], dtype=np.int64)
        coords = self.rel + shift
        if self.hi is not None:
            coords = coords[np.all((coords >= 0) & (coords < self.hi), axis=1)]
        return set(map(tuple, coords.tolist()))


class _Loop:
    def __init__(self, level, dim, factor, spatial, stride):
        self.level, self.dim, self.factor, self.spatial, self.stride = level, dim, factor, spatial, stride


def _loops(mapping, dims):
    raw = list(mapping.loops(list(dims)))
    return [_Loop(lp.level, lp.dim, lp.factor, lp.spatial,
                  math.prod(q.factor for q in raw[j + 1:] if q.dim == lp.dim)) for j, lp in enumerate(raw)]


def _combos(loops, indices: list[int]):
    """All value assignments of the loops at ``indices`` (dicts), in C order."""
    for values in itertools.product(*[range(loops[j].factor) for j in indices]):
        yield dict(zip(indices, values))


def trace(workload, arch, mapping, *, max_macs: int = DEFAULT_MAX_MACS, partial_sums: bool = False,
          delta_fetch: bool = False):
    """Literal counts: ``{level name: {tensor name: Access}}`` (see the module docstring).

    With ``partial_sums`` also the split of each output's parent-child traffic
    (``Cost.partial_sums``): returns ``(accesses, {parent level name: {output
    name: PartialSums}})``, where a write-back is final when it is the last
    one of its words for its group of siblings, and every read-back is partial.
    ``delta_fetch``: a changed input or weight tile loads only the words its
    resident tile lacks, and the parent sends the union of those.
    """
    _validate(workload, arch, mapping)
    if workload.macs > max_macs:
        raise WorkloadError(f"{workload.macs} MACs is above the trace counter's limit of {max_macs}; "
                            "use a smaller problem", source=f"workload {workload.name}", field="dims")
    nlev = len(arch.levels)
    loops = _loops(mapping, workload.dims)
    temporal = [j for j, lp in enumerate(loops) if not lp.spatial]
    spatial = [j for j, lp in enumerate(loops) if lp.spatial]
    multicast = {j: arch.levels[loops[j].level].multicast for j in spatial}
    counts = {i: {t.name: [0, 0, 0] for t in workload.tensors} for i in range(nlev)}  # reads, writes, fills

    # Per tensor: the holder pairs with their loop groups and state.
    plans = []
    for t in workload.tensors:
        chain = holders(workload, arch, mapping, t)
        pairs = []
        for p, c in zip(chain, chain[1:]):
            fan = [j for j in spatial if p <= loops[j].level < c]
            pairs.append({
                "p": p, "c": c,
                "coords": _Coords(t, loops, [j for j, lp in enumerate(loops) if lp.level >= c]),
                "outer_t": [j for j in temporal if loops[j].level < c],
                "group": [j for j in spatial if loops[j].level < p] + [j for j in fan if not multicast[j]],
                "child": [j for j in fan if multicast[j]],
                "resident": {}, "history": {}, "written": {}, "sent": 0, "received": 0,
            })
        inner = chain[-1]
        fan = [j for j in spatial if loops[j].level >= inner]
        mac = {
            "l": inner,
            "coords": _Coords(t, loops, [j for j in fan if multicast[j]]),
            "inst": [j for j in spatial if loops[j].level < inner],
            "units": [j for j in fan if not multicast[j]],
            "has_value": {},
        }
        plans.append((t, pairs, mac))

    def key(assign, indices):
        return tuple(assign[j] for j in indices)

    prev = None
    for xs in itertools.product(*[range(loops[j].factor) for j in temporal]):
        first = prev is None
        changed = 0 if first else next(i for i in range(len(xs)) if xs[i] != prev[i])
        changed_level = -1 if first else loops[temporal[changed]].level
        prev = xs
        tval = dict(zip(temporal, xs))
        for t, pairs, mac in plans:
            name = t.name
            for pr in pairs:
                p, c = pr["p"], pr["c"]
                if not first and changed_level >= c:
                    continue  # only loops inside this level's tile moved
                fixed_t = {j: tval[j] for j in pr["outer_t"]}
                for g in _combos(loops, pr["group"]):
                    gkey = key(g, pr["group"])
                    changed_children = []
                    for ch in _combos(loops, pr["child"]):
                        assign = {**fixed_t, **g, **ch}
                        ckey = key(assign, [j for j in spatial if loops[j].level < c])
                        need = pr["coords"].words(assign)
                        old = pr["resident"].get(ckey)
                        if old is None or need != old:
                            changed_children.append((ckey, old or set(), need))
                    if not changed_children:
                        continue
                    union_new = set().union(*[n for _, _, n in changed_children])
                    if t.is_output:
                        counts[c][name][0] += sum(len(o) for _, o, _ in changed_children)
                        old_words = set().union(*[o for _, o, _ in changed_children])
                        counts[p][name][1] += len(old_words)
                        pr["received"] += len(old_words)
                        pr["written"].setdefault(gkey, set()).update(old_words)
                        history = pr["history"].setdefault(gkey, set())
                        loaded = union_new & history
                        history |= union_new
                        counts[c][name][2] += len(loaded)
                        counts[c][name][1] += len(loaded)
                        counts[p][name][0] += len(loaded)
                        pr["sent"] += len(loaded)
                        if c == mac["l"]:
                            left = set(loaded)
                            for ckey, _, need in changed_children:
                                mine = left & need
                                left -= mine
                                mac["has_value"][ckey] = mine
                    elif delta_fetch:  # only the words the resident tile lacks move
                        fresh = [n - o for _, o, n in changed_children]
                        counts[c][name][2] += sum(len(f) for f in fresh)
                        counts[c][name][1] += sum(len(f) for f in fresh)
                        counts[p][name][0] += len(set().union(*fresh))
                    else:
                        counts[c][name][2] += sum(len(n) for _, _, n in changed_children)
                        counts[c][name][1] += sum(len(n) for _, _, n in changed_children)
                        counts[p][name][0] += len(union_new)
                    for ckey, _, need in changed_children:
                        pr["resident"][ckey] = need
            # MAC side at the innermost holder: every iteration.
            lvl = mac["l"]
            for inst in _combos(loops, mac["inst"]):
                ikey = key(inst, mac["inst"])
                for unit in _combos(loops, mac["units"]):
                    words = mac["coords"].words({**tval, **inst, **unit})
                    if t.is_output:
                        has = mac["has_value"].setdefault(ikey, set())
                        counts[lvl][name][1] += len(words)
                        counts[lvl][name][0] += len(words & has)
                        has |= words
                    else:
                        counts[lvl][name][0] += len(words)

    # Final write-back of every resident output tile.
    for t, pairs, _ in plans:
        if not t.is_output:
            continue
        for pr in pairs:
            p, c = pr["p"], pr["c"]
            by_group: dict = {}
            for ckey, words in pr["resident"].items():
                assign = dict(zip([j for j in spatial if loops[j].level < c], ckey))
                by_group.setdefault(key(assign, pr["group"]), []).append(words)
            for gkey, word_sets in by_group.items():
                old_words = set().union(*word_sets)
                counts[c][t.name][0] += sum(len(w) for w in word_sets)
                counts[p][t.name][1] += len(old_words)
                pr["received"] += len(old_words)
                pr["written"].setdefault(gkey, set()).update(old_words)

    names = arch.level_names
    accesses = {names[i]: {n: Access(*v) for n, v in per.items()} for i, per in counts.items()}
    if not partial_sums:
        return accesses
    psums: dict = {}
    for t, pairs, _ in plans:
        for pr in pairs if t.is_output else ():
            final = sum(len(w) for w in pr["written"].values())
            psums.setdefault(names[pr["p"]], {})[t.name] = PartialSums(pr["sent"], pr["received"] - final, final)
    return accesses, psums
