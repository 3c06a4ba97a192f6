import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.contract import validate_answer
from helpers.ladder import (ANSWER_CONTRACT, EMPTY_REPLY, Contract, STEP_CONTRACT, Reply, climb, model_repair,
                            repair_messages, step_fallback)
from helpers.steps import Step

VALID = {"status": "answered", "answer": "The library opens at 10:00.", "category": "campus_hours",
         "items": [], "missing": [], "sources": ["hours-library"]}


class ScriptedRepair:
    """A fixed repair reply, labelled as such: tests the ladder's bookkeeping, not a model."""

    def __init__(self, text: str):
        self.text, self.calls = text, []

    def __call__(self, messages):
        self.calls.append(messages)
        return Reply(self.text, {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})


def test_valid_at_parse_needs_no_repair():
    repair = ScriptedRepair("unused")
    record = climb(f"Sure! ```json\n{json.dumps(VALID)}\n```", ANSWER_CONTRACT, repair)
    assert record.rung == "valid" and record.data == VALID and not repair.calls and record.parse_ok


def test_repair_gets_the_specific_errors_and_succeeds():
    broken = {**VALID, "status": "done"}
    repair = ScriptedRepair(json.dumps(VALID))
    record = climb(json.dumps(broken), ANSWER_CONTRACT, repair)
    assert record.rung == "repaired" and record.data == VALID and record.repair_attempted
    prompt = repair.calls[0][1]["content"]
    assert "status: expected one of answered, not_found, needs_clarification; got 'done'" in prompt
    assert json.dumps(broken) in prompt and "Preserve all facts" in prompt
    assert record.usage == [{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}]


def test_failed_repair_falls_back_with_the_cause():
    record = climb("no json here", ANSWER_CONTRACT, ScriptedRepair("still prose"))
    assert record.rung == "fallback" and record.cause == "valid_json" and record.repair_errors
    assert validate_answer(record.data) == [] and record.data["missing"] == ["valid_json"]


def test_empty_reply_is_never_sent_to_repair():
    repair = ScriptedRepair(json.dumps(VALID))
    for empty in ("", "   \n", None):
        record = climb(empty, ANSWER_CONTRACT, repair)
        assert record.cause == EMPTY_REPLY and record.data["missing"] == [EMPTY_REPLY]
    assert not repair.calls


def test_repair_budget_is_configurable():
    repair = ScriptedRepair("still prose")
    climb("prose", ANSWER_CONTRACT, repair, repair_budget=3)
    assert len(repair.calls) == 3
    climb("prose", ANSWER_CONTRACT, None)
    assert len(repair.calls) == 3


def test_a_crashing_repair_call_is_a_fallback_not_an_exception():
    def broken(messages):
        raise ConnectionError("server went away")

    record = climb("prose", ANSWER_CONTRACT, broken)
    assert record.rung == "fallback" and record.cause == "repair_failed: ConnectionError"


def test_a_validator_that_raises_is_the_workshops_bug_not_a_failed_repair():
    """Instant. Before, the ladder's one `try` covered parsing and validation too: a bug in a contract's validator
    came out as `repair_failed`, and a benchmark counted it as the model's."""
    def buggy(data):
        raise KeyError("a bug in the validator")

    contract = Contract("buggy", ANSWER_CONTRACT.schema, buggy, ANSWER_CONTRACT.fallback)
    with pytest.raises(KeyError, match="a bug in the validator"):
        climb(json.dumps(VALID), contract, ScriptedRepair(json.dumps(VALID)))


def test_json_nested_past_the_parsers_depth_is_a_broken_reply():
    deep = "[" * 100_000 + "]" * 100_000
    record = climb(deep, ANSWER_CONTRACT, ScriptedRepair(deep))
    assert record.rung == "fallback" and record.errors == ["not a JSON object: nested too deeply to read"]


def test_vague_repair_prompt_omits_the_errors():
    vague = repair_messages("x", ["status: wrong"], ANSWER_CONTRACT, specific=False)[1]["content"]
    assert "status: wrong" not in vague and "not valid" in vague


def test_the_same_ladder_serves_the_step_contract():
    record = climb('{"note": null, "thought": "t", "tool_call": {"tool_name": "click", "x": 5}}', STEP_CONTRACT)
    assert record.rung == "fallback" and any("element" in e for e in record.errors)
    Step.model_validate(record.data)
    assert Step.model_validate(step_fallback("x")).tool_call.tool_name == "abort"


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet='{}[]":,0123456789abcdefnulltrue \n`'),
                 st.builds(json.dumps, st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                                                    lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner)))))
def test_any_text_yields_a_contract_valid_object_and_never_raises(text):
    for contract, validate in ((ANSWER_CONTRACT, validate_answer), (STEP_CONTRACT, STEP_CONTRACT.validate)):
        record = climb(text, contract, ScriptedRepair(text))
        assert validate(record.data) == []


@pytest.mark.integration
def test_ladder_repairs_through_the_embedded_server(server_url):
    from helpers.runtime.backends import connect

    record = climb("The library opens at 10:00 on Saturdays.", ANSWER_CONTRACT, model_repair(connect()))
    assert record.repair_attempted and record.repair_raw is not None
    assert validate_answer(record.data) == []
    assert record.usage and record.usage[0]["completion_tokens"] > 0


def test_the_plain_prompt_is_the_nim_workshops_own():
    system, user = repair_messages('{"status": "done"}', ["status: wrong", "missing key: answer"], ANSWER_CONTRACT,
                                   prompt="plain")
    assert system["content"] == "You fix malformed JSON. Return ONLY a valid JSON object."
    assert user["content"] == ("Problems: ['status: wrong', 'missing key: answer']. Preserve all facts. "
                               'Original:\n{"status": "done"}\n\nReturn corrected JSON only.')
    assert "JSON Schema" not in system["content"] + user["content"]
