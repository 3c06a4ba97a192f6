"""docs/arc.png is the picture `python -m helpers.maintainers.arc` draws, and the comparison would see an edit to it.

Pixels, not bytes: another matplotlib release may shade an edge a little differently. Drawn with 3.10 and with 3.11,
the slide differed by more than a quarter of the range in 6 of its 1,440,000 pixels; the smallest edit tried (one
digit of a box's notebooks) moved 133.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread
from PIL import Image

from helpers.maintainers import arc

QUARTER = 64 / 255  # a pixel differs when one of its channels moved by more than this
ALLOWED = 20  # pixels that may differ: antialiasing on another release, never a changed word
REDRAW = "run `.venv/bin/python -m helpers.maintainers.arc` and commit docs/arc.png"


def differing(expected: Path, actual: Path) -> int:
    """How many pixels of `actual` differ from `expected`; every pixel when the sizes differ."""
    a, b = imread(expected), imread(actual)
    if a.shape != b.shape:
        return max(a.size, b.size)
    return int((np.abs(a - b).max(axis=2) > QUARTER).sum())


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    path = tmp_path / "arc.png"
    assert arc.main(["--out", str(path)]) == 0
    return path


def test_the_committed_picture_is_the_one_the_code_draws(fresh):
    assert differing(arc.PICTURE, fresh) <= ALLOWED, REDRAW


def test_the_comparison_sees_one_changed_digit(fresh, tmp_path, monkeypatch):
    repair = arc.LADDER[3]
    assert repair.notebooks == "04"
    monkeypatch.setattr(arc, "LADDER", tuple(dataclasses.replace(box, notebooks="05") if box is repair else box
                                             for box in arc.LADDER))
    edited = tmp_path / "edited.png"
    arc.save(arc.draw(), edited)
    assert differing(fresh, edited) > ALLOWED


def test_the_picture_is_a_16_9_slide_written_the_same_each_time(fresh, tmp_path):
    again = tmp_path / "again.png"
    arc.save(arc.draw(), again)
    committed = Image.open(arc.PICTURE)
    assert committed.size == (1600, 900)
    assert "Software" not in committed.info  # matplotlib's version, otherwise: new bytes with every release
    assert again.read_bytes() == fresh.read_bytes()
