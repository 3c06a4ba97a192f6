"""The Pydantic twin of the contract and the Holo3 step: schemas, verdicts, the tool list, dispatch."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from helpers.contract import ANSWER_JSON_SCHEMA, parse_json_object, validate_answer
from helpers.pydantic_contract import Answer, answer_errors, error_messages, model_errors
from helpers.steps import (
    HAND_WRITTEN_STEP_SCHEMA,
    STEP_SCHEMA,
    TOOL_MODELS,
    TOOLS,
    Step,
    dispatch,
    load_example_steps,
    render_tool_list,
)

DATA = Path(__file__).resolve().parent.parent / "data"
EXAMPLES = load_example_steps()
CORPUS = [json.loads(line) for line in (DATA / "broken_outputs.jsonl").read_text(encoding="utf-8").splitlines()]
PARSED = {case["id"]: parse_json_object(case["reply"]) for case in CORPUS if case["expect_parse"]}
TOOL_NAMES = {tool.model_fields["tool_name"].annotation.__args__[0] for tool in TOOLS}


def schema_nodes(node: Any):
    """Every sub-schema of a JSON Schema document."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from schema_nodes(value)
    elif isinstance(node, list):
        for value in node:
            yield from schema_nodes(value)


def test_examples_cover_both_verdicts():
    assert len(EXAMPLES) >= 20
    assert len({example["id"] for example in EXAMPLES}) == len(EXAMPLES)
    assert sum(example["valid"] for example in EXAMPLES) >= 5
    assert sum(not example["valid"] for example in EXAMPLES) >= 15


def test_an_example_step_called_the_documentations_is_the_documentations():
    """Notebook 02 prints each example's `why`: a step the workshop wrote must not pass for H Company's example."""
    from test_seed_quotations import HOLO3_EXAMPLE  # pytest puts tests/ on the path

    claimed = [example["id"] for example in EXAMPLES if re.search(r"docs'|documentation's", example["why"])
               and example["step"] != json.loads(HOLO3_EXAMPLE)]
    assert not claimed, "say whose step it is: the documentation's example is the one notebook 02 quotes"


@pytest.mark.parametrize("example", EXAMPLES, ids=[example["id"] for example in EXAMPLES])
def test_pydantic_and_both_schemas_agree_with_the_expected_verdict(example):
    errors = model_errors(Step, example["step"])
    assert (errors == []) == example["valid"], errors
    assert Draft202012Validator(HAND_WRITTEN_STEP_SCHEMA).is_valid(example["step"]) == example["valid"]
    assert Draft202012Validator(STEP_SCHEMA).is_valid(example["step"]) == example["valid"]


@pytest.mark.parametrize("schema", [STEP_SCHEMA, HAND_WRITTEN_STEP_SCHEMA], ids=["generated", "hand_written"])
def test_step_schema_is_closed_and_bounded(schema):
    Draft202012Validator.check_schema(schema)
    objects = [node for node in schema_nodes(schema) if node.get("type") == "object"]
    assert len(objects) == 1 + len(TOOLS)
    assert all(node["additionalProperties"] is False for node in objects)
    free_text = [
        node
        for node in schema_nodes(schema)
        if node.get("type") in ("string", ["string", "null"]) and "enum" not in node and "const" not in node
    ]
    assert len(free_text) == 8  # note, thought, and the element, content, question, plan or reason of a tool
    assert all(node["maxLength"] > 0 for node in free_text)


def test_hand_written_tool_call_is_a_one_of_on_tool_name_consts():
    variants = HAND_WRITTEN_STEP_SCHEMA["properties"]["tool_call"]["oneOf"]
    assert {variant["properties"]["tool_name"]["const"] for variant in variants} == TOOL_NAMES
    assert all("tool_name" in variant["required"] for variant in variants)


def test_generated_schema_discriminates_on_tool_name():
    tool_call = STEP_SCHEMA["properties"]["tool_call"]
    assert tool_call["discriminator"]["propertyName"] == "tool_name"
    assert set(tool_call["discriminator"]["mapping"]) == TOOL_NAMES
    assert STEP_SCHEMA["required"] == ["note", "thought", "tool_call"]


def test_step_round_trips_to_canonical_json():
    step = Step.model_validate(EXAMPLES[0]["step"])
    assert json.loads(step.model_dump_json()) == EXAMPLES[0]["step"]


def test_step_errors_name_the_key():
    assert model_errors(Step, {"note": None, "tool_call": {"tool_name": "go_back"}}) == ["missing key: thought"]
    step = {"note": None, "thought": "t", "tool_call": {"tool_name": "click", "element": "OK", "x": "5", "y": 5}}
    assert model_errors(Step, step) == ["tool_call.click.x: expected an integer, got a string"]


