"""The functions notebooks 01 and 02 build in their cells agree with the helpers later notebooks import.

A notebook cell that defines the notebook's own version of a helper carries the tag
`notebook-version:NAME` in its metadata, where a learner does not see it. This test runs those cells,
and only those, in order, in a fresh namespace (no kernel, no model, no server), then compares what
they define with `helpers` over the whole corpus of replies and every example step.
"""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from helpers import contract, pydantic_contract, steps
from test_steps import recording_handlers  # pytest puts tests/ on the path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
TAG = "notebook-version:"

CORPUS = [json.loads(line) for line in (ROOT / "data" / "broken_outputs.jsonl").read_text("utf-8").splitlines()]
PARSED = {case["id"]: contract.parse_json_object(case["reply"]) for case in CORPUS if case["expect_parse"]}
EXAMPLES = steps.load_example_steps()

VALID = json.loads(next(case["reply"] for case in CORPUS if case["id"] == "clean"))

# Inputs beyond the corpus: the edge cases tests/test_contract.py pins down for the helpers.
EXTRA_REPLIES = [
    "",
    " \n\t",
    "null",
    '[{"status": "answered"}]',
    '```json\n"an answer"\n```',
    "The library opens at 10:00.",
    '{"status": "answered", "answer": "Open',
    'Answer: {"status": "answered",}',
    'Use { for objects: {"a": {"b": 1}}',
    'Two broken: {"a": 1,} and then {"b": 2,}',
    'Escaped quote: {"a": "say \\"}\\" here", "b": [1, {"c": 2}]} trailing } brace',
]
EXTRA_ANSWERS = [
    VALID,
    {**VALID, "status": "done"},
    {**VALID, "category": None},
    {**VALID, "answer": "x" * 401},
    {**VALID, "items": [{"name": "Gym"}, "Library"]},
    {**VALID, "items": [{"name": "Gym", "floor": 2}]},
    {**VALID, "items": [{"name": "Gym", "note": "x" * 121}]},
    {**VALID, "missing": None},
    {**VALID, "sources": ["hours-library", True]},
    {**VALID, "sources": ["s"] * 11},
    {**VALID, "sources": ["s"] * 3},
    {**VALID, "sources": ["x" * 31]},
    {**VALID, "answer": 'Say "hi"'},
    {**VALID, "answer": "Caf\u00e9 at 10:00"},
    {**VALID, "answer": "\u00e9" * 101},
    {**VALID, "missing": ["tab\there"]},
    {**VALID, "items": [{"name": "Gym"}]},
    {**VALID, "items": [{"name": "Gym", "value": "x" * 25}]},
    {**VALID, "items": [{"name": "Gym", "value": "open", "note": "extra"}]},
    {**VALID, "items": [{"name": "Gym", "value": 2}, {"name": "Pool", "value": "none"}]},
    {**VALID, "items": [{"name": "a", "value": "b"}] * 3},
    {**VALID, "confidence": 0.9},
    {"status": "done", "answer": 1, "category": "hours", "items": "x", "missing": [], "extra": 1},
    {"answer": "hi"},
    [VALID],
    None,
    "answered",
    3,
]


def defining_cells(name: str) -> list[tuple[str, str]]:
    """(what the cell defines, its source) for every tagged code cell of a notebook, in order."""
    cells = json.loads((NOTEBOOKS / name).read_text(encoding="utf-8"))["cells"]
    found = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        labels = [tag[len(TAG):] for tag in cell.get("metadata", {}).get("tags", []) if tag.startswith(TAG)]
        found += [(label, source) for label in labels]
    return found


def run_cells(name: str) -> SimpleNamespace:
    namespace: dict[str, Any] = {"__name__": f"notebook_{name.split('_')[0]}"}
    for label, source in defining_cells(name):
        # dont_inherit: this module's `from __future__ import annotations` must not turn the
        # notebook's annotations into strings, which Pydantic could not resolve here.
        exec(compile(source, f"{name} [{label}]", "exec", dont_inherit=True), namespace)
    return SimpleNamespace(**namespace)


def outcome(parse, reply: str) -> tuple:
    """A parser's whole behaviour on one reply: the value it returns, or the error it raises and its words."""
    try:
        return ("value", parse(reply))
    except ValueError as error:
        return ("error", type(error).__name__, str(error))


# --- notebook 01: the hand-rolled validator ---------------------------------------------------------------

NB01 = "01_hand_rolled_validator.ipynb"


@pytest.fixture(scope="module")
def nb01() -> SimpleNamespace:
    return run_cells(NB01)


def test_notebook_01_marks_every_function_it_builds():
    labels = {label for label, _ in defining_cells(NB01)}
    assert labels == {"contract", "naive_parse_json_object", "parse_json_object", "validate_answer", "format_error"}


