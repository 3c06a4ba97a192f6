"""The hand-rolled contract: parsing model replies, validating answers, the fallback, the corpus verdicts."""

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from helpers.bounds import max_json_bytes
from helpers.contract import (
    ANSWER_JSON_SCHEMA,
    ANSWER_MAX_LENGTH,
    ANSWER_TOKENS,
    CATEGORIES,
    FALLBACK_ANSWER,
    KEYS,
    MAX_LIST_ENTRIES,
    STATUSES,
    format_error,
    is_fallback,
    naive_parse_json_object,
    parse_json_object,
    validate_answer,
)

DATA = Path(__file__).resolve().parent.parent / "data"
CORPUS = [json.loads(line) for line in (DATA / "broken_outputs.jsonl").read_text(encoding="utf-8").splitlines()]
CASES = {case["id"]: case for case in CORPUS}
PARSED = {case["id"]: parse_json_object(case["reply"]) for case in CORPUS if case["expect_parse"]}

# The replies notebook 01 shows breaking the first-'{'-to-last-'}' parser.
NAIVE_BREAKS = {
    "braces_in_trailing_prose",
    "braces_in_leading_prose",
    "two_fenced_blocks",
    "two_fenced_first_broken",
    "brace_in_string_and_prose",
    "think_block",
    "list_of_objects",
    "fenced_list",
}

VALID = {
    "status": "answered",
    "answer": "Lindqvist Library opens at 10:00 on Saturday.",
    "category": "campus_hours",
    "items": [{"name": "Lindqvist Library", "value": "Saturday 10:00-18:00"}],
    "missing": [],
    "sources": ["hours-library"],
}


def outcome(parse, reply: str) -> tuple:
    try:
        return ("object", parse(reply))
    except ValueError:
        return ("error",)


def test_corpus_is_large_and_well_formed():
    assert len(CORPUS) >= 30
    assert len(CASES) == len(CORPUS), "ids must be unique"
    for case in CORPUS:
        assert set(case) == {"id", "kind", "reply", "expect_parse", "expect_valid", "why"}
        assert not (case["expect_valid"] and not case["expect_parse"])
    assert sum(case["expect_valid"] for case in CORPUS) >= 5
    assert sum(not case["expect_parse"] for case in CORPUS) >= 10


@pytest.mark.parametrize("case", CORPUS, ids=[case["id"] for case in CORPUS])
def test_corpus_verdict(case):
    if not case["expect_parse"]:
        with pytest.raises(ValueError):
            parse_json_object(case["reply"])
        return
    problems = validate_answer(parse_json_object(case["reply"]))
    assert (problems == []) == case["expect_valid"], problems


@pytest.mark.parametrize("case", CORPUS, ids=[case["id"] for case in CORPUS])
def test_naive_parser_breaks_exactly_where_the_notebook_says(case):
    naive, robust = outcome(naive_parse_json_object, case["reply"]), outcome(parse_json_object, case["reply"])
    assert (naive != robust) == (case["id"] in NAIVE_BREAKS)


def test_naive_parser_raises_on_a_brace_in_trailing_prose():
    with pytest.raises(json.JSONDecodeError):
        naive_parse_json_object(CASES["braces_in_trailing_prose"]["reply"])


def test_naive_parser_silently_unwraps_a_list():
    assert naive_parse_json_object(CASES["list_of_objects"]["reply"]) == VALID


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        ("", "reply is empty"),
        (" \n\t", "reply is empty"),
        ("null", "found JSON but it is null, not an object"),
        ('[{"status": "answered"}]', "found JSON but it is a list, not an object"),
        ('```json\n"an answer"\n```', "found JSON but it is a string, not an object"),
        ("The library opens at 10:00.", "no JSON object found in the reply"),
        ('{"status": "answered", "answer": "Open', "no JSON object found in the reply"),
    ],
)
def test_parse_errors_say_what_was_wrong(reply, message):
    with pytest.raises(ValueError, match=message):
        parse_json_object(reply)


def test_parse_error_points_at_the_broken_object():
    with pytest.raises(ValueError, match=r"the '\{' at char 8 fails: Expecting property name"):
        parse_json_object('Answer: {"status": "answered",}')


def test_parse_takes_the_object_out_of_prose_and_fences():
    for case_id in ("clean", "fenced_json", "fenced_no_language", "prose_wrapped", "prose_and_fence", "think_block"):
        assert parse_json_object(CASES[case_id]["reply"]) == VALID, case_id


def test_parse_takes_the_first_of_two_fenced_objects():
    assert PARSED["two_fenced_blocks"] == VALID


def test_parse_skips_a_fenced_block_that_does_not_parse():
    assert PARSED["two_fenced_first_broken"] == VALID


def test_parse_keeps_braces_inside_strings():
    expected = "Open {Saturday} 10:00-18:00; ask at the desk if the door says }closed{."
    assert PARSED["brace_inside_string"]["answer"] == expected
    assert PARSED["brace_in_string_and_prose"]["answer"] == "The {library} opens at 10:00."


def test_parse_does_not_mistake_an_item_of_a_broken_answer_for_the_answer():
    for case_id in ("comment_in_json", "smart_quotes", "raw_newline_in_string", "truncated_after_items"):
        with pytest.raises(ValueError, match="no JSON object found"):
            parse_json_object(CASES[case_id]["reply"])


def test_parse_skips_an_unclosed_brace_in_prose():
    assert parse_json_object('Use { for objects: {"a": {"b": 1}}') == {"a": {"b": 1}}


