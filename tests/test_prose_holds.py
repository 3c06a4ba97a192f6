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

Two more kinds, which a reading review found that the numbers missed:

- a sentence that states what the model or the grammar did in a run, as a fact ("Every step is valid", "the grammar
  completes it", "the model copied its example") holds for one run only: it asks (a question), hedges (may, often,
  if, whether, look for...) or leaves the telling to the code;
- a claim that a source documents or trains something ("NIM's documentation says", "Holo3 is trained to") is quoted
  from the source, or linked; the sources the workshop holds are the Holo3 page, the Layer 2 article and the NIM
  workshop's post, and a thing they do not say is the workshop's own, and says so.
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


SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]|$)", re.MULTILINE)
# What a run showed, stated as a fact: every step valid, the model or the grammar having done something.
RUN_CLAIM = re.compile(r"\b(?:every|each|all|no) (?:step|reply|replies|answer|answers|token|tokens|call|calls) "
                       r"(?:is|are|was|were) (?:valid|invalid|right|wrong|good|correct|accurate)\b|"
                       r"\bthe (?:model|grammar)(?: then)? (?:took|picks|picked|chose|completes|completed|"
                       r"copied|copies|answered|aborted|clicked|typed|wrote)\b", re.IGNORECASE)
HEDGE = re.compile(r"\?|\b(?:may|might|can|could|often|usually|rarely|sometimes|tends?|if|whether|look|read|"
                   r"watch|check|compare|see|try|likely|perhaps)\b", re.IGNORECASE)


def joined(markdown: str) -> str:
    """Markdown's wrapped lines joined, as a reader reads them: a sentence ends at its stop, not at a line break;
    a blank line, a list item, a table row or a heading still starts anew."""
    return re.sub(r"\n(?![\n\-*|#>]|\d+\. )", " ", markdown)


def run_claims(cells: list[dict]) -> dict[int, list[str]]:
    """Markdown cell index -> its sentences that state a run's result as a fact, unhedged."""
    found = {}
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        claims = [sentence.strip() for sentence in SENTENCE.findall(joined(prose(cell)))
                  if RUN_CLAIM.search(sentence) and not HEDGE.search(sentence)]
        if claims:
            found[index] = claims
    return found


# A source said to document or train something, or a server's engine named, without a quote or a link beside it.
SOURCE_CLAIM = re.compile(r"\b(?:NIM|Holo3|H Company|vLLM)(?:'s)? (?:own )?(?:docs|documentation) (?:says?|recommends?|"
                          r"tells?|warns?)\b|\bNIM documents\b|\b(?:Holo3|the model) (?:itself )?is trained to\b|"
                          r"\bthe engine behind NIM\b", re.IGNORECASE)
BACKED = re.compile(r'"[^"]{8,}"|\]\((?:https?://|\.\./)')


def unbacked_source_claims(cells: list[dict]) -> dict[int, list[str]]:
    """Markdown cell index -> its sentences that say what a source documents, without quoting it or linking it."""
    found = {}
    for index, cell in enumerate(cells):
        if cell["cell_type"] != "markdown":
            continue
        claims = [sentence.strip() for sentence in SENTENCE.findall(source(cell))
                  if SOURCE_CLAIM.search(sentence) and not BACKED.search(sentence)]
        if claims:
            found[index] = claims
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_sentence_states_one_runs_result_as_a_fact(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = run_claims(cells)
    assert not found, f"ask, hedge, or let the code print it: markdown cell -> one run's result as a fact: {found}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_what_a_source_says_is_quoted_or_linked(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    found = unbacked_source_claims(cells)
    assert not found, f"quote the source, link it, or say it is the workshop's own: {found}"


def test_the_new_rules_see_what_the_review_found_and_spare_a_hedge():
    """The checks themselves, on the review's own sentences and on hedged or quoted ones."""
    said = [{"cell_type": "markdown", "source": [text]} for text in (
        "Every step is valid: is any good?", "Every step is valid. Is any good?",
        "Where the grammar left a short list, the model chose: it picks the first token, the grammar completes it.",
        "Check whether every step is valid.", "The model may have copied its example.")]
    assert run_claims(said) == {1: ["Every step is valid."],
                                2: ["Where the grammar left a short list, the model chose: it picks the first "
                                    "token, the grammar completes it."]}
    sources = [{"cell_type": "markdown", "source": [text]} for text in (
        "NIM's documentation says to validate client-side anyway.", "Holo3 itself is trained to point at pixels.",
        "xgrammar, the engine behind NIM's `guided_json`, closes objects.",
        'The NIM workshop: "validate every reply client-side, even when the server guides it".',
        "NIM's docs say so ([NIM](https://docs.nvidia.com/nim/)).")]
    assert sorted(unbacked_source_claims(sources)) == [0, 1, 2]
