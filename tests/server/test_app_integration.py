"""The real server, the real model, the official openai client: every dialect, every error path."""
import concurrent.futures
import json
import re
import urllib.request

import jsonschema
import openai
import pytest

from helpers.runtime.dialects import DIALECTS, Constraint, constraint_from_body, guided_json, request_fields
from helpers.runtime.embedded import MODEL_ID

pytestmark = pytest.mark.integration

TASK_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["title", "priority", "tags", "steps"],
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 40},
        "priority": {"enum": ["low", "medium", "high"]},
        "tags": {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "string", "maxLength": 12}},
        "steps": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"$ref": "#/$defs/step"}},
    },
    "$defs": {"step": {"oneOf": [
        {"type": "object", "additionalProperties": False, "required": ["tool_name", "x", "y"],
         "properties": {"tool_name": {"const": "click"},
                        "x": {"type": "integer", "minimum": 0, "maximum": 1000},
                        "y": {"type": "integer", "minimum": 0, "maximum": 1000}}},
        {"type": "object", "additionalProperties": False, "required": ["tool_name", "content"],
         "properties": {"tool_name": {"const": "write"}, "content": {"type": "string", "maxLength": 30}}},
    ]}},
}
MESSAGES = [{"role": "system", "content": "You plan tasks for a computer-use agent. Reply with JSON only."},
            {"role": "user", "content": "Plan: log in to the campus portal and open the library page."}]
GUIDED_DIALECTS = [d for d in DIALECTS if d != "prompt_only"]


def sent(dialect: str) -> tuple[str, str]:
    """The constraint TASK_SCHEMA's request in `dialect` asks the server for, as the server reads it back."""
    fields = guided_json(dialect, TASK_SCHEMA, "task")
    body = {**fields.get("extra_body", {}), **{key: value for key, value in fields.items() if key != "extra_body"}}
    constraint = constraint_from_body(body)
    return constraint.kind, json.dumps(constraint.value, sort_keys=True)


# The server decodes a constraint the same way whatever spelled it (the spelling names the field in an error, no
# more), so the twenty seeds run once for each constraint the dialects send: the first dialect that sends it.
SEEDED = list({sent(dialect): dialect for dialect in reversed(GUIDED_DIALECTS)}.values())


