"""Build, solve, decode, validate exactly, cut and re-solve: the CoSA scheduler."""

from __future__ import annotations

import dataclasses
import math
import time

from mappings.validate import violations
from workloads.divisors import prime_factor_counts

from ..baselines.objective import TIE_TOLERANCE, TieSet, objective_value, within
from ..schedule import Schedule, SchedulingError, SolverStats
from .decode import add_capacity_cut, decode
from .formulation import OBJECTIVES, CosaWeights, build
from .factors import polish_factors
from .fill import once_loaded_fills, smaller_fills
from .polish import polish_orders
from .predict import baseline_mappings, load_start
from .problem import build_problem
from .solve import SOLVERS, solve
from .tiebreak import fewest_dram_bytes, least_energy, least_energy_rebuilt

MAX_CUT_ROUNDS = 16
NOGOOD_CUTS_PER_LEVEL = 2
EDP_ROUNDS = 3
MAX_START_TRIES = 3  # baseline mappings tried for a MIP start before solving without one
START_TIME_LIMIT_S = 10.0  # per fixed solve; never more than a quarter of the time left
START_MIN_S = 1.0  # ... except before any baseline has loaded
TIE_CAP_SHARES = (1.0, 0.5)  # the fewest-DRAM-bytes solve's cap on the objective, in tie tolerances
COMPUTE_TIE_TOLERANCE = 1e-3  # model latencies this close to the optimum: ties for the fewest-compute solve


def _evaluator():
    """costmodel.evaluate, or None while the cost model is not installed."""
    try:
        from costmodel import evaluate
    except ImportError:
        return None
    return evaluate


def _check_min_utilization(problem, min_utilization: float, src: str) -> None:
    """Explain why the fan-out cannot be filled to ``min_utilization`` (before the solver says 'infeasible')."""
    arch, wl = problem.arch, problem.workload
    need = math.log2(arch.total_macs_per_cycle / arch.macs_per_cycle * min_utilization)
    best = 0.0
    for slot in problem.slots:
        fits = [p for d in slot.dims for p, mult in problem.primes[d].items() for _ in range(mult) if p <= slot.size]
        best += min(math.log2(slot.size), sum(math.log2(p) for p in fits))
    if best + 1e-9 < need:
        too_big = sorted({(p, d) for d in problem.dims for p in prime_factor_counts(problem.bounds[d])
                          if all(p > s.size for s in problem.slots)}, key=lambda x: (-x[0], x[1]))
        why = ("; prime factors larger than every spatial axis: "
               + ", ".join(f"{p} of {d}" for p, d in too_big)) if too_big else ""
        raise SchedulingError(
            f"fan-out constraint cannot be met: min_utilization={min_utilization:g} needs "
            f"{2 ** need:.0f} of {arch.total_macs_per_cycle // arch.macs_per_cycle} spatial instances busy, but the "
            f"loop factors of {wl.name} fill at most {2 ** best:.0f}{why}", source=src, field="min_utilization")


def _diagnose_infeasible(form, src: str) -> SchedulingError:
    """Name the constraint family that makes the model infeasible (capacity of a level or fan-out)."""
    m = form.model
    arch = form.problem.arch
    families = [(f"capacity of level {i} ({arch.levels[i].name})", f"{arch.levels[i].name}.capacity_bytes", f"cap_{i}")
                for i in range(len(arch.levels)) if m.component(f"cap_{i}") is not None]
    if m.component("min_util") is not None:
        families.append(("fan-out (min_utilization)", "min_utilization", "min_util"))
    for label, field, name in families:
        others = [n for _, _, n in families if n != name]
        for n in others:
            m.component(n).deactivate()
        result = solve(m, "highs", time_limit_s=10.0, mip_gap=1.0, seed=0, source=src)
        for n in others:
            m.component(n).activate()
        if result.status == "infeasible":
            return SchedulingError(f"{label} cannot be met by any placement of the loop factors", source=src,
                                   field=field)
    return SchedulingError("the MIP is infeasible (no single constraint family explains it)", source=src)


