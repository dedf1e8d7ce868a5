"""The MIP's energy: the traffic terms priced per byte at both ends, and the MAC-side accesses.

Totals over all instances, in units of one pJ per MAC (pJ / 2**log2(MACs)), as ``costmodel.evaluate``
sums them; each ``2**x`` is a tangent epigraph (``linear.exp_tangents``).  Used by the energy and EDP
objectives (``formulation.build``) and by the tie-breaking solve for energy (``tiebreak``).
"""

from __future__ import annotations

import math

from .linear import exp_tangents


def energy_expr(block, problem, pairs, log_words: dict, spatial_outside, log_s, all_temporal):
    """Energy in pJ / 2**log2(MACs), its epigraph variables added to ``block`` (a model or a Block).

    ``pairs``: (tensor, parent, child) level pairs with their ``log_words[tensor name, child]``;
    ``spatial_outside(t, lo, hi, relevant_only)`` and ``log_s(k, d)``: log2 of spatial factors;
    ``all_temporal``: log2 of every temporal factor (the iterations the MACs run)."""
    wl, arch = problem.workload, problem.arch
    dims, L = problem.dims, problem.levels
    e_ref = sum(math.log2(problem.bounds[d]) for d in dims)
    energy_terms = []
    for (t, p, c) in pairs:
        lp, lc = arch.levels[p], arch.levels[c]
        per_word_parent = lp.read_energy_pj_per_byte * lp.bytes_per_word(t)
        per_word_child = lc.write_energy_pj_per_byte * lc.bytes_per_word(t)
        if t.is_output:
            per_word_parent += lp.write_energy_pj_per_byte * lp.bytes_per_word(t)
            per_word_child += lc.read_energy_pj_per_byte * lc.bytes_per_word(t)
        x_parent = log_words[t.name, c] + spatial_outside(t, 0, p, False) + spatial_outside(t, p, c, lp.multicast)
        x_child = log_words[t.name, c] + spatial_outside(t, 0, c, False)
        for tag, x, coef in (("p", x_parent, per_word_parent), ("c", x_child, per_word_child)):
            if coef > 0:
                y = exp_tangents(block, f"energy_{t.name}_{c}_{tag}", x - e_ref, -10, 16)
                energy_terms.append(coef * y)
    # MAC side: the innermost holder of each tensor serves every temporal iteration
    # (distinct words across the units below one instance; outputs are also written)
    for t in wl.tensors:
        inner = problem.holders[t.name][-1]
        lv = arch.levels[inner]
        coef = lv.read_energy_pj_per_byte * lv.bytes_per_word(t)
        if t.is_output:
            coef += lv.write_energy_pj_per_byte * lv.bytes_per_word(t)
        if coef <= 0:
            continue
        x = (all_temporal + spatial_outside(t, 0, inner, False)
             + sum(log_s(k, d) for k in range(inner, L) for d in dims if d in t.dims))
        y = exp_tangents(block, f"energy_mac_{t.name}", x - e_ref, -10, 16)
        energy_terms.append(coef * y)
    return sum(energy_terms) if energy_terms else 0
