"""CA-SGD on P mpiexec ranks (``run``), its model of words, messages, flops and time (``comm_counts``,
``flops_per_rank``, ``model_seconds``, ``best_s``) and the mappings of its kernels (``explain``).

The model, per rank r of p, counted as the wrapper's ring allreduce counts (``targets.mpi.ranks``:
reduce-scatter then allgather of ``numpy.array_split`` blocks, 2 (p - 1) messages each way):

* SGD: H allreduces of b words (Y x);
* CA-SGD: ceil(H / s) allreduces, of s b (s b + 1) / 2 + s b words (the Gram matrix's lower triangle
  and Y x) for every full step, k b (k b + 1) / 2 + k b for a last step of k = H mod s iterations.

Words of one allreduce of W words on rank r: ``collective_cost("allreduce", p, W, r)`` (about
2 W (p - 1) / p each way), so messages fall exactly s-fold and words grow about (s b + 3) / 2-fold.
Flops per rank: 2 x the MACs of the step's nests (``casgd.kernel_nests``; times the density for CSR)
plus the redundant inner updates (2 b^2 k (k - 1) / 2 per step of k).  Time: alpha x messages + beta x
words (the larger of sent and received) + gamma x flops, ``targets.mpi.model.seconds``.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass

import numpy as np

from . import casgd as ca
from .casgd import CasgdError

CLUSTER_LIKE = {"alpha": 1e-6, "beta": 1e-9, "gamma": 1e-10}
"""A cluster-like network and node: 1 us per message, 1 ns per word, 10 GFLOP/s per rank."""

S_CANDIDATES = (1, 2, 4, 8, 16, 32, 64)
COUNTED = ("words_sent", "words_recv", "msgs_sent", "msgs_recv")


@dataclass
class Config:
    """One run: the data (``data``: a LIBSVM file, or ``synthetic``: (m, n, density)), P ranks, batch b,
    s, step eta, H iterations, the method, the seed of the data and of the sampling."""

    data: str | None = None
    synthetic: tuple | None = None
    ranks: int = 1
    b: int = 8
    s: int = 4
    eta: float = 1.0
    iters: int = 100
    method: str = "casgd"
    seed: int = 0
    cond: float = 10.0
    kernels: str = "numpy"
    threads: int = 1
    sleep_after_send_s: float = 0.0  # time.sleep after each message sent: a stall, not network latency
    check: bool = True  # also run SGD on the same samples: iterate_diff_vs_sgd
    timeout_s: float = 300.0

    def validate(self) -> None:
        if (self.data is None) == (self.synthetic is None):
            raise CasgdError("give exactly one of --data FILE and --synthetic m,n,density", field="--data")
        for name in ("ranks", "b", "s", "iters"):
            v = getattr(self, name)
            if not isinstance(v, (int, np.integer)) or v < 1:
                raise CasgdError(f"must be an integer >= 1, got {v!r}", field=f"--{name}")
        if not (math.isfinite(self.eta) and self.eta > 0):
            raise CasgdError(f"must be a positive number, got {self.eta!r}", field="--eta")
        if self.method not in ("sgd", "casgd"):
            raise CasgdError(f"must be sgd or casgd, got {self.method!r}", field="--method")
        if self.sleep_after_send_s < 0:
            raise CasgdError(f"must be >= 0, got {self.sleep_after_send_s!r}", field="--sleep-after-send")


def parse_synthetic(text: str) -> tuple[int, int, float]:
    """``"m,n,density"`` -> (m, n, density); one line naming the field when it does not parse."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        if len(parts) != 3:
            raise ValueError
        m, n, d = int(parts[0]), int(parts[1]), float(parts[2])
    except ValueError:
        raise CasgdError(f"expected m,n,density (e.g. 2000,64,0.1), got {text!r}", field="--synthetic") from None
    if m < 1 or n < 1 or not 0 < d <= 1:
        raise CasgdError(f"need m, n >= 1 and 0 < density <= 1, got {text!r}", field="--synthetic")
    return m, n, d


def dataset(cfg: Config) -> ca.Dataset:
    if cfg.data is not None:
        return ca.load_libsvm(cfg.data)
    m, n, d = cfg.synthetic
    return ca.synthetic(int(m), int(n), float(d), cond=cfg.cond, seed=cfg.seed)