def mip_schedule(workload, arch, objective: str = "latency", solver: str = "highs", time_limit_s: float = 60.0,
                 mip_gap: float = 0.001, seed: int = 0, weights: CosaWeights | None = None,
                 order_levels="outer", polish: bool = True, min_utilization: float | None = None,
                 warm_start: bool = True, tie_tolerance: float = TIE_TOLERANCE, tie_breaks: bool = True) -> Schedule:
    """Schedule ``workload`` on ``arch`` with the CoSA MIP.

    Returns a Schedule whose mapping passed ``mappings.validate``.  ``polish``
    refines loop orders with the exact cost model (factors unchanged); on a
    CPU arch (``params["micro_kernel"]``) under the latency objective also the
    factors (``factors.polish_factors``: prime-factor moves and exchanges), of
    the main solve's mapping and of a tie-break's where one wins.
    ``order_levels``: the levels whose loop order is a MIP decision: "outer"
    (CoSA's choice: the DRAM level only; the model counts the irrelevant
    loops of the other levels as reloads, an upper bound that ``polish`` then
    improves on), "all" (every level above the innermost holder; a larger
    model, several times slower to prove, which found no better ResNet-50
    schedule on the gemmini preset), or explicit level indices.
    ``mip_gap``: relative gap at which the solver stops (0.1 %: within a 1 %
    gap the model's ties and near-ties hold schedules the cost model ranks
    several percent apart; the reuse-set order model proves 0.1 % on every
    ResNet-50 layer in about 2 s).
    ``min_utilization``: optional lower bound on the fraction of the spatial
    instances used.  ``warm_start``: give every solve a MIP start, the
    model's point for a valid mapping (the best one found so far, at first a
    baseline: the gemmini-default mapping on a Gemmini preset, else seeded
    random ones); a mapping the model cannot express or finds infeasible is
    skipped, and the solve runs without a start when none loads.  Seconds
    spent on the starts count in ``stats.solve_s`` and the time limit.
    When the time limit stops the search, the baseline start is returned
    instead of the incumbent if the cost model ranks it better, or if no
    valid incumbent was found (``extra["returned"]`` says which).
    Ties are broken lexicographically, as by every baseline
    (``cosa.baselines.objective``): among the mappings found whose objective
    in the cost model is within ``tie_tolerance`` (2 %) of the best, the one
    with the fewest DRAM bytes, then the least energy.  For the latency and
    energy objectives a second solve (``tiebreak.fewest_dram_bytes``, at most
    ``tiebreak.TIE_SOLVE_S`` seconds) looks for it in the model: the main
    objective capped at ``1 + tie_tolerance`` times its optimum, the model's
    DRAM bytes minimised (once more at half that cap when the cost model puts
    its mapping outside the tolerance); its mapping competes with the main
    one in the cost model (``extra["tie_break"]`` says which won,
    ``extra["tie_solves"]`` what each solve found and took).  Under the
    latency objective a third solve (``tiebreak.least_energy``) keeps that
    cap and the DRAM bytes found and minimises the model's energy (on an
    arch whose latency model states no traffic for levels without a
    bandwidth, Simba's and Eyeriss's, on a model of every level pair built
    for it: ``tiebreak.least_energy_rebuilt``).  ``tie_breaks=False`` runs neither of those two solves (they
    take most of a search's seconds on the Eyeriss and Simba presets): the schedule is then the main
    solution's or the fewest-compute solve's, as fast, with its DRAM bytes and energy not minimised among
    the ties.
    Under ``arch.params["fill_before_compute"]`` (the cost model waits for the
    first fill and the last drain, which the MIP does not price) the latency
    objective's best mapping is also improved by ``fill.smaller_fills``
    (factor moves, re-solves with the slowest-filling level's budget halved) and by
    ``fill.once_loaded_fills`` (re-solves with an input's tile loaded once).
    Raises SchedulingError when no valid mapping exists or the time limit
    passes with no incumbent.  ``mip_search`` is the same search in two
    steps (the tie-breaking solves last).
    """
    for schedule in mip_search(workload, arch, objective, solver, time_limit_s, mip_gap, seed, weights, order_levels,
                               polish, min_utilization, warm_start, tie_tolerance, tie_breaks):
        pass
    return schedule