def post(server, body: bytes, path: str = "/chat/completions") -> tuple[int, dict]:
    request = urllib.request.Request(server.url + path, data=body, headers={
        "Content-Type": "application/json", "Authorization": f"Bearer {server.key}"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def ask(client, model, fields, seed, max_tokens=200, temperature=0.8, **extra):
    return client.chat.completions.create(model=model, messages=MESSAGES, temperature=temperature, seed=seed,
                                          max_tokens=max_tokens, **fields, **extra)


@pytest.mark.parametrize("dialect", SEEDED)
def test_twenty_seeded_requests_per_constraint_all_validate(client, model, dialect):
    """About 20 s each on 2 cores (20 replies of up to 200 tokens: 19 s measured with another model running,
    2026-12-03), once per constraint the dialects send."""
    finished = 0
    for seed in range(20):
        reply = ask(client, model, guided_json(dialect, TASK_SCHEMA, "task"), seed)
        choice = reply.choices[0]
        if choice.finish_reason == "stop":
            jsonschema.validate(json.loads(choice.message.content), TASK_SCHEMA)
            finished += 1
    assert finished >= 18, f"only {finished} of 20 guided replies finished within max_tokens"


@pytest.mark.parametrize("dialect", [dialect for dialect in GUIDED_DIALECTS if dialect not in SEEDED])
def test_every_other_spelling_is_enforced_too(client, model, dialect):
    """About a second: one reply, up to three where one runs out of tokens (1.2 s measured, 2026-12-03). Its
    constraint is one a seeded dialect sends (`SEEDED`), so its twenty seeds would decode again what that one's did."""
    replies = (ask(client, model, guided_json(dialect, TASK_SCHEMA, "task"), seed).choices[0] for seed in range(3))
    finished = next((choice for choice in replies if choice.finish_reason == "stop"), None)
    assert finished is not None, "three guided replies in a row ran out of tokens"
    jsonschema.validate(json.loads(finished.message.content), TASK_SCHEMA)


@pytest.mark.parametrize("dialect", ["nvext", "structured_outputs", "guided_json"])
def test_choice_constraint(client, model, dialect):
    fields = request_fields(dialect, Constraint("choice", ["answered", "not_found", "needs_clarification"]))
    for seed in range(5):
        reply = ask(client, model, fields, seed)
        assert reply.choices[0].message.content in {"answered", "not_found", "needs_clarification"}


@pytest.mark.parametrize("dialect", ["nvext", "structured_outputs", "guided_json"])
def test_regex_constraint(client, model, dialect):
    pattern = r"/orders/[0-9]{4}"
    for seed in range(5):
        reply = ask(client, model, request_fields(dialect, Constraint("regex", pattern)), seed)
        assert re.fullmatch(pattern, reply.choices[0].message.content)


def test_json_object_mode_gives_an_object(client, model):
    stopped = 0
    for seed in range(3):
        reply = ask(client, model, {"response_format": {"type": "json_object"}}, seed, max_tokens=300)
        assert reply.choices[0].message.content.startswith("{")
        if reply.choices[0].finish_reason == "stop":
            assert isinstance(json.loads(reply.choices[0].message.content), dict)
            stopped += 1
    assert stopped >= 1


def test_additional_properties_are_allowed_unless_forbidden(client, model):
    # vLLM's spelling sends a schema as it is; the response_format dialect would close it first (OpenAI's subset).
    open_schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    closed_schema = {**open_schema, "additionalProperties": False}
    for seed in range(5):
        closed = ask(client, model, guided_json("structured_outputs", closed_schema), seed, max_tokens=40)
        assert set(json.loads(closed.choices[0].message.content)) == {"a"}
    extra_keys = 0
    for seed in range(5):
        reply = ask(client, model, guided_json("structured_outputs", open_schema), seed, max_tokens=40)
        data = json.loads(reply.choices[0].message.content) if reply.choices[0].finish_reason == "stop" else {}
        extra_keys += any(key != "a" for key in data)
        extra_keys += reply.choices[0].finish_reason == "length"  # still inventing keys when cut off
    assert extra_keys >= 1, "an open schema should leave room for keys the schema never named"


def test_same_seed_same_output_and_other_seeds_vary(client, model):
    fields = guided_json("structured_outputs", TASK_SCHEMA)
    first, again = (ask(client, model, fields, 11).choices[0].message.content for _ in range(2))
    others = {ask(client, model, fields, seed).choices[0].message.content for seed in (12, 13, 14)}
    assert first == again
    assert len(others | {first}) > 1


def test_streaming_reassembles_to_the_non_streaming_text(client, model):
    for fields in (guided_json("nvext", TASK_SCHEMA), {}):
        whole = ask(client, model, fields, 5, max_tokens=80).choices[0]
        pieces, finish = [], None
        for part in ask(client, model, fields, 5, max_tokens=80, stream=True):
            if part.choices:
                pieces.append(part.choices[0].delta.content or "")
                finish = part.choices[0].finish_reason or finish
        assert "".join(pieces) == whole.message.content
        assert finish == whole.finish_reason


def test_stream_reports_usage_when_asked(client, model):
    parts = list(ask(client, model, {}, 1, max_tokens=10, stream=True, stream_options={"include_usage": True}))
    assert parts[-1].usage.completion_tokens == 10 and parts[-1].choices == []


def test_max_tokens_cut_is_reported_as_length(client, model):
    reply = ask(client, model, guided_json("response_format", TASK_SCHEMA), 3, max_tokens=5)
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 5
    with pytest.raises(json.JSONDecodeError):
        json.loads(reply.choices[0].message.content)


def test_stop_string_cuts_the_reply(client, model):
    reply = ask(client, model, guided_json("response_format", TASK_SCHEMA), 0, max_tokens=60, temperature=0,
                stop=['"priority"'])
    assert reply.choices[0].finish_reason == "stop"
    assert '"priority"' not in reply.choices[0].message.content


def test_usage_and_timings_are_reported(client, model):
    reply = ask(client, model, guided_json("response_format", TASK_SCHEMA), 2)
    assert reply.usage.prompt_tokens > 20 and reply.usage.completion_tokens > 5
    timings = reply.model_extra["timings"]
    # nothing that says how much of the prompt the request before shared: that would tell of another's prompt
    assert set(timings) == {"grammar_compile_ms", "prompt_eval_ms", "time_to_first_token_ms", "decode_ms",
                            "mask_us_per_token_p50", "mask_us_per_token_p99", "whole_masks", "whole_mask_us_p50",
                            "forced_tokens", "fast_forward_batches"}
    assert timings["forced_tokens"] > 0 and timings["mask_us_per_token_p50"] > 0
    # every forced token needed the whole mask to be known as forced; free text needed it rarely
    assert timings["forced_tokens"] <= timings["whole_masks"] <= reply.usage.completion_tokens + 1
    assert timings["whole_mask_us_p50"] > 0
    assert 0 < timings["fast_forward_batches"] < timings["forced_tokens"]


def test_image_parts_are_refused_with_a_400_that_says_why(client, model):
    messages = [{"role": "user", "content": [
        {"type": "text", "text": "<observation>\n"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        {"type": "text", "text": "\n</observation>\nWhat do you see?"}]}]
    with pytest.raises(openai.BadRequestError, match="reads text only"):
        client.chat.completions.create(model=model, messages=messages, max_tokens=20, seed=1)


def test_eight_concurrent_clients_all_get_their_own_correct_answer(client, model):
    def one(seed):
        solo = ask(client, model, guided_json("structured_outputs", TASK_SCHEMA), seed)
        return seed, solo.choices[0]

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        results = dict(pool.map(one, range(100, 108)))
    for seed, choice in results.items():
        if choice.finish_reason == "stop":
            jsonschema.validate(json.loads(choice.message.content), TASK_SCHEMA)
        assert choice.message.content == ask(client, model, guided_json("structured_outputs", TASK_SCHEMA),
                                             seed).choices[0].message.content


BAD_BODIES = [
    (b"{not json", "invalid_json"),
    (json.dumps({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}).encode(), "model_not_found"),
    (json.dumps({"model": MODEL_ID}).encode(), "missing_messages"),
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}],
                 "guided_json": {"type": "array", "uniqueItems": True}}).encode(), "unsupported_schema"),
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}],
                 "guided_json": {"type": "bogus"}}).encode(), "unsupported_schema"),
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}],
                 "guided_regex": "[a-"}).encode(), "unsupported_schema"),
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}],
                 "guided_json": {"type": "object"}, "nvext": {"guided_json": {"type": "object"}}}).encode(),
     "conflicting_constraints"),
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}],
                 "max_tokens": 100000}).encode(), "context_length_exceeded"),
    (json.dumps({"model": MODEL_ID,
                 "messages": [{"role": "user", "content": "word " * 9000}]}).encode(), "context_length_exceeded"),
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}],
                 "guided_jsn": {"type": "object"}}).encode(), "unknown_parameter"),
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}],
                 "nvext": {"guided_json": {"type": "object"}, "top_k": 5}}).encode(),
     "unsupported_parameter"),
    # The first byte of U+4232B (0xF1) has no token in this vocabulary: the grammar can never be satisfied.
    (json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}], "max_tokens": 5,
                 "guided_regex": "\U0004232b"}).encode(), "unsatisfiable_constraint"),
]


