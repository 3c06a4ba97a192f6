import pytest

from helpers.api_errors import RequestError
from helpers.chat_request import IMAGE_PLACEHOLDER, parse_body, parse_chat_request

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
        (1.0, 1.0, None, None, [], False)


def test_sampling_fields_are_read():
    parsed = parse_chat_request(request(temperature=0, top_p=0.9, seed=7, max_tokens=12, stop="END", stream=True,
                                        stream_options={"include_usage": True}), MODELS)
    assert (parsed.temperature, parsed.top_p, parsed.seed, parsed.max_tokens, parsed.stop, parsed.stream,
            parsed.include_usage) == (0.0, 0.9, 7, 12, ["END"], True, True)


def test_max_completion_tokens_is_the_newer_name_for_max_tokens():
    assert parse_chat_request(request(max_completion_tokens=5), MODELS).max_tokens == 5


def test_content_parts_are_joined_and_images_become_a_placeholder():
    parts = [{"type": "text", "text": "<observation>\n"},
             {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
             {"type": "text", "text": "\n</observation>"}]
    parsed = parse_chat_request(request(messages=[{"role": "user", "content": parts}]), MODELS)
    assert parsed.messages[0]["content"] == f"<observation>\n{IMAGE_PLACEHOLDER}\n</observation>"


def test_developer_role_is_a_system_message():
    parsed = parse_chat_request(request(messages=[{"role": "developer", "content": "x"}]), MODELS)
    assert parsed.messages[0]["role"] == "system"


@pytest.mark.parametrize("raw", [b"", b"{", b"[1, 2]", b"\xff\xfe", b'"text"'])
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
    (request(messages=[{"role": "user", "content": [{"type": "audio"}]}]), "messages[0].content[0]", None),
    (request(temperature=3), "temperature", None),
    (request(temperature="hot"), "temperature", None),
    (request(top_p=1.5), "top_p", None),
    (request(seed=-1), "seed", None),
    (request(seed=1.5), "seed", None),
    (request(max_tokens=0), "max_tokens", None),
    (request(max_tokens=True), "max_tokens", None),
    (request(stop=["a", "b", "c", "d", "e"]), "stop", None),
    (request(stop=[""]), "stop", None),
    (request(stream="yes"), "stream", None),
    (request(n=2), "n", "unsupported_parameter"),
    (request(tools=[{"type": "function"}]), "tools", "unsupported_parameter"),
    (request(logprobs=True), "logprobs", "unsupported_parameter"),
    (request(guided_json={"type": "object"}, response_format={"type": "json_object"}),
     "response_format", "conflicting_constraints"),
])
def test_bad_requests_are_400s_naming_the_field(body, param, code):
    error = refused(body)
    assert (error.status, error.param, error.code) == (400, param, code)
    assert error.body()["error"]["type"] == "invalid_request_error"
    assert error.body()["error"]["message"]