def mip_search(workload, arch, objective: str = "latency", solver: str = "highs", time_limit_s: float = 60.0,
               mip_gap: float = 0.001, seed: int = 0, weights: CosaWeights | None = None,
               order_levels="outer", polish: bool = True, min_utilization: float | None = None,
               warm_start: bool = True, tie_tolerance: float = TIE_TOLERANCE, tie_breaks: bool = True):
    """``mip_schedule`` in two steps, a generator: when the tie-breaking solves are due it first yields the
    Schedule without them (the main solution's, with the fewest-compute solve's and the polish), and when
    resumed runs them and yields the final Schedule, the one ``mip_schedule`` returns; otherwise it yields
    that one only.  The tie-breaking solves get the seconds that were left at the first yield, however long
    the caller waits before resuming (``padding.padded_schedule`` breaks ties on its winning padding only).
    The same arguments as ``mip_schedule``, checked on the first ``next``.
    """
    src = f"schedule of {workload.name} on {arch.name}"
    if objective not in OBJECTIVES:
        raise SchedulingError(f"objective must be one of {list(OBJECTIVES)}, got {objective!r}", source=src,
                              field="objective")
    if solver not in SOLVERS:
        raise SchedulingError(f"unknown solver '{solver}'; choose one of {list(SOLVERS)}", source=src, field="solver")
    if not isinstance(time_limit_s, (int, float)) or not time_limit_s > 0:
        raise SchedulingError(f"time_limit_s must be a positive number of seconds, got {time_limit_s!r}", source=src,
                              field="time_limit_s")
    if not isinstance(mip_gap, (int, float)) or not mip_gap >= 0:
        raise SchedulingError(f"mip_gap must be a number >= 0, got {mip_gap!r}", source=src, field="mip_gap")
    if isinstance(tie_tolerance, bool) or not isinstance(tie_tolerance, (int, float)) or not 0 <= tie_tolerance < 1:
        raise SchedulingError(f"tie_tolerance must be a number in [0, 1), got {tie_tolerance!r}", source=src,
                              field="tie_tolerance")
    if not isinstance(tie_breaks, bool):
        raise SchedulingError(f"tie_breaks must be True or False, got {tie_breaks!r}", source=src, field="tie_breaks")
    t0 = time.perf_counter()
    problem = build_problem(workload, arch, order_levels)
    if min_utilization is not None:
        if not 0 < min_utilization <= 1:
            raise SchedulingError(f"min_utilization must be in (0, 1], got {min_utilization!r}", source=src,
                                  field="min_utilization")
        _check_min_utilization(problem, min_utilization, src)
    evaluate = _evaluator()
    first = "latency" if objective == "edp" else objective
    form = build(problem, first, weights)
    if min_utilization is not None:
        _add_min_utilization(form, min_utilization)
    build_s = time.perf_counter() - t0
    deadline = t0 + time_limit_s
    solve_s = 0.0
    cuts = 0
    cuts_at: dict[int, int] = {}
    rounds = 0
    evaluated = 0
    polished = False
    pool = TieSet(objective, tie_tolerance)  # every costed mapping found; items (result, returned, tie-break)
    tie_solves = []  # per tie-breaking solve: (what, status, seconds)
    ties = None  # (model, main result, the round's candidates) when the tie-breaking solves are due
    best = None  # (key, mapping, cost, result, "mip" or the start's source, tie-break)
    fallback = None  # (source, mapping, model objective): the first valid baseline that loaded as a start
    fallback_costed = False
    reference = None
    objective_of_round = first
    candidates = baseline_mappings(workload, arch, seed) if warm_start else iter(())
    start_tries = MAX_START_TRIES
    start_choice = None  # (source, mapping) whose model point starts the next solve
    starts = []  # per solve: (source, model objective) of its start, or None
    while True:
        point = None
        if warm_start:
            budget = min(START_TIME_LIMIT_S, (deadline - time.perf_counter()) / 4)
            if fallback is None:
                # no valid mapping in hand yet: a start is worth a short overrun of a tiny time limit
                budget = max(budget, START_MIN_S)
            if start_choice is not None and budget > 0.05:
                point, spent = load_start(form, start_choice[1], start_choice[0], budget, seed,
                                           solve_fn=solve)
                solve_s += spent
            while point is None and start_tries > 0 and budget > 0.05:
                start_choice = next(candidates, None)
                if start_choice is None:
                    break
                start_tries -= 1
                point, spent = load_start(form, start_choice[1], start_choice[0], budget, seed,
                                           solve_fn=solve)
                solve_s += spent
            if point is not None and fallback is None and point.source != "incumbent":
                fallback = (point.source, start_choice[1], point.objective)
        starts.append((point.source, point.objective) if point is not None else None)
        remaining = max(deadline - time.perf_counter(), 0.05)
        result = solve(form.model, solver, remaining, mip_gap, seed, src, size=form.size(),
                       warm_start=point is not None)
        solve_s += result.solve_s
        out_of_time = result.status == "time_limit" or time.perf_counter() >= deadline
        if not result.has_solution and out_of_time and (best is not None or fallback is not None):
            if best is not None:
                break
            mapping, result = _fallback_round(fallback, result)
            returned = fallback[0]
            found = []
        elif not result.has_solution:
            if result.status == "infeasible":
                raise _diagnose_infeasible(form, src)
            if result.status == "time_limit":
                raise SchedulingError(f"time limit of {time_limit_s:g} s reached with no incumbent "
                                      f"(model: {form.size()[0]} variables); raise time_limit_s", source=src,
                                      field="time_limit_s")
            raise SchedulingError(f"solver {solver} stopped with status '{result.status}' and no solution",
                                  source=src, field="solver")
        else:
            mapping = decode(form)
            found = violations(mapping, workload, arch)
            returned = "mip"
        capacity = [e for e in found if (e.field or "").endswith(".capacity")]
        if capacity and out_of_time and (best is not None or fallback is not None):
            # the time is up and the incumbent overflows a level: keep the best valid mapping known
            if best is not None:
                break
            mapping, result = _fallback_round(fallback, result)
            returned = fallback[0]
            found = capacity = []
        if found and len(capacity) == len(found) and cuts < MAX_CUT_ROUNDS:
            level = arch.level_index(capacity[0].field.rsplit(".", 1)[0])
            cuts += 1
            cuts_at[level] = cuts_at.get(level, 0) + 1
            if cuts_at[level] <= NOGOOD_CUTS_PER_LEVEL:
                add_capacity_cut(form, mapping, level)
            else:
                # no-good cuts converge slowly when the model is far off: shrink the level's
                # budget by the observed overflow and rebuild
                problem = _shrink_capacity(problem, mapping, level)
                t1 = time.perf_counter()
                form = build(problem, objective_of_round, weights, reference=reference)
                if min_utilization is not None:
                    _add_min_utilization(form, min_utilization)
                build_s += time.perf_counter() - t1
            continue
        if found:
            raise SchedulingError(f"the decoded mapping is invalid after {cuts} cut(s): {found[0]}", source=src)
        cost = None
        if evaluate is not None:
            cost = evaluate(workload, arch, mapping)
            evaluated += 1
            if polish and objective != "cosa" and not _prediction_exact(form, result, cost, objective):
                mapping, cost, n = polish_orders(workload, arch, mapping, evaluate, objective, cost=cost,
                                                 tolerance=tie_tolerance)
                evaluated += n
                polished = True
        costed = [(mapping, cost, "main", 0)]
        if polish and objective == "latency" and cost is not None and arch.params.get("micro_kernel"):
            # a CPU micro-kernel's issue cycles and its LRU caches are only bounded in the MIP: re-price the
            # mappings one prime-factor move away with the cost model, descending while one is faster
            other, other_cost, n = polish_factors(workload, arch, mapping, evaluate, objective, cost=cost)
            if other is not mapping:
                other, other_cost, n2 = polish_orders(workload, arch, other, evaluate, objective, cost=other_cost,
                                                      tolerance=tie_tolerance)
                n += n2
            costed.append((other, other_cost, "factor moves", n))
        if (objective == "latency" and returned == "mip" and result.status == "optimal" and cost is not None
                and form.cycles is not None and time.perf_counter() < deadline):
            # ties: the model prices some schedules alike that the cost model does not (its transfer terms
            # bind and over-count reloads at levels whose order it does not decide); among them, the one
            # with the fewest compute cycles
            other, spent = _fewest_compute(form, result, deadline, solver, seed, src)
            solve_s += spent
            tie_solves.append(("fewest compute", "optimal" if other is not None else "none", spent))
            costed.append(_costed(other, "fewest compute", workload, arch, evaluate, objective, polish,
                                 tie_tolerance))
        if (tie_breaks and objective in ("latency", "energy") and returned == "mip" and result.has_solution
                and cost is not None and result.objective is not None):
            # the tie-breaking solves start from the model's point (this round's last solution): they run after
            # the loop, which ends with this round (no later round under these objectives), on the same model
            ties = (form, result, list(costed))
        for other, other_cost, how, n in costed:
            evaluated += n
            if other is None:
                continue
            if other_cost is None:  # no cost model: the model's objective decides
                if best is None or result.objective < best[0]:
                    best = (result.objective, other, None, result, returned, how)
                continue
            pool.offer(other_cost, other, (result, returned, how))
        if len(pool):
            best = _pool_best(pool, objective)
        start_choice = ("incumbent", best[1])
        if (result.status == "time_limit" and returned == "mip" and fallback is not None and not fallback_costed
                and evaluate is not None and objective != "cosa"):
            # stopped by the clock: the incumbent is not proven better than the start it began from,
            # and the model only approximates the cost, so let the exact cost model pick
            fallback_costed = True
            other, other_result = _fallback_round(fallback, result)
            other_cost = evaluate(workload, arch, other)
            evaluated += 1
            if polish:
                other, other_cost, n = polish_orders(workload, arch, other, evaluate, objective, cost=other_cost,
                                                     tolerance=tie_tolerance)
                evaluated += n
            pool.offer(other_cost, other, (other_result, fallback[0], "start"))
            best = _pool_best(pool, objective)
        rounds += 1
        if objective != "edp" or cost is None or rounds >= EDP_ROUNDS or time.perf_counter() >= deadline:
            break
        # EDP: minimize E/E0 + D/D0 around the incumbent (a majorizer of log E + log D), then repeat
        new_reference = (float(cost.energy_pj), float(cost.cycles))
        if reference is not None and new_reference == reference:
            break
        reference = new_reference
        objective_of_round = "edp"
        t1 = time.perf_counter()
        form = build(problem, "edp", weights, reference=reference)
        if min_utilization is not None:
            _add_min_utilization(form, min_utilization)
        build_s += time.perf_counter() - t1

    def finish() -> Schedule:
        """The Schedule of the best candidate so far."""
        key, mapping, cost, result, returned, tie_break = best
        nvars, nint, ncons = form.size()
        stats = SolverStats(solver=solver, status=result.status, variables=nvars, binaries=nint, constraints=ncons,
                            gap=result.gap, objective=result.objective, build_s=build_s, solve_s=solve_s, cuts=cuts,
                            seed=seed, evaluated=evaluated, model="the MIP's linearised model")
        extra = {"objective": objective, "order_levels": list(problem.order_levels), "polished": polished,
                 "tie_broken": tie_break not in ("main", "start", "factor moves") and not tie_break.startswith("fill"),
                 "tie_break": tie_break,
                 "tie_tolerance": tie_tolerance, "tie_breaks": tie_breaks,
                 "tie_solves": [{"what": w, "status": st, "seconds": sec} for w, st, sec in tie_solves],
                 "rounds": rounds, "last_round_objective": objective_of_round,
                 "start": starts[0][0] if starts and starts[0] else None,
                 "start_objective": starts[0][1] if starts and starts[0] else None,
                 "starts_used": sum(1 for s in starts if s), "returned": returned,
                 # stated in every report: whether the solver began from a baseline mapping (the vendor's on a
                 # Gemmini preset) and whether the schedule returned is that start rather than the MIP's own
                 "warm_start": {"enabled": bool(warm_start),
                                "start": starts[0][0] if starts and starts[0] else None,
                                "returned_start": returned != "mip"}}
        return Schedule(workload, arch, mapping, cost, "cosa", stats, extra)

    if ties is not None:
        left = deadline - time.perf_counter()  # the tie-breaking solves get the time left now, whenever they run
        yield finish()
        deadline = time.perf_counter() + left
        found, solves, spent = _tie_solves(*ties, problem, weights, deadline, dict(
            workload=workload, arch=arch, evaluate=evaluate, objective=objective, polish=polish,
            tie_tolerance=tie_tolerance, solver=solver, seed=seed, mip_gap=mip_gap, src=src))
        solve_s += spent
        tie_solves += solves
        for other, other_cost, how, n in found:
            evaluated += n
            if other is not None and other_cost is not None:
                pool.offer(other_cost, other, (ties[1], "mip", how))
        if len(pool):
            best = _pool_best(pool, objective)
    if (polish and objective == "latency" and best is not None and best[2] is not None
            and best[5] not in ("main", "factor moves") and arch.params.get("micro_kernel")):
        # a tie-break's mapping won: the factor moves the main mapping had, from it too
        other, other_cost, n = polish_factors(workload, arch, best[1], evaluate, objective, cost=best[2])
        evaluated += n
        if other is not best[1]:
            pool.offer(other_cost, other, (best[3], best[4], f"{best[5]}, factor moves"))
            best = _pool_best(pool, objective)
    if polish and objective == "latency" and best is not None and best[2] is not None \
            and arch.params.get("fill_before_compute"):
        # the cost model waits for the first fill, the MIP does not see it: smaller fills (cosa.mip.fill)
        options = dict(solver=solver, mip_gap=mip_gap, seed=seed, src=src, deadline=deadline,
                       tie_tolerance=tie_tolerance)
        found, spent = smaller_fills(problem, best[1], best[2], evaluate, objective, weights, options)
        solve_s += spent
        once, spent = once_loaded_fills(problem, evaluate, objective, weights, {**options, "mapping": best[1]})
        found, solve_s = found + once, solve_s + spent
        for other, other_cost, how, n in found:
            evaluated += n
            pool.offer(other_cost, other, (best[3], best[4], how))
        best = _pool_best(pool, objective)
    yield finish()