@pytest.mark.parametrize("body,code", BAD_BODIES, ids=[code for _, code in BAD_BODIES])
def test_bad_requests_get_an_openai_style_400_and_the_server_keeps_serving(server, client, model, body, code):
    status, answer = post(server, body)
    assert status == 400
    assert answer["error"]["code"] == code and answer["error"]["type"] == "invalid_request_error"
    assert answer["error"]["message"]
    assert client.chat.completions.create(model=model, messages=MESSAGES, max_tokens=3).choices[0].message.content


def test_openai_client_raises_bad_request_with_the_message(client, model):
    import openai

    with pytest.raises(openai.BadRequestError, match="uniqueItems"):
        client.chat.completions.create(model=model, messages=MESSAGES,
                                       **guided_json("response_format", {"type": "array", "uniqueItems": True}))


def get(server, path: str) -> urllib.request.Request:
    return urllib.request.Request(server.url.replace("/v1", path), headers={"Authorization": f"Bearer {server.key}"})


def test_unknown_route_is_a_404_error_body(server):
    status, answer = post(server, b"{}", "/completions")
    assert status == 404 and answer["error"]["code"] == "not_found"
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(get(server, "/nothing"), timeout=10)
    assert caught.value.code == 404


def test_health_and_models(server, client, model):
    with urllib.request.urlopen(get(server, "/health"), timeout=10) as response:
        assert json.loads(response.read())["status"] == "ok"
    assert [m.id for m in client.models.list().data] == [model]


