"""Prose that holds for any run: a notebook's markdown quotes no figure that only one run produced, and no figure
from nowhere.

A cell's output that depends on the run (a trace, a reply, a count) changes on the next machine, the next
package version, the next prompt cache. The markdown then says what to look for, and the code prints the
specifics. Two rules, as tests:

- a number in a markdown cell (digits, or the words two to twelve) that the outputs of the code cells above it
  show is a figure only that run produced, unless the notebook's code sets it (`N = 4`) or it is the output of a
  cell that nbval compares on every run (tagged `nbval-check-output`: the same on every run);
- a measurement in the markdown (a number with a unit: seconds, tokens, bytes, a percentage; or a count "N of M")
  comes from the same notebook's code or from such a checked output.

Either kind stays in the prose when its cell says it is **recorded** and links the page of docs/results.md that
holds it. A number that merely appears somewhere in `data/`, `helpers/` or `docs/` no longer counts as known.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
NUMBER = re.compile(r"(?<![\w.:])\d[\d,]*(?:\.\d+)?(?![\w]|\.\d|:\d)")  # not a clock time, not a version
WORDS = {word: str(value) for value, word in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve".split()) if value >= 2}
# A number word counts as a figure in a count ("five of the eight"); alone it is plain language ("three screens").
WORD = re.compile(rf"\b({'|'.join(WORDS)}) of (?:the )?(?:{'|'.join(WORDS)}|\d+)\b", re.IGNORECASE)


# A software version or a place in a text is a name, not a figure: "vLLM 0.11", "removed in 0.12", "Python 3.13",
# "openai>=1.40", "part 9", "section 5", "notebook 03".
VERSION_BEFORE = re.compile(r"(?:vLLM|NIM(?: for LLMs)?|Python|ipywidgets|IPython|llama-cpp-python|llguidance|openai|"
                            r"pydantic|matplotlib|[Vv]ersions?|[Rr]eleases?|removed in|[<>]=?|==|~=|[Pp]art|[Ss]ections?|"
                            r"[Nn]otebooks?)\s*$")


def numbers(text: str) -> set[str]:
    """Every number the text holds, commas dropped (47,900 is 47900), with two to twelve spelled out as digits where
    they count ("five of the eight"); not a clock time, not a software version, not a place in a text."""
    found = {match[0].replace(",", "").rstrip(",") for match in NUMBER.finditer(text)
             if not VERSION_BEFORE.search(text[max(0, match.start() - 20):match.start()])}
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


UNIT = r"(?:\s?(?:%|s|ms|us|µs|seconds?|minutes?|min|tokens?|bytes?|characters?|KB|MB|GB|tok/s)\b)"
MEASUREMENT = re.compile(rf"(?<![\w.])\d[\d,]*(?:\.\d+)?(?={UNIT})|(?<![\w.])\d[\d,]*(?= of \d)")
RECORDED = re.compile(r"\brecorded\b.*results\.md|results\.md.*\brecorded\b", re.IGNORECASE | re.DOTALL)


def measurements(text: str) -> set[str]:
    """The numbers of the text that measure something: a number with a unit, or the N of "N of M"."""
    return {match.replace(",", "") for match in MEASUREMENT.findall(text)}


CODE_IN_PROSE = re.compile(r"```.*?```|`[^`\n]*`", re.DOTALL)


def prose(cell: dict) -> str:
    """A markdown cell's words, its code (fenced blocks, inline spans) left out: `--seeds 3` is code, not a figure."""
    return CODE_IN_PROSE.sub(" ", source(cell))


def labelled_recorded(cell: dict) -> bool:
    return bool(RECORDED.search(source(cell)))


def checked(cell: dict) -> bool:
    return "nbval-check-output" in cell.get("metadata", {}).get("tags", [])


def single_run_figures(cells: list[dict]) -> dict[int, list[str]]:
    """Markdown cell index -> the figures it quotes that only the outputs above it show."""
    in_code = set().union(*(numbers(source(c)) for c in cells if c["cell_type"] == "code"))
    shown: set[str] = set()
    found = {}
    for index, cell in enumerate(cells):
        if cell["cell_type"] == "code":
            if not checked(cell):
                shown |= numbers(output_text(cell))
        elif not labelled_recorded(cell) and (quoted := sorted(numbers(prose(cell)) & shown - in_code)):
            found[index] = quoted
    return found


def unsourced_measurements(cells: list[dict]) -> dict[int, list[str]]:
    """Markdown cell index -> the measurements it quotes that neither the code nor a checked output holds."""
    known = set().union(*(numbers(source(c)) | (numbers(output_text(c)) if checked(c) else set())
                          for c in cells if c["cell_type"] == "code"))
    return {index: sorted(found) for index, cell in enumerate(cells)
            if cell["cell_type"] == "markdown" and not labelled_recorded(cell)
            and (found := measurements(prose(cell)) - known)}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_markdown_quotes_no_figure_only_one_run_produced(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = single_run_figures(cells)
    assert not found, ("say what to look for, and let the code print the figures: markdown cell -> figures "
                       f"only the run above showed: {found}")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_measurement_in_the_markdown_comes_from_the_notebook_or_is_labelled_recorded(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = unsourced_measurements(cells)
    assert not found, ("a measurement comes from this notebook's code or a checked output, or its cell says it is "
                       f"recorded and links docs/results.md: markdown cell -> measurements from nowhere: {found}")


def test_the_rules_see_a_run_figure_and_a_figure_from_nowhere_and_spare_the_codes_own():
    """The checks themselves: 'step 47' and 'five of the eight' quoted from an output are caught, and so are '39 s
    against 50 s' that nothing printed; N set in the code, the output of a cell nbval compares, and a cell that says
    it is recorded and links results.md are not."""
    run = {"cell_type": "code", "source": ["N = 8\n"], "outputs": [
        {"output_type": "stream", "text": ["overruled at steps [0, 47]; 5 of 8 closed; 49,152 tokens\n"]}]}
    prose = {"cell_type": "markdown", "source": ["At step 47 the mask won; five of the eight closed; N = 8; "
                                                 "49,152 tokens; the short prompt took 39 s against 50 s."]}
    assert single_run_figures([run, prose]) == {1: ["47", "49152", "5"]}
    assert unsourced_measurements([run, prose]) == {1: ["39", "49152", "50"]}
    run["metadata"] = {"tags": ["nbval-check-output"]}
    assert single_run_figures([run, prose]) == {}
    assert unsourced_measurements([run, prose]) == {1: ["39", "50"]}
    quiet = {"cell_type": "markdown", "source": ["Run it with `--seeds 47` in section 5 of part 8; three screens."]}
    assert single_run_figures([run, quiet]) == unsourced_measurements([run, quiet]) == {}
    prose["source"] = [*prose["source"], " (recorded: [results](../docs/results.md#repairs))"]
    assert single_run_figures([run, prose]) == unsourced_measurements([run, prose]) == {}
