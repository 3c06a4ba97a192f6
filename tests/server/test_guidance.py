"""Constraints become llguidance grammars; a schema llguidance cannot enforce is a 400, not a crash.

A byte-level tokenizer stands in for the model's: grammars are tokenizer-independent, and it needs no weights.
"""
import json

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llguidance import LLMatcher, LLTokenizer

from helpers.contract import PLAIN_TEXT
from helpers.runtime.dialects import Constraint
from helpers.server.guidance import (GRAMMAR_LIMITS, JSON_DEFAULTS, MAX_ENUM_VALUES, MAX_SCHEMA_CHARS, MAX_SCHEMA_DEPTH,
                                     PLAIN_CLASS, TOKEN_SLICES, compile_matcher, grammar_text, length_in_pattern)
from helpers.server.protocol import RequestError
from helpers.steps import STEP_SCHEMA

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


def nested(levels: int) -> dict:
    """An object schema `levels` objects deep: two levels of JSON each (the object and its properties)."""
    schema: dict = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def refusal(constraint: Constraint) -> RequestError:
    with pytest.raises(RequestError) as caught:
        compile_matcher(constraint, BYTES)
    assert caught.value.status == 400 and caught.value.param == constraint.field
    return caught.value


@pytest.mark.parametrize("levels", [16, 300, 2000])
def test_a_schema_nested_too_deep_is_a_400_naming_the_limit_not_a_recursion_error(levels):
    # 300 objects is 600 levels of JSON: json.loads takes it, and the old recursive walk ended in a 500.
    error = refusal(Constraint("json_schema", nested(levels), "guided_json"))
    assert error.code == "schema_too_deep" and str(MAX_SCHEMA_DEPTH) in str(error)


def nested_lists(depth: int) -> dict:
    """A schema exactly `depth` levels of JSON deep: its object, then a `const` of nested lists."""
    value: list = []
    for _ in range(depth - 2):
        value = [value]
    return {"const": value}


def test_a_schema_at_the_depth_limit_is_enforced_and_one_level_deeper_is_refused():
    at_limit = Constraint("json_schema", nested_lists(MAX_SCHEMA_DEPTH), "guided_json")
    assert accepts(at_limit, json.dumps(at_limit.value["const"])) and not accepts(at_limit, "[]")
    error = refusal(Constraint("json_schema", nested_lists(MAX_SCHEMA_DEPTH + 1), "guided_json"))
    assert error.code == "schema_too_deep"


@pytest.mark.parametrize("constraint", [
    Constraint("json_schema", {"enum": list(range(MAX_ENUM_VALUES + 1))}, "response_format"),
    Constraint("json_schema", {"anyOf": [{"enum": [str(n) for n in range(MAX_ENUM_VALUES + 1)]}]}, "nvext"),
    Constraint("choice", [str(n) for n in range(MAX_ENUM_VALUES + 1)], "guided_choice"),
], ids=["enum", "nested-enum", "choice"])
def test_an_enum_over_the_limit_is_a_400_naming_it(constraint):
    error = refusal(constraint)
    assert error.code == "enum_too_large" and str(MAX_ENUM_VALUES) in str(error)


def test_an_enum_inside_a_const_is_data_not_a_schema():
    value = {"enum": list(range(MAX_ENUM_VALUES + 1))}
    constraint = Constraint("json_schema", {"const": value}, "guided_json")
    assert accepts(constraint, json.dumps(value, separators=(", ", ": ")))
    assert not accepts(constraint, json.dumps({"enum": [0]}, separators=(", ", ": ")))


def test_a_property_named_like_a_data_keyword_is_a_schema():
    # The walk tells a subschema from data by where it sits, not by the key it sits under.
    enum = {"type": "object", "properties": {"const": {"enum": list(range(MAX_ENUM_VALUES + 1))}}}
    assert refusal(Constraint("json_schema", enum, "guided_json")).code == "enum_too_large"
    bounded = {"type": "object", "properties": {"default": {"maxLength": 3, "pattern": "^[a-z]*$"}}}
    assert length_in_pattern(bounded)["properties"]["default"] == {"pattern": "^[a-z]{0,3}$"}