def test_a_traced_reply_is_the_reply_without_a_trace(server, model):
    body = {"model": model, "messages": MESSAGES, "max_tokens": 80, "temperature": 0.8, "seed": 4,
            "guided_json": TASK_SCHEMA}
    traced = post(server, json.dumps({**body, "x_trace": True}).encode())[1]
    plain = post(server, json.dumps(body).encode())[1]
    assert traced["choices"][0]["message"]["content"] == plain["choices"][0]["message"]["content"]
    assert "".join(step["token"] for step in traced["trace"]) == plain["choices"][0]["message"]["content"]
    assert sum(step["forced"] for step in traced["trace"]) == plain["timings"]["forced_tokens"]


def test_penalties_are_accepted_in_every_spelling_and_keep_the_reply_valid(client, model):
    for extra in ({"frequency_penalty": 0.8, "presence_penalty": 0.5}, {"extra_body": {"repetition_penalty": 1.3}},
                  {"extra_body": {"nvext": {"guided_json": TASK_SCHEMA, "repetition_penalty": 1.3}}}):
        fields = {} if "nvext" in extra.get("extra_body", {}) else guided_json("response_format", TASK_SCHEMA)
        reply = ask(client, model, fields, 7, temperature=0, **extra)
        assert reply.choices[0].message.content.startswith("{")
        if reply.choices[0].finish_reason == "stop":
            jsonschema.validate(json.loads(reply.choices[0].message.content), TASK_SCHEMA)


def test_trace_shows_the_mask_at_work(server, model):
    body = {"model": model, "messages": MESSAGES, "max_tokens": 30, "temperature": 0, "x_trace": True,
            "guided_choice": ["yes", "no"]}
    status, answer = post(server, json.dumps(body).encode())
    assert status == 200
    first = answer["trace"][0]
    assert first["allowed"] < 10 and all(token in ("yes", "no", "y", "n", "ye") or token.strip()
                                         for token, _ in first["top_after_mask"])


def test_string_pattern_length_and_number_bounds_are_enforced(client, model):
    schema = {"type": "object", "additionalProperties": False, "required": ["sku", "code", "count"],
              "properties": {"sku": {"type": "string", "pattern": "^NF-[0-9]{4}$"},
                             "code": {"type": "string", "minLength": 3, "maxLength": 5},
                             "count": {"type": "integer", "minimum": 3, "maximum": 7}}}
    for seed in range(4):
        reply = ask(client, model, guided_json("response_format", schema), seed, max_tokens=60)
        assert reply.choices[0].finish_reason == "stop"
        jsonschema.validate(json.loads(reply.choices[0].message.content), schema)
