"""Constraints become llguidance grammars; a schema llguidance cannot enforce is a 400, not a crash.

A byte-level tokenizer stands in for the model's: grammars are tokenizer-independent, and it needs no weights.
"""
import json

import pytest
from llguidance import LLTokenizer

from helpers.dialects import Constraint
from helpers.server.guidance import JSON_DEFAULTS, compile_matcher, grammar_text
from helpers.server.protocol import RequestError

BYTES = LLTokenizer("byte")
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}


def accepts(constraint: Constraint, text: str) -> bool:
    matcher = compile_matcher(constraint, BYTES)
    return matcher.consume_tokens(BYTES.tokenize_str(text)) and matcher.is_accepting()


def test_a_json_schema_grammar_carries_the_compact_separators():
    grammar = json.loads(grammar_text(Constraint("json_schema", SCHEMA, "response_format")))
    assert grammar["grammars"][0]["json_schema"]["x-guidance"] == JSON_DEFAULTS


def test_the_matcher_accepts_a_matching_object_with_compact_separators_only():
    constraint = Constraint("json_schema", SCHEMA, "response_format")
    assert accepts(constraint, '{"a": 1}')
    assert not accepts(constraint, '{"a":1}')
    assert not accepts(constraint, '{"a": "1"}')


def test_json_object_means_any_object():
    assert accepts(Constraint("json_object", None, "response_format"), '{"anything": [1, 2]}')


def test_a_choice_accepts_exactly_its_alternatives():
    constraint = Constraint("choice", ["yes", "no"], "guided_choice")
    assert accepts(constraint, "yes") and accepts(constraint, "no")
    assert not accepts(constraint, "maybe")


def test_a_regex_is_enforced():
    constraint = Constraint("regex", r"\d{3}", "guided_regex")
    assert accepts(constraint, "123") and not accepts(constraint, "12a")


@pytest.mark.parametrize("schema", [{"type": "array", "uniqueItems": True}, {"not": {"type": "string"}}],
                         ids=["uniqueItems", "not"])
def test_a_keyword_llguidance_cannot_enforce_is_a_request_error_naming_the_field(schema):
    with pytest.raises(RequestError) as error:
        compile_matcher(Constraint("json_schema", schema, "response_format"), BYTES)
    assert error.value.param == "response_format" and error.value.status == 400