def _tie_solves(form, result, costed, problem, weights, deadline: float, options: dict):
    """The tie-breaking solves of the last round (``mip_schedule``'s docstring), from the model's current point:
    (their costed candidates as ``_costed`` gives them, [(what, status, seconds)], solver seconds).
    ``costed``: the round's candidates (the main solution's first); ``options``: workload, arch, evaluate,
    objective, polish, tie_tolerance, solver, seed, mip_gap, src."""
    o = options
    workload, arch, evaluate, objective, polish = o["workload"], o["arch"], o["evaluate"], o["objective"], o["polish"]
    tolerance, solver, seed, mip_gap, src = o["tie_tolerance"], o["solver"], o["seed"], o["mip_gap"], o["src"]
    out, tie_solves, solve_s = [], [], 0.0
    # the lexicographic second key in the model: fewest DRAM bytes within the tolerance of the optimum.
    # That solve goes to the edge of the cap, where the model and the cost model may disagree by a
    # little: when the cost model puts its mapping outside the tolerance, once more with half the cap
    fastest = min(objective_value(c, objective) for _, c, _, _ in costed if c is not None)
    for share in TIE_CAP_SHARES if tolerance > 0 else TIE_CAP_SHARES[:1]:  # at tolerance 0, every share's cap is 0
        other, spent, status = fewest_dram_bytes(form, result.objective, tolerance * share, deadline, solver, seed,
                                                 mip_gap, src)
        solve_s += spent
        tie_solves.append((f"fewest DRAM bytes (cap {tolerance * share:.2%})", status, spent))
        out.append(_costed(other, "fewest DRAM bytes", workload, arch, evaluate, objective, polish, tolerance))
        got = out[-1][1]
        if got is None or within(objective_value(got, objective), fastest, tolerance):
            break
    if objective == "latency" and other is not None:
        # the third key in the model: least energy at those DRAM bytes (the model is at that solution)
        other, spent, status = least_energy(form, result.objective, tolerance * share, deadline, solver, seed,
                                            mip_gap, src)
        if status == "no energy terms":  # on-chip levels without a bandwidth: a model that states them
            other, spent, status = least_energy_rebuilt(problem, out[-1][0], deadline, solver, seed, mip_gap, src,
                                                        weights)
        solve_s += spent
        tie_solves.append(("least energy", status, spent))
        out.append(_costed(other, "least energy", workload, arch, evaluate, objective, polish, tolerance))
    return out, tie_solves, solve_s