def check_sizes(cfg: Config, data: ca.Dataset) -> None:
    m, n = data.shape
    if cfg.ranks > n:
        raise CasgdError(f"{cfg.ranks} ranks for {n} features: each rank needs at least one", field="--ranks")
    if cfg.b > m:
        raise CasgdError(f"batch {cfg.b} is larger than the {m} samples", field="--b")


# --- the model --------------------------------------------------------------------------------------

def step_sizes(method: str, iters: int, s: int) -> list[int]:
    """Iterations per communication step: [1] * H for SGD, s ... s, H mod s for CA-SGD."""
    if method == "sgd" or s == 1:
        return [1] * iters
    return [s] * (iters // s) + ([iters % s] if iters % s else [])


def allreduce_words(method: str, iters: int, b: int, s: int) -> list[int]:
    """Words of each allreduce: b for SGD; kb(kb+1)/2 + kb for a CA-SGD step of k iterations."""
    if method == "sgd":
        return [b] * iters
    return [k * b * (k * b + 1) // 2 + k * b for k in step_sizes(method, iters, s)]


def comm_counts(method: str, iters: int, b: int, s: int, p: int, rank: int = 0) -> tuple[int, int, int, int]:
    """(words_sent, words_recv, msgs_sent, msgs_recv) of ``rank``: its allreduces as the wrapper counts them."""
    from targets.mpi import collective_cost

    tot = [0, 0, 0, 0]
    for w in allreduce_words(method, iters, b, s):
        for i, v in enumerate(collective_cost("allreduce", p, w, rank)):
            tot[i] += v
    return tuple(tot)


def flops_per_rank(method: str, iters: int, b: int, s: int, n_loc: int, density: float = 1.0) -> float:
    """2 x MACs of the nests each step runs (dense iteration space x ``density`` for the sparse operand)
    plus the inner updates' 2 b^2 k (k - 1) / 2 (CA-SGD) and the sigmoids (b per iteration, counted as one)."""
    total = 0.0
    for k in step_sizes(method, iters, s):
        nests = ca.kernel_nests(k * b, n_loc)
        names = ("matvec", "tmatvec") if method == "sgd" else ("gram", "matvec", "tmatvec")
        total += 2.0 * density * sum(nests[nm].macs for nm in names)
        total += b * b * k * (k - 1) + b * k
    return total


def model_seconds(method: str, iters: int, b: int, s: int, p: int, n: int, density: float, machine: dict,
                  rank: int = 0) -> float:
    """alpha x messages + beta x words + gamma x flops of ``rank`` (``targets.mpi.model.seconds``)."""
    from targets.mpi.model import Machine, seconds

    c0, c1 = ca.column_block(n, p, rank)
    counts = {"allreduce": comm_counts(method, iters, b, s, p, rank)}
    m = Machine(alpha=machine["alpha"], beta=machine["beta"], gamma=machine["gamma"])
    return seconds(counts, m, flops_per_rank(method, iters, b, s, c1 - c0, density))["total"]


def best_s(iters: int, b: int, p: int, n: int, density: float, machine: dict,
           candidates=S_CANDIDATES) -> dict:
    """The modelled best s of ``candidates`` for H iterations, its speedup over SGD, and the crossover:
    the smallest s above the best whose CA-SGD is no faster than SGD (None when every candidate pays)."""
    sgd_t = model_seconds("sgd", iters, b, 1, p, n, density, machine)
    times = {s: model_seconds("casgd", iters, b, s, p, n, density, machine) for s in candidates}
    best = min(times, key=lambda s: (times[s], s))
    cross = next((s for s in sorted(times) if s > best and times[s] >= sgd_t), None)
    return {"best_s": best, "speedup": sgd_t / times[best], "crossover_s": cross,
            "sgd_seconds": sgd_t, "casgd_seconds": {str(s): t for s, t in times.items()}}


# --- the ranks ----------------------------------------------------------------------------------------

def rank_main(ranks, config: dict) -> dict:
    """One rank: its column block, the shared samples, the method(s) (each in its own counted phase)."""
    cfg = Config(**{**config, "synthetic": tuple(config["synthetic"]) if config.get("synthetic") else None})
    ranks.ledger.sleep_after_send_s = cfg.sleep_after_send_s
    data = dataset(cfg)
    m, n = data.shape
    c0, c1 = ca.column_block(n, ranks.size, ranks.rank)
    a_loc = ca.local_block(data.a, c0, c1)
    batches = ca.batch_indices(m, cfg.b, cfg.iters, cfg.seed)
    kern = ca.Kernels(cfg.kernels, cfg.threads)
    methods = ["sgd", "casgd"] if cfg.method == "casgd" and cfg.check else [cfg.method]
    out = {"rank": ranks.rank, "c0": c0, "c1": c1, "x": {}, "seconds": {}}
    for meth in methods:
        x = np.zeros(c1 - c0)
        ranks.barrier()
        t0 = time.perf_counter()
        with ranks.phase(meth):
            if meth == "sgd":
                ca.sgd(ranks, a_loc, data.y, x, batches, cfg.eta, kern)
            else:
                ca.casgd(ranks, a_loc, data.y, x, batches, cfg.eta, cfg.s, kern)
        out["seconds"][meth] = time.perf_counter() - t0
        out["x"][meth] = x.tolist()
    out["traffic"] = {k: v.to_dict() for k, v in ranks.traffic().items()}
    return out


def prepare_kernels(cfg: Config, data: ca.Dataset) -> list:
    """Schedule and compile (both cached on disk) every kernel the ranks will call: (nest, mapping, arch)."""
    if cfg.kernels != "cosa":
        return []
    n = data.shape[1]
    n_locs = sorted({c1 - c0 for c0, c1 in (ca.column_block(n, cfg.ranks, r) for r in range(cfg.ranks))})
    methods = {"sgd", cfg.method} if cfg.check else {cfg.method}
    out = []
    for meth in sorted(methods):
        for k in sorted(set(step_sizes(meth, cfg.iters, cfg.s))):
            kinds = ("matvec", "tmatvec") if meth == "sgd" else ("gram", "matvec", "tmatvec")
            for n_loc in n_locs:
                for kind in kinds:
                    nest, mapping, arch, _ = ca.scheduled(kind, k * cfg.b, n_loc, data.sparse)
                    if all(nest.name != o[0].name for o in out):
                        out.append((nest, mapping, arch))
    return out


def explain(cfg: Config) -> str:
    """Every kernel of the run with the mapping the CoSA MIP chose for it, as a tiled loop nest."""
    from mappings.pretty import format_loopnest

    cfg = Config(**{**asdict(cfg), "kernels": "cosa"})
    cfg.validate()
    data = dataset(cfg)
    check_sizes(cfg, data)
    parts = []
    for nest, mapping, arch in prepare_kernels(cfg, data):
        dims = ", ".join(f"{d}={v}" for d, v in nest.dims.items())
        kind = "CSR SpMM" if data.sparse else nest.op.get("spec", "")
        parts.append(f"# {nest.name} ({kind}; {dims}) on {arch.name}\n{format_loopnest(mapping, nest, arch)}")
    return "\n\n".join(parts) + "\n"


def sklearn_reference(data: ca.Dataset, seed: int = 0) -> dict:
    """Training loss and accuracy of scikit-learn's ``SGDClassifier(loss="log_loss")`` and
    ``LogisticRegression`` (defaults otherwise; no intercept, as our model) on the same data;
    {} when scikit-learn is missing."""
    try:
        from sklearn.linear_model import LogisticRegression, SGDClassifier
    except ImportError:
        return {}
    out = {}
    for name, clf in (("SGDClassifier", SGDClassifier(loss="log_loss", fit_intercept=False, random_state=seed)),
                      ("LogisticRegression", LogisticRegression(fit_intercept=False, max_iter=5000))):
        loss, acc = ca.loss_accuracy(data.a, data.y, clf.fit(data.a, data.y).coef_.ravel())
        out[name] = {"loss": loss, "accuracy": acc}
    return out


def rank_many(ranks, configs: list) -> list:
    """``rank_main`` for each config in turn (counters reset between them): many runs, one launch."""
    out = []
    for config in configs:
        ranks.reset()
        out.append(rank_main(ranks, config))
    return out


def run(cfg: Config, machine: dict | None = None, reference: bool = False) -> dict:
    """Launch the ranks, assemble x, compare with SGD and the model: the keys of ``cosa run casgd --json``."""
    return run_many([cfg], machine, reference)[0]


def run_many(cfgs: list, machine: dict | None = None, reference: bool = False, keep_x: bool = False,
             launch_kw: dict | None = None) -> list:
    """``run`` for several configs on the same data and rank count, in one launch of the ranks
    (``keep_x``: each result's ``x`` too, the final iterate as a list; ``launch_kw``: more keyword
    arguments of ``targets.mpi.launch``, e.g. the ranks' hosts on a network path)."""
    from targets.mpi import launch

    if not cfgs or any(c.ranks != cfgs[0].ranks or c.data != cfgs[0].data or c.synthetic != cfgs[0].synthetic
                       or c.cond != cfgs[0].cond for c in cfgs):
        raise CasgdError("run_many needs configs on one data set and one rank count", field="configs")
    for cfg in cfgs:
        cfg.validate()
    data = dataset(cfgs[0])
    for cfg in cfgs:
        check_sizes(cfg, data)
        prepare_kernels(cfg, data)
    t0 = time.perf_counter()
    res = launch("algorithms.casgd_run:rank_many", cfgs[0].ranks, {"configs": [asdict(c) for c in cfgs]},
                 timeout_s=max(c.timeout_s for c in cfgs), **(launch_kw or {}))
    wall = time.perf_counter() - t0
    ref = sklearn_reference(data, cfgs[0].seed) if reference else None
    out = [summarise(cfg, data, sorted((r[i] for r in res), key=lambda r: r["rank"]), machine, ref, wall)
           for i, cfg in enumerate(cfgs)]
    if not keep_x:
        for d in out:
            d.pop("x")
    return out


def summarise(cfg: Config, data: ca.Dataset, res: list, machine: dict | None, ref: dict | None,
              wall: float, candidates=S_CANDIDATES) -> dict:
    """One config's result from every rank's return value (rank order)."""
    machine = dict(machine or CLUSTER_LIKE)
    m, n = data.shape
    xs = {meth: np.concatenate([np.asarray(r["x"][meth]) for r in res]) for meth in res[0]["x"]}
    x = xs[cfg.method]
    loss, acc = ca.loss_accuracy(data.a, data.y, x)
    diff = None
    if "sgd" in xs and cfg.method == "casgd":
        diff = float(np.linalg.norm(x - xs["sgd"]) / max(np.linalg.norm(xs["sgd"]), 1e-300))
    elif cfg.method == "sgd":
        diff = 0.0
    counted = {meth: [tuple(r["traffic"].get(meth, {}).get(k, 0) for k in COUNTED) for r in res] for meth in xs}
    modelled = {meth: [comm_counts(meth, cfg.iters, cfg.b, cfg.s, cfg.ranks, r) for r in range(cfg.ranks)]
                for meth in xs}
    mine = counted[cfg.method]
    out = {
        "method": cfg.method, "data": data.name, "m": m, "n": n, "density": data.density, "ranks": cfg.ranks,
        "b": cfg.b, "s": cfg.s, "eta": cfg.eta, "iters": cfg.iters, "seed": cfg.seed, "kernels": cfg.kernels,
        "loss": loss, "accuracy": acc, "iterate_diff_vs_sgd": diff,
        "words_per_rank": [c[1] for c in mine], "words_sent_per_rank": [c[0] for c in mine],
        "messages_per_rank": [c[3] for c in mine],
        "model_words_per_rank": [c[1] for c in modelled[cfg.method]],
        "model_messages_per_rank": [c[3] for c in modelled[cfg.method]],
        "counts_match": all(counted[k] == [tuple(c) for c in modelled[k]] for k in xs),
        "model_seconds": model_seconds(cfg.method, cfg.iters, cfg.b, cfg.s, cfg.ranks, n, data.density, machine),
        "machine": machine,
        "seconds": max(r["seconds"][cfg.method] for r in res),
        "seconds_by_method": {k: max(r["seconds"][k] for r in res) for k in xs},
        "wall_seconds": wall,
        "sleep_after_send_s": cfg.sleep_after_send_s,
        "x": x.tolist(),
        **{k: v for k, v in best_s(cfg.iters, cfg.b, cfg.ranks, n, data.density, machine, candidates).items()
           if k in ("best_s", "crossover_s")},
    }
    if ref is not None:
        out["sklearn"] = ref
    return out
