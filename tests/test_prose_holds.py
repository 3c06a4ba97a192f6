"""Prose that holds for any run: a notebook's markdown quotes no figure that only one run produced.

A cell's output that depends on the run (a trace, a reply, a count) changes on the next machine, the next
package version, the next prompt cache. The markdown then says what to look for, and the code prints the
specifics. The rule, as a test: a number in a markdown cell (digits, or the words two to twelve) that the outputs
of the code cells above it show, but that no code of the notebook and no file of `data/`, `helpers/` or `docs/`
holds, is a figure only that run produced. A figure the code sets (`N = 4`), a recorded result (a file under
`data/`, a measurement in docs/results.md), a fact of the workshop (`helpers/`) and the output of a cell that nbval
compares on every run (tagged `nbval-check-output`: the same on every run) stay in the prose.
"""
from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
WORDS = {word: str(value) for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split()) if value >= 2}
WORD = re.compile(rf"\b({'|'.join(WORDS)})\b", re.IGNORECASE)


def numbers(text: str) -> set[str]:
    """Every number the text holds, commas dropped (47,900 is 47900), with two to twelve spelled out as digits."""
    found = {match.replace(",", "").rstrip(",") for match in NUMBER.findall(text)}
    return found | {WORDS[word.lower()] for word in WORD.findall(text)}


def source(cell: dict) -> str:
    return "".join(cell["source"])


def output_text(cell: dict) -> str:
    parts = []
    for output in cell.get("outputs", []):
        parts.append("".join(output.get("text", "")))
        for kind in ("text/plain", "text/markdown", "text/html"):
            parts.append("".join(output.get("data", {}).get(kind, "")))
    return "\n".join(parts)


@cache
def workshop_numbers() -> frozenset[str]:
    """The numbers the workshop itself holds: its data (recorded results included), its helpers and its docs."""
    found: set[str] = set()
    for folder in ("data", "helpers", "docs"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in {".py", ".json", ".jsonl", ".md", ".txt"}:
                found |= numbers(path.read_text(encoding="utf-8", errors="replace"))
    return frozenset(found)


def single_run_figures(cells: list[dict], known: frozenset[str]) -> dict[int, list[str]]:
    """Markdown cell index -> the figures it quotes that only the outputs above it show."""
    in_code = set().union(*(numbers(source(c)) for c in cells if c["cell_type"] == "code"))
    shown: set[str] = set()
    found = {}
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            if "nbval-check-output" not in cell.get("metadata", {}).get("tags", []):
                shown |= numbers(output_text(cell))
        elif quoted := sorted(numbers(source(cell)) & shown - in_code - known):
            found[index] = quoted
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_markdown_quotes_no_figure_only_one_run_produced(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = single_run_figures(cells, workshop_numbers())
    assert not found, ("say what to look for, and let the code print the figures: markdown cell -> figures "
                       f"only the run above showed: {found}")


def test_the_rule_sees_a_run_figure_and_spares_the_codes_own():
    """The check itself: 'step 47' and 'five of the eight' quoted from an output are caught; N set in the code,
    a figure the workshop's files hold and the output of a cell nbval compares are not."""
    cells = [{"cell_type": "code", "source": ["N = 8\n"], "outputs": [
                 {"output_type": "stream", "text": ["overruled at steps [0, 47]; 5 of 8 closed; 49,152 tokens\n"]}]},
             {"cell_type": "markdown", "source": ["At step 47 the mask won; five of the eight closed; N = 8; "
                                                  "49,152 tokens."]}]
    assert single_run_figures(cells, frozenset({"49152"})) == {1: ["47", "5"]}
    assert single_run_figures(cells, frozenset()) == {1: ["47", "49152", "5"]}
    cells[0]["metadata"] = {"tags": ["nbval-check-output"]}
    assert single_run_figures(cells, frozenset()) == {}