def test_valid_answer_has_no_problems():
    assert validate_answer(VALID) == []


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"status": "done"}, "status: expected one of answered, not_found, needs_clarification; got 'done'"),
        ({"category": None}, f"category: expected one of {', '.join(CATEGORIES)}; got None"),
        ({"answer": 42}, "answer: expected a string, got a number"),
        ({"answer": "x" * 101}, "answer: expected at most 100 characters, got 101"),
        ({"answer": "Caf\u00e9 opens at 8."}, "answer: expected plain text (printable ASCII without \" or \\), got '\u00e9'"),
        ({"answer": 'Say "hi".'}, "answer: expected plain text (printable ASCII without \" or \\), got '\"'"),
        # Python's `$` also matches before a final newline; the check must not (Pydantic and the grammar do not).
        ({"answer": "Opens at 8.\n"}, "answer: expected plain text (printable ASCII without \" or \\), got '\\n'"),
        ({"items": [{"name": "Gym", "value": "6"}, "Library"]}, "items[1]: expected an object, got a string"),
        ({"items": [{"name": "Gym", "value": 2}]}, "items[0].value: expected a string, got a number"),
        ({"items": [{"name": "Gym"}]}, "missing key: items[0].value"),
        ({"items": [{"name": "Gym", "value": "6", "floor": "2"}]}, "unexpected key: items[0].floor"),
        ({"items": [{"name": "Gym", "value": "x" * 25}]}, "items[0].value: expected at most 24 characters, got 25"),
        ({"missing": None}, "missing: expected a list, got null"),
        ({"sources": ["hours-library", True]}, "sources[1]: expected a string, got a boolean"),
        ({"sources": ["s"] * 3}, "sources: expected at most 2 entries, got 3"),
        ({"confidence": 0.9}, "unexpected key: confidence"),
    ],
)
def test_each_problem_is_named_precisely(change, message):
    assert validate_answer({**VALID, **change}) == [message]


def test_every_missing_key_is_reported():
    assert validate_answer({"answer": "hi"}) == [f"missing key: {key}" for key in KEYS if key != "answer"]


def test_all_problems_are_reported_at_once():
    broken = {"status": "done", "answer": 1, "category": "hours", "items": "x", "missing": [], "extra": 1}
    assert validate_answer(broken) == [
        "missing key: sources",
        "unexpected key: extra",
        "status: expected one of answered, not_found, needs_clarification; got 'done'",
        f"category: expected one of {', '.join(CATEGORIES)}; got 'hours'",
        "answer: expected a string, got a number",
        "items: expected a list, got a string",
    ]


@pytest.mark.parametrize("data", [[VALID], None, "answered", 3])
def test_non_object_gives_one_clear_message(data):
    problems = validate_answer(data)
    assert len(problems) == 1
    assert problems[0].startswith("expected a JSON object, got ")


def test_format_error_is_valid_and_honest():
    fallback = format_error()
    assert validate_answer(fallback) == []
    assert fallback == {
        "status": "needs_clarification",
        "answer": FALLBACK_ANSWER,
        "category": "refusal",
        "items": [],
        "missing": ["valid_json"],
        "sources": [],
    }


def test_format_error_names_the_cause_and_keeps_a_given_answer():
    fallback = format_error("empty_reply", answer="The model returned nothing.")
    assert validate_answer(fallback) == []
    assert fallback["missing"] == ["empty_reply"]
    assert fallback["answer"] == "The model returned nothing."


def test_each_fallback_is_a_fresh_object_that_no_caller_can_change_for_the_next():
    first = format_error()
    first["missing"].append("changed")
    first["items"].append({"name": "changed"})
    first["answer"] = "changed"
    assert format_error() == {"status": "needs_clarification", "answer": FALLBACK_ANSWER, "category": "refusal",
                              "items": [], "missing": ["valid_json"], "sources": []}


def test_answer_json_schema_is_closed_and_bounded():
    Draft202012Validator.check_schema(ANSWER_JSON_SCHEMA)
    props = ANSWER_JSON_SCHEMA["properties"]
    assert ANSWER_JSON_SCHEMA["additionalProperties"] is False
    assert ANSWER_JSON_SCHEMA["required"] == list(KEYS) == list(props)
    assert props["answer"]["maxLength"] == ANSWER_MAX_LENGTH
    assert props["status"]["enum"] == list(STATUSES)
    assert props["category"]["enum"] == list(CATEGORIES)
    for key in ("missing", "sources"):
        assert props[key]["items"]["maxLength"] > 0 and props[key]["maxItems"] == MAX_LIST_ENTRIES
    assert props["items"]["items"]["additionalProperties"] is False
    assert all(field["maxLength"] > 0 for field in props["items"]["items"]["properties"].values())


def test_the_longest_valid_answer_fits_the_tokens_a_guided_reply_gets():
    assert max_json_bytes(ANSWER_JSON_SCHEMA) <= ANSWER_TOKENS
    longest = {"status": "needs_clarification", "answer": "x" * ANSWER_MAX_LENGTH, "category": "campus_resource",
               "items": [{"name": "n" * 24, "value": "v" * 24}] * MAX_LIST_ENTRIES,
               "missing": ["m" * 30] * MAX_LIST_ENTRIES, "sources": ["s" * 30] * MAX_LIST_ENTRIES}
    assert validate_answer(longest) == []
    assert len(json.dumps(longest)) == max_json_bytes(ANSWER_JSON_SCHEMA)


def test_the_fallback_is_recognised_and_a_models_own_question_is_not():
    assert is_fallback(format_error("empty_model_response"))
    assert not is_fallback(PARSED["valid_needs_clarification"]) and not is_fallback(VALID)


@pytest.mark.parametrize("case_id", sorted(PARSED))
def test_answer_json_schema_agrees_with_validate_answer(case_id):
    data = PARSED[case_id]
    assert Draft202012Validator(ANSWER_JSON_SCHEMA).is_valid(data) == (validate_answer(data) == [])
