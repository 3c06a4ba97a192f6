"""The sources' words, kept word for word where the workshop quotes them, and no claim the sources do not make.

The quotations are the ones the project's design guide gives for its seeds (the NIM workshop's part 9 and H Company's
Holo3 "Structured outputs" page); a change to any of them here is a change to what the seeds say.
"""
import json
import re
from dataclasses import replace

import pytest

from helpers.contract import FALLBACK_ANSWER, format_error
from test_assistant import completion  # pytest puts tests/ on the path
from helpers.ladder import ANSWER_CONTRACT, model_repair, repair_messages
from helpers.runtime.profiles import PROFILES
from helpers.runtime.paths import ROOT
from helpers.steps import DOCS_EXAMPLE

# The source's repair request (its code, as part 9 prints it).
REPAIR_SYSTEM = "/no_think\n\nYou fix malformed JSON. Return ONLY a valid JSON object."
REPAIR_USER = 'f"Problems: {errors}. Preserve all facts. Original:\\n{raw_text}\\n\\nReturn corrected JSON only."'

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
    """On a Nemotron backend the request is the source's exactly, `/no_think` included; elsewhere the same without
    the `/no_think` that only Nemotron models read."""
    raw_text, errors = "RAW", ["E1", "E2"]
    expected_user = eval(REPAIR_USER)  # the source's own f-string, on the source's own names
    sent = []

    class Completions:
        def create(self, **request):
            sent.append(request["messages"])
            return completion("{}", None)

    for model, system in (("nvidia/nemotron-nano-9b-v2", REPAIR_SYSTEM), ("meta/llama-3.1-8b-instruct",
                                                                         REPAIR_SYSTEM.removeprefix("/no_think\n\n"))):
        conn = type("Conn", (), {"model": model, "profile": replace(PROFILES["nvidia"], model=model),
                                 "client": type("Client", (), {"chat": type("Chat", (), {
                                     "completions": Completions()})})})
        model_repair(conn)(repair_messages(raw_text, errors, ANSWER_CONTRACT))
        assert sent[-1] == [{"role": "system", "content": system}, {"role": "user", "content": expected_user}]


def test_the_source_holds_the_quoted_repair_request():
    source = (ROOT.parent / "shared" / "sources" / "nim-workshop-part9-structured-outputs.txt")
    if not source.exists():
        pytest.skip("the seed sources are not beside this checkout")
    text = source.read_text(encoding="utf-8")
    assert json.dumps(REPAIR_SYSTEM)[1:-1] in text and REPAIR_USER in text


def test_the_fallback_is_the_nim_workshops_word_for_word():
    assert FALLBACK_ANSWER == FALLBACK
    assert format_error("valid_json")["answer"] == FALLBACK


def test_the_holo3_example_is_quoted_verbatim():
    assert HOLO3_EXAMPLE in reader_text()["02_pydantic_step_union.ipynb"]
    assert json.dumps(DOCS_EXAMPLE) == HOLO3_EXAMPLE  # the step notebook 02 puts in the model's prompt


@pytest.mark.parametrize("name,text", sorted(reader_text().items()))
def test_the_catalog_caveat_is_quoted_as_the_seed_words_it(name, text):
    quoted = re.findall(r'"([^"\n]*dependable[^"\n]*)"', text)
    assert all(q == CATALOG_CAVEAT for q in quoted), (name, quoted)


@pytest.mark.parametrize("name,text", sorted(reader_text().items()))
def test_no_page_repeats_a_claim_no_source_makes(name, text):
    assert not [claim for claim in UNSOURCED if claim in text], name