@pytest.mark.parametrize("constraint", [
    Constraint("json_schema", {"type": "object", "properties": {f"k{n}": {} for n in range(40_000)}}, "guided_json"),
    Constraint("json_schema", {"type": "string", "description": "x" * MAX_SCHEMA_CHARS}, "guided_json"),
    Constraint("regex", "a" * (MAX_SCHEMA_CHARS + 1), "guided_regex"),
], ids=["many-properties", "long-string", "long-regex"])
def test_a_constraint_over_the_size_limit_is_a_400_naming_it(constraint):
    error = refusal(constraint)
    assert error.code == "schema_too_large" and str(MAX_SCHEMA_CHARS) in str(error)


def test_a_schema_over_llguidances_limits_is_a_400_naming_them():
    # Intersections of unions multiply: this one exhausts the lexer's fuel while the grammar is built.
    choices = [{"anyOf": [{"type": "string", "pattern": f"p{n}{m}q"} for m in range(10)]} for n in range(3)]
    error = refusal(Constraint("json_schema", {"allOf": choices}, "guided_json"))
    assert error.code == "schema_too_complex" and f"lexer fuel {GRAMMAR_LIMITS.initial_lexer_fuel}" in str(error)


BOUNDED_PLAIN = {"type": "string", "minLength": 2, "maxLength": 5, "pattern": PLAIN_TEXT}


def test_a_length_is_written_into_a_one_class_pattern():
    assert length_in_pattern(BOUNDED_PLAIN) == {"type": "string", "pattern": r"^[ !#-\[\]-~]{2,5}$"}
    assert length_in_pattern({"maxLength": 7, "pattern": "^[a-z]*$"}) == {"pattern": "^[a-z]{0,7}$"}
    assert length_in_pattern({"minLength": 1, "pattern": "^[a-z]*$"}) == {"pattern": "^[a-z]{1,}$"}


@pytest.mark.parametrize("schema", [
    {"maxLength": 5, "pattern": "^[a-z]+$"},      # not `*`
    {"maxLength": 5, "pattern": "[a-z]*"},        # not anchored: any string with a run of letters matches
    {"maxLength": 5, "pattern": "^[a-z]*x$"},     # more than one class
    {"pattern": "^[a-z]*$"},                      # no length to write in
    {"minLength": 6, "maxLength": 5, "pattern": "^[a-z]*$"},  # unsatisfiable: left for llguidance to judge
    {"maxLength": 2.5, "pattern": "^[a-z]*$"},    # not a count
], ids=["plus", "unanchored", "two-parts", "no-length", "min-above-max", "not-a-count"])
def test_any_other_pattern_or_length_is_left_as_it_is(schema):
    assert length_in_pattern(schema) == schema


def test_subschemas_are_rewritten_everywhere_and_data_never():
    data = {"pattern": "^[a-z]*$", "maxLength": 3}
    schema = {"$defs": {"Short": {"maxLength": 3, "pattern": "^[a-z]*$"}},
              "properties": {"pattern": {"anyOf": [{"maxLength": 4, "pattern": "^[a-z]*$"}, {"type": "null"}]},
                             "fixed": {"const": data, "default": data, "enum": [data], "examples": [data]}},
              "items": [{"maxLength": 1, "pattern": "^[a-z]*$"}]}
    rewritten = length_in_pattern(schema)
    assert rewritten["$defs"]["Short"] == {"pattern": "^[a-z]{0,3}$"}
    assert rewritten["properties"]["pattern"]["anyOf"][0] == {"pattern": "^[a-z]{0,4}$"}
    assert rewritten["items"] == [{"pattern": "^[a-z]{0,1}$"}]
    assert rewritten["properties"]["fixed"] == schema["properties"]["fixed"]
    assert schema["$defs"]["Short"] == {"maxLength": 3, "pattern": "^[a-z]*$"}  # the request's own schema is untouched