def _costed(mapping, how: str, workload, arch, evaluate, objective: str, polish: bool, tolerance: float):
    """(mapping, cost, how, cost-model calls) of a tie-breaking solve's mapping, costed and polished;
    (None, None, how, 0) when there is none or it is not valid (tie solves add no capacity cuts)."""
    if mapping is None or evaluate is None or violations(mapping, workload, arch):
        return None, None, how, 0
    cost = evaluate(workload, arch, mapping)
    n = 0
    if polish and objective != "cosa":
        mapping, cost, n = polish_orders(workload, arch, mapping, evaluate, objective, cost=cost, tolerance=tolerance)
    return mapping, cost, how, n + 1


def _pool_best(pool, objective: str):
    """``best`` as the driver keeps it, from the pool's lexicographic winner."""
    cost, mapping, (result, returned, how) = pool.best()
    return objective_value(cost, objective), mapping, cost, result, returned, how


def _fewest_compute(form, result, deadline: float, solver: str, seed: int, src: str):
    """The mapping with the fewest compute cycles among the solutions whose latency objective is within
    ``COMPUTE_TIE_TOLERANCE`` of the optimum ``result`` (loaded in the model, which starts the solve), or None when
    that solve is not proven optimal before ``deadline``; and the seconds spent.  The model is left as it
    was (its objective active, the extra row and objective removed)."""
    import pyomo.environ as pe

    m = form.model
    m.obj.deactivate()
    m.tie_cap = pe.Constraint(expr=form.cycles <= result.objective * (1 + COMPUTE_TIE_TOLERANCE))
    m.tie_obj = pe.Objective(expr=form.terms["compute"], sense=pe.minimize)
    try:
        remaining = max(deadline - time.perf_counter(), 0.05)
        tie = solve(m, solver, remaining, 0.0, seed, src, size=form.size(), warm_start=True)
        mapping = decode(form) if tie.has_solution and tie.status == "optimal" else None
    finally:
        m.del_component(m.tie_obj)
        m.del_component(m.tie_cap)
        m.obj.activate()
    return mapping, tie.solve_s