def test_notebook_01_contract_constants_are_the_helpers(nb01):
    for name in ("STATUSES", "CATEGORIES", "KEYS", "ENUMS", "LIST_KEYS", "ITEM_KEYS", "ANSWER_MAX_LENGTH",
                 "ITEM_TEXT_MAX_LENGTH", "SHORT_TEXT_MAX_LENGTH", "MAX_LIST_ENTRIES", "PLAIN_TEXT", "FALLBACK_ANSWER"):
        assert getattr(nb01, name) == getattr(contract, name), name


@pytest.mark.parametrize("reply", [c["reply"] for c in CORPUS] + EXTRA_REPLIES,
                         ids=[c["id"] for c in CORPUS] + [f"extra{i}" for i in range(len(EXTRA_REPLIES))])
def test_notebook_01_parsers_agree_with_the_helpers(nb01, reply):
    assert outcome(nb01.naive_parse_json_object, reply) == outcome(contract.naive_parse_json_object, reply)
    assert outcome(nb01.parse_json_object, reply) == outcome(contract.parse_json_object, reply)


@pytest.mark.parametrize("data", list(PARSED.values()) + EXTRA_ANSWERS,
                         ids=list(PARSED) + [f"extra{i}" for i in range(len(EXTRA_ANSWERS))])
def test_notebook_01_validate_answer_agrees_with_the_helpers(nb01, data):
    assert nb01.validate_answer(data) == contract.validate_answer(data)


@pytest.mark.parametrize("args", [(), ("empty_reply",), ("valid_json", "The model sent nothing.")])
def test_notebook_01_format_error_agrees_with_the_helpers(nb01, args):
    assert nb01.format_error(*args) == contract.format_error(*args)
    assert nb01.validate_answer(nb01.format_error(*args)) == []


# --- notebook 02: the Pydantic Step union --------------------------------------------------------------

NB02 = "02_pydantic_step_union.ipynb"


@pytest.fixture(scope="module")
def nb02() -> SimpleNamespace:
    return run_cells(NB02)


def test_notebook_02_marks_every_piece_it_builds():
    labels = {label for label, _ in defining_cells(NB02)}
    assert labels == {"Answer", "Step", "HAND_WRITTEN_STEP_SCHEMA", "render_tool_list", "dispatch"}


def test_notebook_02_schemas_are_the_helpers(nb02):
    assert nb02.Answer.model_json_schema() == pydantic_contract.Answer.model_json_schema()
    assert nb02.Step.model_json_schema() == steps.STEP_SCHEMA
    assert nb02.HAND_WRITTEN_STEP_SCHEMA == steps.HAND_WRITTEN_STEP_SCHEMA
    assert [tool.model_json_schema() for tool in nb02.TOOLS] == [tool.model_json_schema() for tool in steps.TOOLS]


@pytest.mark.parametrize("data", list(PARSED.values()) + EXTRA_ANSWERS,
                         ids=list(PARSED) + [f"extra{i}" for i in range(len(EXTRA_ANSWERS))])
def test_notebook_02_answer_model_agrees_with_the_helpers(nb02, data):
    assert pydantic_contract.model_errors(nb02.Answer, data) == pydantic_contract.answer_errors(data)


@pytest.mark.parametrize("example", EXAMPLES, ids=[e["id"] for e in EXAMPLES])
def test_notebook_02_step_model_agrees_with_the_helpers(nb02, example):
    assert pydantic_contract.model_errors(nb02.Step, example["step"]) == pydantic_contract.model_errors(steps.Step, example["step"])
    if example["valid"]:
        ours = nb02.Step.model_validate(example["step"]).model_dump_json()
        assert ours == steps.Step.model_validate(example["step"]).model_dump_json()


def test_notebook_02_tool_list_is_the_helpers(nb02):
    assert nb02.render_tool_list() == steps.render_tool_list()


@pytest.mark.parametrize("example", [e for e in EXAMPLES if e["valid"]], ids=[e["id"] for e in EXAMPLES if e["valid"]])
def test_notebook_02_dispatch_agrees_with_the_helpers(nb02, example):
    ours, theirs = [], []
    assert nb02.dispatch(nb02.Step.model_validate(example["step"]), recording_handlers(ours)) == steps.dispatch(
        steps.Step.model_validate(example["step"]), recording_handlers(theirs))
    assert ours == theirs


def test_notebook_02_dispatch_refuses_a_tool_without_handler_in_the_same_words(nb02):
    step = {"note": None, "thought": "t", "tool_call": {"tool_name": "scroll", "direction": "up"}}
    handlers = {name: run for name, run in recording_handlers([]).items() if name != "scroll"}
    errors = []
    for module in (nb02, steps):
        with pytest.raises(ValueError) as raised:
            module.dispatch(module.Step.model_validate(step), handlers)
        errors.append(str(raised.value))
    assert errors[0] == errors[1]
