"""``cosa arch calibrate cluster``: alpha/beta from a ping-pong, gamma from the local kernel."""

import pytest

pytest.importorskip("mpi4py")

from cosa.cli import main  # noqa: E402
from costmodel import load_arch  # noqa: E402
from targets.mpi.calibrate import fit_alpha_beta  # noqa: E402
from targets.mpi.model import Machine  # noqa: E402


def test_fit_recovers_a_line_and_ignores_one_slow_exchange():
    pts = {w: 3e-6 + 2e-9 * w for w in (1, 8, 64, 512, 4096, 32768, 131072)}
    alpha, beta = fit_alpha_beta(pts)
    assert alpha == pytest.approx(3e-6 + 2e-9 * 8, rel=1e-9) and beta == pytest.approx(2e-9, rel=1e-2)
    pts[32768] *= 50
    assert fit_alpha_beta(pts)[1] == pytest.approx(2e-9, rel=1e-2)


def test_calibrate_cluster_writes_an_arch_the_model_reads(tmp_path, capsys):
    out = tmp_path / "cluster.yaml"
    assert main(["arch", "calibrate", "cluster", "--ranks", "2", "--quick", "-o", str(out)]) == 0
    arch = load_arch(str(out))
    assert arch.params["ranks"] == 2 and arch.levels[0].name == "Network"
    m = Machine.from_arch(arch)
    assert m.alpha > 0 and m.beta > 0 and m.gamma > 0 and m.memory_words > 0
    assert main(["arch", "calibrate", "cluster", "--ranks", "1"]) == 2
    assert "at least 2 ranks" in capsys.readouterr().err