@given(st.text(alphabet=st.sampled_from('ab "\\~\x7f\n\u00e9'), max_size=7))
@settings(max_examples=300, deadline=None)
def test_the_rewritten_schema_accepts_exactly_what_the_original_accepts(text):
    document = json.dumps({"t": text})
    original = {"type": "object", "properties": {"t": BOUNDED_PLAIN}, "required": ["t"], "additionalProperties": False}
    # ECMA-262's `$`, not Python's: jsonschema's re.search would also take a "$" before a final newline.
    expected = bool(re.fullmatch(r"[ !#-\[\]-~]*", text)) and 2 <= len(text) <= 5
    for schema in (original, length_in_pattern(original)):
        matcher = LLMatcher(BYTES, LLMatcher.grammar_from_json_schema(schema, defaults=JSON_DEFAULTS), log_level=0)
        assert (matcher.consume_tokens(BYTES.tokenize_str(document)) and matcher.is_accepting()) == expected


def test_the_slices_leave_every_mask_as_it_was():
    """The slicer is an optimisation only: with or without it the matcher allows the same bytes at every step."""
    step = json.dumps({"note": None, "thought": "Open the Red mug, then answer with its price.",
                       "tool_call": {"tool_name": "answer", "content": "$33.50"}}, separators=(", ", ": "))
    plain, sliced = (compile_matcher(Constraint("json_schema", STEP_SCHEMA, "response_format"), tokenizer)
                     for tokenizer in (BYTES, LLTokenizer("byte", slices=TOKEN_SLICES)))
    for token in BYTES.tokenize_str(step):
        assert plain.compute_logit_bias() == sliced.compute_logit_bias()
        assert plain.consume_token(token) and sliced.consume_token(token)
    assert plain.is_accepting() and sliced.is_accepting()


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore:llama_token_get_attr is deprecated:DeprecationWarning")  # llguidance's, per token
def test_with_the_models_vocabulary_the_rewrite_and_slices_change_no_mask():
    """On SmolLM2's own 49k-token vocabulary, step by step through a Step reply: the same allowed tokens with the
    schema as sent and the plain tokenizer, as with the rewritten schema and the sliced one the server uses."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from llguidance.llamacpp import lltokenizer_from_vocab
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

    from helpers.server.engine import model_path

    vocab = llama_cpp.Llama(str(model_path()), vocab_only=True, verbose=False)
    reply = json.dumps({"note": "The Red mug costs $33.50 on its page.", "thought": "I saw the price, so I answer.",
                        "tool_call": {"tool_name": "answer", "content": "$33.50"}}, separators=(", ", ": "))
    as_sent = LLMatcher(lltokenizer_from_vocab(vocab._model.vocab),
                        LLMatcher.grammar_from_json_schema(STEP_SCHEMA, defaults=JSON_DEFAULTS), log_level=0)
    served = compile_matcher(Constraint("json_schema", STEP_SCHEMA, "response_format"),
                             lltokenizer_from_vocab(vocab._model.vocab, slices=TOKEN_SLICES))
    masks = allocate_token_bitmask(2, vocab.n_vocab())
    for token in vocab.tokenize(reply.encode(), add_bos=False, special=False):
        fill_next_token_bitmask(as_sent, masks, 0)
        fill_next_token_bitmask(served, masks, 1)
        assert (masks[0] == masks[1]).all()
        assert as_sent.consume_token(token) and served.consume_token(token)
    assert as_sent.is_accepting() and served.is_accepting()



def walk_schemas():
    """Schemas with keys, consts, enums, numbers, arrays, nulls and bounded free text."""
    from helpers.contract import ANSWER_JSON_SCHEMA
    from helpers.bench.decoding import cases

    return {"step": STEP_SCHEMA, "answer": ANSWER_JSON_SCHEMA, "per-screen": cases("per-screen")[1].schema}


def one_token_steps_are_never_missed(matcher: LLMatcher, tokenizer: LLTokenizer, seed: int, steps: int = 400) -> int:
    """Walk the grammar on random allowed tokens; at each step where exactly one token is allowed,
    `may_be_forced` must have said so. Returns how many such steps the walk met."""
    import numpy as np
    from llguidance.numpy import allocate_token_bitmask, fill_next_token_bitmask

    from helpers.server.engine import may_be_forced
    from helpers.server.sampling import allowed_tokens

    vocab_size = tokenizer.vocab_size
    rng, mask, met = np.random.default_rng(seed), allocate_token_bitmask(1, vocab_size), 0
    for _ in range(steps):
        if matcher.is_stopped():
            break
        hint = may_be_forced(matcher)
        fill_next_token_bitmask(matcher, mask, 0)
        allowed = np.flatnonzero(allowed_tokens(mask[0], vocab_size))
        if allowed.size == 1:
            met += 1
            assert hint, matcher.get_error()
        token = int(rng.choice(allowed))
        if token == tokenizer.eos_token:
            break
        assert matcher.consume_token(token)
    return met


@pytest.mark.parametrize("constraint, text", [(Constraint("json_schema", {"const": "a"}, "response_format"), '"a"'),
                                              (Constraint("regex", "ab", "guided_regex"), "ab")])
def test_a_grammar_with_nothing_left_but_the_end_has_stopped(constraint, text):
    matcher = compile_matcher(constraint, BYTES)
    assert matcher.consume_tokens(BYTES.tokenize_str(text)) and matcher.is_stopped()


@pytest.mark.parametrize("name", ["step", "answer", "per-screen"])
def test_every_one_token_step_is_announced_by_a_forced_byte(name):
    matcher = compile_matcher(Constraint("json_schema", walk_schemas()[name], "response_format"), BYTES)
    assert sum(one_token_steps_are_never_missed(matcher.deep_copy(), BYTES, seed) for seed in range(5)) > 20


@pytest.mark.integration
@pytest.mark.filterwarnings("ignore:llama_token_get_attr is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", ["step", "answer", "per-screen"])
def test_with_the_models_vocabulary_every_one_token_step_is_announced(name):
    """The model's vocabulary lacks a token for a few bytes; the walk shows they never hide a one-token step."""
    llama_cpp = pytest.importorskip("llama_cpp")
    from llguidance.llamacpp import lltokenizer_from_vocab

    from helpers.server.engine import model_path

    vocab = llama_cpp.Llama(str(model_path()), vocab_only=True, verbose=False)
    tokenizer = lltokenizer_from_vocab(vocab._model.vocab, slices=TOKEN_SLICES)
    matcher = compile_matcher(Constraint("json_schema", walk_schemas()[name], "response_format"), tokenizer)
    assert sum(one_token_steps_are_never_missed(matcher.deep_copy(), tokenizer, seed) for seed in range(5)) > 20


@pytest.mark.integration
def test_the_bytes_without_a_token_of_their_own_are_the_ones_may_be_forced_names():
    llama_cpp = pytest.importorskip("llama_cpp")
    from helpers.server.engine import model_path

    vocab = llama_cpp.Llama(str(model_path()), vocab_only=True, verbose=False)
    single = {piece[0] for piece in (vocab.detokenize([token]) for token in range(vocab.n_vocab())) if len(piece) == 1}
    control = {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D}  # JSON escapes these inside strings
    never_in_utf8 = {0xC0, 0xC1, *range(0xF5, 0x100)}
    unassigned_planes = {0xF1, 0xF2}  # lead bytes of planes 4 to 11
    assert set(range(256)) - single == control | never_in_utf8 | unassigned_planes


def test_the_contracts_plain_text_is_the_class_the_server_slices_by():
    """Instant. The server knows no lesson, so it writes its alphabet itself; the workshop's schemas get the fast
    masks only while their plain text is that class."""
    assert PLAIN_TEXT == f"^{PLAIN_CLASS}*$"