def _fallback_round(fallback, result):
    """The start's baseline mapping as this round's answer, when the time ran out before the MIP
    found a valid one: its model objective, the solver's bound and the gap between them."""
    source, mapping, objective = fallback
    gap = None
    if result.bound is not None and math.isfinite(result.bound):
        gap = abs(objective - result.bound) / max(abs(objective), 1e-12)
    return mapping, dataclasses.replace(result, status="time_limit", has_solution=True, objective=objective,
                                        gap=gap)


def _shrink_capacity(problem, mapping, level: int):
    """The problem with level ``level``'s budget scaled by usable bytes / bytes the decoded tiles need
    (never below a budget that surely fits: the usable capacity, which the model's word counts bound
    exactly; at a row-addressed level, whose rows may each hold a single word, the usable rows' worth
    of the smallest words)."""
    from mappings.validate import tile_bytes

    lv = problem.arch.levels[level]
    usable = problem.arch.usable_capacity(level)
    floor = usable
    row_bytes = getattr(lv, "row_bytes", None)
    if row_bytes:
        stored = [t for t in problem.workload.tensors if level in problem.holders[t.name]]
        floor = usable * min([lv.bytes_per_word(t) for t in stored] or [row_bytes]) / row_bytes
    need = sum(tile_bytes(mapping, problem.workload, problem.arch, level).values())
    capacity = list(problem.capacity)
    capacity[level] = max(floor, capacity[level] * min(usable / need, 1.0))
    return dataclasses.replace(problem, capacity=tuple(capacity))


def _prediction_exact(form, result, cost, objective: str, tolerance: float = 0.005) -> bool:
    """Whether the MIP's latency objective already equals the cost model's cycles (then the
    loop orders it chose are optimal for the cost model too and need no polishing)."""
    if objective != "latency" or result.objective is None:
        return False
    problem = form.problem
    ideal = math.prod(problem.bounds.values()) / problem.arch.total_macs_per_cycle
    predicted = result.objective * ideal
    return abs(predicted - float(cost.cycles)) <= tolerance * float(cost.cycles)


def _add_min_utilization(form, min_utilization: float) -> None:
    import pyomo.environ as pe

    m = form.model
    problem = form.problem
    arch = problem.arch
    need = math.log2(arch.total_macs_per_cycle / arch.macs_per_cycle * min_utilization)
    used = sum(math.log2(p) * var for (a, d, p), var in form.nS.items())
    m.min_util = pe.Constraint(expr=used >= need - 1e-7)


__all__ = ["mip_schedule", "mip_search"]
