"""cosa serve simulate|real: JSON keys, the plot, bad input (one line, exit 2), and real shard copies."""

import json
import time

import numpy as np

import pytest

from algorithms.serving import ServeConfig, ServingError, run, summary
from algorithms.serving.arrivals import generate
from algorithms.serving.exec_cost import fixed
from algorithms.serving.real import Pools, RealSwapper, calibrate, paced_copy, shard_ranges, sweep
from cosa.cli import main

KEYS = {"mean_latency_s", "p50_latency_s", "p95_latency_s", "p99_latency_s", "mean_swap_s", "swaps", "hit_rate",
        "breakdown"}


def test_simulate_json_keys_and_plot(capsys, tmp_path):
    png = tmp_path / "cdf.png"
    rc = main(["serve", "simulate", "--models", "3", "--max-loaded", "2", "--tp", "2", "--pp", "2", "--cv", "4",
               "--rates", "1,0.5,0.25", "--seconds", "60", "--seed", "3", "--exec-s", "0.1", "--json",
               "--plot", str(png)])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert KEYS <= set(d) and set(d["breakdown"]) == {"swap_s", "queue_s", "execute_s"}
    assert d["mean_swap_s"] == pytest.approx(26e9 / (4 * 25e9))
    assert d["swaps"] > 0 and 0 < d["hit_rate"] < 1
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_simulate_model_bytes_and_link(capsys):
    assert main(["serve", "simulate", "--models", "2", "--max-loaded", "1", "--model-bytes", "10GB", "--link-gbps",
                 "5", "--rates", "1,1", "--seconds", "30", "--exec-s", "0.05", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["mean_swap_s"] == pytest.approx(2.0)


@pytest.mark.parametrize("args, word", [
    (["--rates", "1,-2,1"], "rates[1]"), (["--cv", "0"], "cv"), (["--cv", "-1"], "cv"),
    (["--models", "2", "--max-loaded", "3", "--rates", "1,1"], "max_loaded"), (["--rates", "1,2"], "rates"),
    (["--rates", "1,x,2"], "--rates"), (["--model-bytes", "lots"], "--model-bytes"), (["--tp", "0"], "tp")])
def test_simulate_bad_input(capsys, args, word):
    assert main(["serve", "simulate", "--exec-s", "0.1", *args]) == 2
    err = capsys.readouterr().err.strip()
    assert word in err and "\n" not in err and "Traceback" not in err


def test_real_bad_input(capsys):
    assert main(["serve", "real", "--shards", "0,2"]) == 2
    assert main(["serve", "real", "--models", "2", "--max-loaded", "3", "--rates", "1,1"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 2


def test_shard_ranges_cover():
    for n, s in ((1000, 3), (64, 4), (1 << 20, 4), (5, 1)):
        r = shard_ranges(n, s)
        assert r[0][0] == 0 and r[-1][1] == n and len(r) <= s
        assert all(a < b and (a % 64 == 0) for a, b in r)
        assert all(r[i][1] == r[i + 1][0] for i in range(len(r) - 1))


def test_real_pools_copy_and_engine():
    mb = 1 << 20
    with Pools(3, 2, mb, workers=2) as pools:
        for s in (1, 2):
            pools.copy(2, 1, s)
            assert pools.holds(2, 1) and not pools.holds(1, 1)
        cal = calibrate(pools, repeats=2)
        assert cal.link_gbps > 0 and cal.host_gbps > 0 and cal.latency_s >= 0
        times = sweep(pools, (1, 2), repeats=2)
        assert all(len(t) == 2 and min(t) > 0 for t in times.values())
        cfg = ServeConfig(models=3, max_loaded=2, tp=2, model_bytes=float(mb), rates=(4.0, 2.0, 2.0), seconds=3)
        swapper = RealSwapper(pools, 2, (0, 1))
        res = run(cfg, generate(cfg.rates, cfg.cv, cfg.seconds, cfg.seed), fixed(0.05), swapper)
        assert res.swaps and summary(res)["mean_swap_s"] > 0
        assert all(pools.holds(m, slot) for m, slot in swapper.slot_of.items())
        assert len(swapper.slot_of) == 2


def test_real_cli_json(capsys):
    assert main(["serve", "real", "--model-mib", "2", "--shards", "1,2", "--repeats", "2", "--seconds", "2",
                 "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert {"link_gbps", "latency_s", "host_gbps"} <= set(d["calibration"])
    assert [r["shards"] for r in d["rows"]] == [1, 2]
    assert all(r["resident_bytes_match"] and r["measured_s"] > 0 for r in d["rows"])


def test_gpu_copies_where_present():
    from algorithms.serving import gpu

    if not gpu.available():
        pytest.skip("no CuPy or no CUDA GPU")
    t = gpu.measure_h2d(8 << 20, 2, repeats=2)
    assert len(t) == 2 and min(t) > 0


def test_paced_links_never_beat_their_pace():
    src = (np.arange(3 << 20) % 7).astype(np.uint8)
    dst = np.zeros_like(src)
    t0 = time.perf_counter()
    paced_copy(dst, src, 0.3)
    assert time.perf_counter() - t0 >= src.size / 0.3e9 and np.array_equal(dst, src)
    mb = 4 << 20
    with Pools(2, 1, mb, workers=2, link_limit_gbps=0.2) as pools:
        t1, t2 = pools.copy(1, 0, 1), pools.copy(0, 0, 2)
        assert pools.holds(0, 0)
        assert t1 >= mb / 0.2e9 and t2 >= (mb / 2) / 0.2e9       # the law's lower bound per shard count
    with pytest.raises(ServingError):
        Pools(2, 1, mb, workers=1, link_limit_gbps=0.0)
