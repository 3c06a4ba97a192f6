import pytest

from helpers.server.protocol import (IMAGES_REFUSED, MAX_MESSAGES, MAX_STOP_LENGTH, NOT_IMPLEMENTED, RequestError,
                                     parse_body, parse_chat_request)

MODELS = ["tiny"]


def request(**fields):
    return {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], **fields}


def refused(body) -> RequestError:
    with pytest.raises(RequestError) as caught:
        parse_chat_request(body, MODELS)
    return caught.value


def test_defaults_follow_openai():
    parsed = parse_chat_request(request(), MODELS)
    assert (parsed.temperature, parsed.top_p, parsed.seed, parsed.max_tokens, parsed.stop, parsed.stream) == \
        (1.0, 1.0, None, None, (), False)


def test_sampling_fields_are_read():
    parsed = parse_chat_request(request(temperature=0, top_p=0.9, seed=7, max_tokens=12, stop="END", stream=True,
                                        stream_options={"include_usage": True}), MODELS)
    assert (parsed.temperature, parsed.top_p, parsed.seed, parsed.max_tokens, parsed.stop, parsed.stream,
            parsed.include_usage) == (0.0, 0.9, 7, 12, ("END",), True, True)


def test_penalties_default_to_none_at_all():
    parsed = parse_chat_request(request(), MODELS)
    assert (parsed.frequency_penalty, parsed.presence_penalty, parsed.repetition_penalty) == (0.0, 0.0, 1.0)


def test_penalties_are_read_with_openai_and_vllm_spellings():
    parsed = parse_chat_request(request(frequency_penalty=0.5, presence_penalty=-2, repetition_penalty=1.3), MODELS)
    assert (parsed.frequency_penalty, parsed.presence_penalty, parsed.repetition_penalty) == (0.5, -2.0, 1.3)


def test_nim_spells_repetition_penalty_inside_nvext_beside_the_constraint():
    schema = {"type": "object"}
    parsed = parse_chat_request(request(nvext={"guided_json": schema, "repetition_penalty": 1.2}), MODELS)
    assert parsed.repetition_penalty == 1.2 and parsed.constraint.value == schema


def test_max_completion_tokens_is_the_newer_name_for_max_tokens():
    assert parse_chat_request(request(max_completion_tokens=5), MODELS).max_tokens == 5


def test_text_parts_are_joined():
    parts = [{"type": "text", "text": "<observation>\n"}, {"type": "text", "text": "\n</observation>"}]
    parsed = parse_chat_request(request(messages=[{"role": "user", "content": parts}]), MODELS)
    assert parsed.messages[0]["content"] == "<observation>\n\n</observation>"


def test_an_image_part_is_refused_because_the_model_reads_text_only():
    parts = [{"type": "text", "text": "<observation>\n"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    with pytest.raises(RequestError) as caught:
        parse_chat_request(request(messages=[{"role": "user", "content": parts}]), MODELS)
    assert caught.value.status == 400 and caught.value.param == "messages[0].content[1]"
    assert IMAGES_REFUSED in str(caught.value)


def test_developer_role_is_a_system_message():
    parsed = parse_chat_request(request(messages=[{"role": "developer", "content": "x"}]), MODELS)
    assert parsed.messages[0]["role"] == "system"


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2]", b"\xff\xfe", b'"text"', b'{"temperature": NaN}',
                                 b'{"a": "\\ud800"}', b"[" * 100_000, b'{"seed": 1' + b"0" * 5000 + b"}"],
                         ids=["empty", "truncated", "array", "not-utf8", "string", "NaN", "lone-surrogate",
                              "deeply-nested", "5000-digit-number"])
def test_malformed_bodies_are_400s(raw):
    with pytest.raises(RequestError) as caught:
        parse_body(raw)
    assert (caught.value.status, caught.value.code) == (400, "invalid_json")


