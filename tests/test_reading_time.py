"""About how long each notebook takes a reader who runs the cells and does both exercises: at most 45 minutes.

Estimated as prose words at 200 a minute, code lines at 10 a minute, and 10 minutes an exercise; a
`## Going further` section (optional, at the end) is not counted.
"""
import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb"))
LIMIT_MINUTES = 45


def minutes(path: Path) -> float:
    words = lines = exercises = 0
    for cell in json.loads(path.read_text())["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and text.lstrip().startswith("## Going further"):
            break
        if cell["cell_type"] == "markdown":
            words += len(re.findall(r"\w+", text))
            exercises += text.lstrip().startswith("## Your turn")
        else:
            lines += sum(1 for line in text.splitlines() if line.strip() and not line.strip().startswith("#"))
    return words / 200 + lines / 10 + 10 * exercises


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_notebook_reads_in_45_minutes(path):
    estimate = minutes(path)
    print(f"{path.name}: about {estimate:.0f} minutes")
    assert estimate <= LIMIT_MINUTES, f"about {estimate:.0f} minutes; move advanced material to '## Going further'"
