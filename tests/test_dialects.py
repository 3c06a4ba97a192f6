import pytest

from helpers.runtime.dialects import (
    BODY_FIELDS,
    DIALECTS,
    TRACE_FIELD,
    Constraint,
    DialectError,
    as_received,
    constraint_from_body,
    guided_json,
    request_fields,
    with_trace,
)
from helpers.runtime.strict_subset import NotInStrictSubset, to_strict_subset

# Already in OpenAI's strict subset, so every dialect sends it unchanged.
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "additionalProperties": False}


def body_of(fields: dict) -> dict:
    """What the openai client puts on the wire: extra_body keys become top-level fields."""
    return {"model": "m", "messages": [], **fields.get("extra_body", {}),
            **{k: v for k, v in fields.items() if k != "extra_body"}}


def test_each_dialect_spells_guided_json_as_its_server_documents():
    assert guided_json("nvext", SCHEMA) == {"extra_body": {"nvext": {"guided_json": SCHEMA}}}
    assert guided_json("structured_outputs", SCHEMA) == {"extra_body": {"structured_outputs": {"json": SCHEMA}}}
    assert guided_json("guided_json", SCHEMA) == {"extra_body": {"guided_json": SCHEMA}}
    assert guided_json("response_format", SCHEMA, "step") == {"response_format": {
        "type": "json_schema", "json_schema": {"name": "step", "schema": SCHEMA, "strict": True}}}
    assert guided_json("json_object_schema", SCHEMA) == {"response_format": {"type": "json_object", "schema": SCHEMA}}
    assert guided_json("prompt_only", SCHEMA) == {}


@pytest.mark.parametrize("dialect", [d for d in DIALECTS if d != "prompt_only"])
def test_schema_round_trips_through_every_dialect(dialect):
    constraint = constraint_from_body(body_of(guided_json(dialect, SCHEMA)))
    assert (constraint.kind, constraint.value) == ("json_schema", SCHEMA)


@pytest.mark.parametrize("dialect", DIALECTS)
def test_as_received_shows_the_schema_the_server_reads_and_the_wrapper_around_it(dialect):
    """What notebook 02 prints: the schema as the server reads it, and the request with "SCHEMA" in its place."""
    open_schema = {"type": "object", "properties": {"a": {"type": "integer", "default": 1}}}
    fields = guided_json(dialect, open_schema, "step")
    received, wrapper = as_received(fields)
    if dialect == "prompt_only":
        assert (received, wrapper) == (None, {})
        return
    assert received == constraint_from_body(body_of(fields)).value
    assert received == (to_strict_subset(open_schema) if dialect == "response_format" else open_schema)
    assert "SCHEMA" in str(wrapper) and "integer" not in str(wrapper)
    assert wrapper.keys() == fields.keys()


@pytest.mark.parametrize("dialect", ["nvext", "structured_outputs", "guided_json"])
@pytest.mark.parametrize("kind,value", [("choice", ["yes", "no"]), ("regex", r"\d{3}")])
def test_choice_and_regex_round_trip(dialect, kind, value):
    constraint = constraint_from_body(body_of(request_fields(dialect, Constraint(kind, value))))
    assert (constraint.kind, constraint.value) == (kind, value)


def test_response_format_sends_strict_true_only_with_a_schema_rewritten_into_the_subset():
    open_schema = {"type": "object", "properties": {"a": {"type": "integer", "default": 1}}}
    sent = guided_json("response_format", open_schema)["response_format"]["json_schema"]
    assert sent["strict"] is True
    assert sent["schema"] == {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}, "required": ["a"],
                              "additionalProperties": False}
    beyond = {"type": "object", "allOf": [{"required": ["a"]}]}
    with pytest.raises(NotInStrictSubset, match="allOf"):
        to_strict_subset(beyond)
    # what no rewrite brings into the subset goes as it is, never with strict: true
    assert guided_json("response_format", beyond)["response_format"]["json_schema"] == {
        "name": "output", "schema": beyond, "strict": False}
    assert guided_json("structured_outputs", open_schema) == {"extra_body": {"structured_outputs": {"json": open_schema}}}


def test_response_format_cannot_express_a_choice():
    with pytest.raises(ValueError, match="no spelling for a choice"):
        request_fields("response_format", Constraint("choice", ["a"]))


def test_unknown_dialect_names_the_known_ones():
    with pytest.raises(ValueError, match="nvext"):
        guided_json("tgi", SCHEMA)


def test_plain_request_has_no_constraint():
    assert constraint_from_body({}) is None
    assert constraint_from_body({"response_format": {"type": "text"}}) is None
    assert constraint_from_body({"nvext": {"repetition_penalty": None}}) is None


