"""Every notebook opens the same way, can be opened in Colab, has exercises with checks, and ends with a recap."""
import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def first_code_cell(path: Path) -> str:
    return next(source(c) for c in cells(path) if c["cell_type"] == "code")


def test_there_is_a_start_here_notebook():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_opens_with_the_same_setup_cell(path):
    assert first_code_cell(path) == first_code_cell(NOTEBOOKS[0])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_badge_points_at_this_notebook(path):
    top = source(cells(path)[0])
    assert "colab.research.google.com/github/" in top and f"/notebooks/{path.name})" in top


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_have_check_cells_and_a_recap(path):
    headings = [source(c) for c in cells(path) if c["cell_type"] == "markdown"]
    assert sum("## Your turn" in h for h in headings) >= 2
    assert sum("check(" in source(c) for c in cells(path) if c["cell_type"] == "code") >= 2
    assert any(h.lstrip().startswith("## Recap") for h in headings)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_executed_without_errors(path):
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    assert all(c["execution_count"] for c in code), "commit the notebook executed, top to bottom"
    counts = [c["execution_count"] for c in code]
    assert counts == sorted(counts)
    assert not any(o["output_type"] == "error" for c in code for o in c["outputs"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_hides_its_result_with_a_trailing_semicolon(path):
    # nbval runs cells without storing history, so IPython does not see the ';' and shows the result anyway:
    # the fresh run then has an output the committed notebook lacks, and nbval fails the cell.
    code = [source(c).rstrip() for c in cells(path) if c["cell_type"] == "code"]
    assert not [s.splitlines()[-1] for s in code if s.endswith(";")]