@pytest.mark.parametrize("case_id", sorted(PARSED))
def test_answer_model_agrees_with_validate_answer(case_id):
    data = PARSED[case_id]
    assert sorted(answer_errors(data)) == sorted(validate_answer(data))


@pytest.mark.parametrize("data", [[1], None, "answered"])
def test_answer_model_rejects_non_objects_in_the_same_words(data):
    assert answer_errors(data) == validate_answer(data)


@pytest.mark.parametrize("case", [c for c in CORPUS if c["expect_parse"]], ids=lambda c: c["id"])
def test_one_model_validate_json_words_its_errors_as_parse_then_validate(case):
    """Notebook 02's move: on a reply that is JSON and nothing else, Answer.model_validate_json(raw) in a try finds
    what parse_json_object then validate_answer find, in the same words; on any other text it says it is no JSON."""
    try:
        Answer.model_validate_json(case["reply"])
        errors = []
    except ValidationError as error:
        errors = error_messages(error)
    try:
        json.loads(case["reply"])
    except ValueError:
        assert errors and all(e.startswith("Invalid JSON") for e in errors)
    else:
        assert sorted(errors) == sorted(validate_answer(parse_json_object(case["reply"])))


@pytest.mark.parametrize("case_id", sorted(PARSED))
def test_answer_model_schema_agrees_with_the_hand_written_one(case_id):
    data = PARSED[case_id]
    generated = Draft202012Validator(Answer.model_json_schema()).is_valid(data)
    assert generated == Draft202012Validator(ANSWER_JSON_SCHEMA).is_valid(data)


def test_tool_list_mentions_every_tool_field_and_description():
    text = render_tool_list()
    for tool in TOOLS:
        schema = tool.model_json_schema()
        assert " ".join(schema["description"].split()) in text
        for name, prop in schema["properties"].items():
            if name == "tool_name":
                assert f"- {prop['const']}(" in text
            else:
                assert f"{name} (" in text
                assert prop["description"] in text


def test_tool_list_says_which_click_cannot_be_undone_and_that_a_plan_grants_nothing():
    text = render_tool_list()
    assert "'Place order' places a real order that cannot be undone" in text
    assert "grants no permission" in text


def test_every_tool_declares_what_it_means_to_the_harness():
    assert {name: model.intent for name, model in TOOL_MODELS.items()} == {
        "click": "tool_request", "write": "tool_request", "scroll": "tool_request", "go_back": "tool_request",
        "answer": "final_answer", "ask_user": "clarification", "update_plan": "plan_update", "abort": "abort"}


def test_tool_list_shows_signatures_and_bounds():
    text = render_tool_list()
    assert "- click(element, x, y): " in text
    assert "- write(content, press_enter=false): " in text
    assert "- go_back(): " in text
    assert "x (integer, 0 to 1000)" in text
    assert "direction (one of up, down)" in text
    assert "press_enter (boolean, default false)" in text


def recording_handlers(calls: list) -> dict:
    def handler(name: str):
        def run(**kwargs: Any) -> str:
            calls.append((name, kwargs))
            return f"{name} done"

        return run

    return {name: handler(name) for name in TOOL_NAMES}


@pytest.mark.parametrize(
    "example", [e for e in EXAMPLES if e["valid"]], ids=[e["id"] for e in EXAMPLES if e["valid"]]
)
def test_dispatch_calls_the_named_handler_with_the_arguments(example):
    calls: list = []
    step = Step.model_validate(example["step"])
    name = example["step"]["tool_call"]["tool_name"]
    assert dispatch(step, recording_handlers(calls)) == f"{name} done"
    assert calls == [(name, step.tool_call.model_dump(exclude={"tool_name"}))]


def test_dispatch_fills_defaults_and_drops_tool_name():
    calls: list = []
    step = Step.model_validate({"note": None, "thought": "t", "tool_call": {"tool_name": "write", "content": "hi"}})
    dispatch(step, recording_handlers(calls))
    assert calls == [("write", {"content": "hi", "press_enter": False})]


def test_dispatch_rejects_a_tool_without_handler():
    step = Step.model_validate({"note": None, "thought": "t", "tool_call": {"tool_name": "scroll", "direction": "up"}})
    calls: list = []
    handlers = {name: run for name, run in recording_handlers(calls).items() if name != "scroll"}
    with pytest.raises(ValueError, match="unknown tool 'scroll'"):
        dispatch(step, handlers)
    assert calls == []
