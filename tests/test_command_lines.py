"""The benchmarks' command lines do what their help says, and docs/results.md names their output as they print it."""
from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from helpers import compare
from helpers.bench import decoding as decoding_bench
from helpers.bench.decoding import ModeStats, abba, report

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("trials", range(1, 8))
def test_every_mode_runs_each_of_the_seeds_asked_for_once(trials):
    runs = Counter((guided, seed) for seeds, order in abba(trials) for guided in order for seed in seeds)
    assert runs == Counter({(guided, seed): 1 for guided in (False, True) for seed in range(trials)})


def test_the_passes_alternate_the_modes():
    (_, first), (_, second) = abba(4)
    assert first == (False, True) and second == (True, False)


def test_the_trials_flag_states_its_default(capsys):
    with pytest.raises(SystemExit) as stopped:
        decoding_bench.main(["--help"])
    assert stopped.value.code == 0
    assert re.search(r"--trials TRIALS\s+seeds per task and mode, 4 tasks each \(default 10\)", capsys.readouterr().out)


@pytest.mark.parametrize("value", ["0", "-2", "two"])
def test_a_trial_count_below_one_is_refused_in_one_line(capsys, value):
    with pytest.raises(SystemExit) as stopped:
        decoding_bench.main(["--trials", value])
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert stopped.value.code == 2 and "argument --trials" in error and "1 or more" in error


def test_compare_calls_itself_by_the_command_that_runs_it(capsys):
    with pytest.raises(SystemExit):
        compare.main(["--help"])
    assert capsys.readouterr().out.startswith("usage: python -m helpers.compare ")


def test_results_name_the_benchs_rows_as_it_prints_them():
    rows = {line.split(" | ")[0].lstrip("| ") for line in report(ModeStats(), ModeStats(), 0.0).splitlines()[2:]}
    quoted = re.findall(r"bench\.decoding[^`]*` prints as\s+`([^`]+)`", (ROOT / "docs" / "results.md").read_text())
    assert quoted and set(quoted) <= rows
