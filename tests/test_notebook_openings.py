"""Each notebook's opening works from any working directory: its setup cell, then every cell up to the first
one that reads the data folder, run in a kernel started in an empty temporary folder.

After a Colab runtime restart the working directory is /content, not the clone's notebooks/ folder, so a
notebook that builds its data path from the working directory breaks there; this catches it here.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kernel_runner import Kernel

pytestmark = pytest.mark.integration  # the setup cell connects to the test run's embedded server

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# A cell that reads the workshop's data: the folder itself, or a helper that loads a file from it.
READS_DATA = re.compile(r"\bDATA\b|\bload_(tasks|evals|example_steps)\(|knowledge_base\.json")
DATA_CHECK = "from helpers.runtime.paths import DATA\nassert (DATA / 'knowledge_base.json').is_file(), DATA\nprint(DATA)"


def opening(path: Path) -> list[str]:
    """The code cells from the setup cell up to and including the first that reads data (or just the setup cell)."""
    code = ["".join(cell["source"]) for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
    last = next((i for i, source in enumerate(code) if i and READS_DATA.search(source)), 0)
    return code[: last + 1]


def test_the_data_cells_are_recognised():
    # Four notebooks (01 to 04) load data near the top; if this drops, READS_DATA has missed a new spelling.
    assert sum(len(opening(path)) > 1 for path in NOTEBOOKS) >= 4


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_opening_runs_from_another_folder(path, tmp_path, server_url):
    with Kernel(cwd=tmp_path) as kernel:
        for source in opening(path):
            kernel.run(source)
        assert kernel.run(DATA_CHECK).strip() == str(ROOT / "data")