def test_every_top_level_field_a_dialect_writes_is_one_the_reader_declares():
    for dialect in DIALECTS:
        fields = guided_json(dialect, SCHEMA)
        assert set(fields.get("extra_body", {})) | (set(fields) - {"extra_body"}) <= set(BODY_FIELDS)


def test_the_trace_request_rides_in_extra_body_beside_the_constraint():
    fields = with_trace(guided_json("nvext", SCHEMA))
    assert fields == {"extra_body": {"nvext": {"guided_json": SCHEMA}, TRACE_FIELD: True}}
    assert with_trace({}) == {"extra_body": {TRACE_FIELD: True}}


def test_json_object_without_schema_means_any_object():
    assert constraint_from_body({"response_format": {"type": "json_object"}}).kind == "json_object"


def test_vllms_structured_outputs_json_object_means_any_object():
    constraint = constraint_from_body({"structured_outputs": {"json_object": True}})
    assert (constraint.kind, constraint.field) == ("json_object", "structured_outputs.json_object")
    assert constraint_from_body({"structured_outputs": {"json_object": False}}) is None
    written = request_fields("structured_outputs", Constraint("json_object"))
    assert written == {"extra_body": {"structured_outputs": {"json_object": True}}}
    assert constraint_from_body(body_of(written)).kind == "json_object"


def test_a_key_the_server_refuses_is_not_listed_as_one_it_takes():
    with pytest.raises(DialectError) as caught:
        constraint_from_body({"structured_outputs": {"jsn": SCHEMA}})
    taken = str(caught.value).split(" takes ", 1)[1]
    assert set(taken.split(", ")) == {"choice", "json", "json_object", "regex"}


def test_schema_may_arrive_as_a_json_string():
    assert constraint_from_body({"guided_json": '{"type": "string"}'}).value == {"type": "string"}


@pytest.mark.parametrize("body,param,code", [
    ({"guided_json": SCHEMA, "response_format": {"type": "json_object"}}, "response_format", "conflicting_constraints"),
    ({"nvext": {"guided_json": SCHEMA, "guided_regex": "a"}}, "nvext.guided_regex", "conflicting_constraints"),
    ({"structured_outputs": {"json": SCHEMA, "choice": ["a"]}}, "structured_outputs.choice", "conflicting_constraints"),
    ({"guided_json": "{not json"}, "guided_json", "invalid_schema"),
    ({"guided_json": [1, 2]}, "guided_json", "invalid_schema"),
    ({"guided_choice": []}, "guided_choice", "invalid_choice"),
    ({"guided_choice": ["a", 3]}, "guided_choice", "invalid_choice"),
    ({"guided_regex": 5}, "guided_regex", "invalid_regex"),
    ({"guided_grammar": "root ::= x"}, "guided_grammar", "unsupported_constraint"),
    ({"structured_outputs": {"grammar": "x"}}, "structured_outputs.grammar", "unsupported_constraint"),
    ({"structured_outputs": {"structural_tag": "x"}}, "structured_outputs.structural_tag", "unsupported_constraint"),
    ({"structured_outputs": {"json_object": "yes"}}, "structured_outputs.json_object", "invalid_json_object"),
    ({"response_format": {"type": "yaml"}}, "response_format.type", None),
    ({"response_format": "json"}, "response_format", None),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema", "invalid_schema"),
    ({"nvext": "guided"}, "nvext", None),
    ({"nvext": {"guided_jsn": SCHEMA}}, "nvext.guided_jsn", "unknown_parameter"),
    ({"nvext": {"top_k": 5}}, "nvext.top_k", "unsupported_parameter"),
    ({"structured_outputs": {"jsn": SCHEMA}}, "structured_outputs.jsn", "unknown_parameter"),
    ({"structured_outputs": {"json": SCHEMA, "disable_fallback": True}}, "structured_outputs.disable_fallback",
     "unsupported_parameter"),
    ({"response_format": {"type": "json_object", "schemma": SCHEMA}}, "response_format.schemma", "unknown_parameter"),
    ({"response_format": {"type": "json_schema", "schema": SCHEMA}}, "response_format.schema", "unknown_parameter"),
    ({"response_format": {"type": "json_schema", "json_schema": {"schema": SCHEMA, "strickt": True}}},
     "response_format.json_schema.strickt", "unknown_parameter"),
    ({"response_format": {"type": "text", "json_schema": {"schema": SCHEMA}}}, "response_format.json_schema",
     "unknown_parameter"),
])
def test_bad_constraints_name_the_field(body, param, code):
    with pytest.raises(DialectError) as caught:
        constraint_from_body(body)
    assert (caught.value.field, caught.value.code) == (param, code)
    assert str(caught.value)
