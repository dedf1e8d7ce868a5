"""bench/cpu_transposes.py: the words the model charges per panel width, and the probe it times."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.cpu_transposes import charged_per_word, measure  # noqa: E402


def test_the_model_charges_whole_register_columns_but_four_row_panels_their_words():
    assert [charged_per_word(w) for w in (2, 4, 8, 16, 32)] == [8.0, 1.0, 2.0, 1.0, 1.0]


def test_the_probe_times_each_width():
    got = measure((2, 16), tries=1, hz=1e9)
    assert set(got) == {2, 16} and all(v > 0 for v in got.values())