@pytest.mark.parametrize("body,param,code", [
    ({"messages": [{"role": "user", "content": "hi"}]}, "model", "missing_model"),
    (request(model="gpt-9"), "model", "model_not_found"),
    (request(messages=None), "messages", "missing_messages"),
    (request(messages=[]), "messages", "missing_messages"),
    (request(messages=["hi"]), "messages[0]", None),
    (request(messages=[{"role": "wizard", "content": "hi"}]), "messages[0].role", None),
    (request(messages=[{"role": "tool", "content": "42"}]), "messages[0].role", None),
    (request(messages=[{"role": "user", "content": 42}]), "messages[0].content", None),
    (request(messages=[{"role": "user", "content": [{"type": "audio"}]}]), "messages[0].content[0].type", None),
    (request(messages=[{"role": "user", "content": [{"type": "text"}]}]), "messages[0].content[0]", None),
    (request(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]),
     "messages[0].content[0].image_url.url", None),
    (request(messages=[{"role": "user", "content": "hi", "tool_calls": [{"id": "1"}]}]), "messages[0].tool_calls",
     None),
    (request(messages=[{"role": "user", "content": "hi", "colour": "red"}]), "messages[0].colour",
     "unknown_parameter"),
    (request(temperature=3), "temperature", None),
    (request(temperature="hot"), "temperature", None),
    (request(temperature=True), "temperature", None),
    (request(top_p=1.5), "top_p", None),
    (request(seed=-1), "seed", None),
    (request(seed=1.5), "seed", None),
    (request(seed=2**64), "seed", None),
    (request(max_tokens=0), "max_tokens", None),
    (request(max_tokens=True), "max_tokens", None),
    (request(stop=["a", "b", "c", "d", "e"]), "stop", None),
    (request(stop=[""]), "stop[0]", None),
    (request(stop=["ok", "x" * 65]), "stop[1]", None),
    (request(stream="yes"), "stream", None),
    (request(n=2), "n", "unsupported_parameter"),
    (request(tools=[{"type": "function"}]), "tools", "unsupported_parameter"),
    (request(logprobs=True), "logprobs", "unsupported_parameter"),
    (request(n=True), "n", "unsupported_parameter"),
    (request(frequency_penalty=2.5), "frequency_penalty", None),
    (request(presence_penalty=-2.1), "presence_penalty", None),
    (request(presence_penalty="0.5"), "presence_penalty", None),
    (request(repetition_penalty=0), "repetition_penalty", None),
    (request(repetition_penalty=1e400), "repetition_penalty", None),
    (request(nvext={"repetition_penalty": -1.0}), "nvext.repetition_penalty", None),
    (request(nvext={"repetition_penalty": "high"}), "nvext.repetition_penalty", None),
    (request(repetition_penalty=1.1, nvext={"repetition_penalty": 1.1}), "nvext.repetition_penalty",
     "conflicting_parameters"),
    (request(store=True), "store", "unsupported_parameter"),
    (request(temprature=0.5), "temprature", "unknown_parameter"),
    (request(guided_jsn={"type": "object"}), "guided_jsn", "unknown_parameter"),
    (request(trace=True), "trace", "unknown_parameter"),
    (request(x_deadline_s=0), "x_deadline_s", None),
    (request(stream_options={"include_usage": True, "extra": 1}), "stream_options.extra", "unknown_parameter"),
    (request(nvext={"guided_jsn": {"type": "object"}}), "nvext.guided_jsn", "unknown_parameter"),
    (request(response_format={"type": "json_schema", "json_schema": {"schema": {}, "strict": True, "x": 1}}),
     "response_format.json_schema.x", "unknown_parameter"),
    (request(guided_json={"type": "object"}, response_format={"type": "json_object"}),
     "response_format", "conflicting_constraints"),
])
def test_bad_requests_are_400s_naming_the_field(body, param, code):
    error = refused(body)
    assert (error.status, error.param, error.code) == (400, param, code)
    assert error.body()["error"]["type"] == "invalid_request_error"
    assert param.split(".")[-1].split("[")[0] in error.body()["error"]["message"]


def test_a_stop_string_is_at_most_64_characters_and_the_refusal_says_so():
    assert parse_chat_request(request(stop="x" * MAX_STOP_LENGTH), MODELS).stop == ("x" * MAX_STOP_LENGTH,)
    assert f"at most {MAX_STOP_LENGTH} characters" in str(refused(request(stop="x" * 200_000)))


def test_an_unknown_field_is_refused_in_openai_words():
    assert str(refused(request(temprature=0.5))) == "Unrecognized request argument supplied: temprature"


@pytest.mark.parametrize("name", sorted(NOT_IMPLEMENTED))
def test_a_known_parameter_at_its_default_is_accepted_and_anything_else_is_named(name):
    default, _ = NOT_IMPLEMENTED[name]
    parse_chat_request(request(**{name: default}), MODELS)
    parse_chat_request(request(**{name: None}), MODELS)
    error = refused(request(**{name: "something else"}))
    assert (error.param, error.code) == (name, "unsupported_parameter")


def test_identity_fields_change_nothing_and_are_accepted():
    parsed = parse_chat_request(request(user="student-7", metadata={"class": "a"}, safety_identifier="s",
                                        prompt_cache_key="k"), MODELS)
    assert parsed.messages == [{"role": "user", "content": "hi"}]


def test_a_message_the_openai_client_returned_can_be_sent_back():
    echoed = {"role": "assistant", "content": "{}", "refusal": None, "annotations": None, "audio": None,
              "function_call": None, "tool_calls": None}
    assert parse_chat_request(request(messages=[echoed]), MODELS).messages == [{"role": "assistant", "content": "{}"}]


def test_the_trace_and_deadline_extensions_are_read():
    parsed = parse_chat_request(request(x_trace=True, x_deadline_s=2.5), MODELS)
    assert (parsed.trace, parsed.deadline_s) == (True, 2.5)


def test_as_many_messages_as_the_limit_are_read():
    assert len(parse_chat_request(request(messages=[{"role": "user", "content": "a"}] * MAX_MESSAGES),
                                  MODELS).messages) == MAX_MESSAGES


@pytest.mark.parametrize("messages", [
    [{"role": "user", "content": "a"}] * (MAX_MESSAGES + 1),
    [{"role": "user", "content": [{"type": "text", "text": "a"}] * (MAX_MESSAGES + 1)}],
    [{"role": "user", "content": [{"type": "text", "text": "a"}] * (MAX_MESSAGES // 2 + 1)}] * 2,
], ids=["messages", "parts-of-one-message", "parts-of-two"])
def test_more_messages_or_content_parts_than_the_limit_are_refused(messages):
    error = refused(request(messages=messages))
    assert (error.code, error.param) == ("too_many_messages", "messages") and str(MAX_MESSAGES) in error.message
