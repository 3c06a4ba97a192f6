"""The sources' words, kept word for word where the workshop quotes them, and no claim the sources do not make.

The quotations are the ones the project's design guide gives for its seeds (the NIM workshop's part 9 and H Company's
Holo3 "Structured outputs" page); a change to any of them here is a change to what the seeds say.
"""
import json
import re

import pytest

from helpers.contract import FALLBACK_ANSWER, format_error
from helpers.ladder import ANSWER_CONTRACT, repair_messages
from helpers.runtime.paths import ROOT

REPAIR_SYSTEM = "You fix malformed JSON. Return ONLY a valid JSON object."
REPAIR_USER = "Problems: {errors}. Preserve all facts. Original: {raw}. Return corrected JSON only."
FALLBACK = "I couldn't produce a valid structured response. Please ask again."
CATALOG_CAVEAT = "not dependable"
HOLO3_EXAMPLE = ('{"note": "Submit succeeded; receipt URL is /orders/8421.", "thought": "Recording the receipt URL '
                 'before navigating away.", "tool_call": {"tool_name": "click", "element": "Continue button at the '
                 'bottom right", "x": 932, "y": 880}}')
# Said of Holo3 or H Company in earlier text, found in no H Company page read for this workshop.
UNSOURCED = ("degrades accuracy", "degrades\naccuracy", "cookbooks used")


def reader_text() -> dict[str, str]:
    """Every notebook's cells and every page a reader reads, by name."""
    pages = {p.name: p.read_text(encoding="utf-8") for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        pages[path.name] = "\n".join("".join(cell["source"]) for cell in cells)
    return pages


def test_the_repair_request_is_the_nim_workshops_word_for_word():
    system, user = repair_messages("RAW", ["E1", "E2"], ANSWER_CONTRACT)
    assert system["content"] == REPAIR_SYSTEM
    assert user["content"] == REPAIR_USER.format(errors="E1; E2", raw="RAW")


def test_the_fallback_is_the_nim_workshops_word_for_word():
    assert FALLBACK_ANSWER == FALLBACK
    assert format_error("valid_json")["answer"] == FALLBACK


def test_the_holo3_example_is_quoted_verbatim():
    assert HOLO3_EXAMPLE in reader_text()["02_pydantic_step_union.ipynb"]


@pytest.mark.parametrize("name,text", sorted(reader_text().items()))
def test_the_catalog_caveat_is_quoted_as_the_seed_words_it(name, text):
    quoted = re.findall(r'"([^"\n]*dependable[^"\n]*)"', text)
    assert all(q == CATALOG_CAVEAT for q in quoted), (name, quoted)


@pytest.mark.parametrize("name,text", sorted(reader_text().items()))
def test_no_page_repeats_a_claim_no_source_makes(name, text):
    assert not [claim for claim in UNSOURCED if claim in text], name
