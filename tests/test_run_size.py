"""helpers.runtime.run_size: WORKSHOP_QUICK shortens the long measurements, and nothing else does."""
from __future__ import annotations

import pytest

from helpers.runtime import run_size


@pytest.mark.parametrize("value", ["1", "yes", "TRUE"])
def test_quick_runs_when_asked(monkeypatch, value):
    monkeypatch.setenv("WORKSHOP_QUICK", value)
    assert run_size.quick() and run_size.sized(6, quick_run=15) == 15


@pytest.mark.parametrize("value", [None, "0", "no", ""])
def test_full_runs_otherwise(monkeypatch, value):
    monkeypatch.setattr(run_size, "setting", lambda name: value)
    assert not run_size.quick() and run_size.sized(6, quick_run=15) == 6


def test_the_test_run_asks_for_short_runs():
    """Instant. The root conftest.py sets WORKSHOP_QUICK for every pass over the notebooks, nbval's included."""
    assert run_size.quick() and run_size.sized(6, quick_run=15) == 15
