"""Fuzzing the request models with hypothesis, no server needed: whatever arrives, the answer is an accepted
request or a precise 400 that names its field, never another exception."""
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from body_strategies import any_json, bodies, near_valid
from helpers.runtime.embedded import MODEL_ID
from helpers.server.protocol import ChatRequest, RequestError, parse_body, parse_chat_request

pytestmark = pytest.mark.slow

MODELS = ["tiny", MODEL_ID]


def settle(body) -> ChatRequest | RequestError:
    try:
        return parse_chat_request(body, MODELS)
    except RequestError as error:
        return error


def assert_precise(error: RequestError) -> None:
    assert error.status == 400 and error.message
    assert error.param is None or isinstance(error.param, str)
    json.dumps(error.body())  # the answer itself can always be sent


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bodies)
def test_any_body_is_accepted_or_refused_precisely(body):
    outcome = settle(body)
    if isinstance(outcome, RequestError):
        assert_precise(outcome)
        if outcome.param:
            root = outcome.param.split(".")[0].split("[")[0]
            assert root in body, f"{outcome.param} names no field of the body"
    else:
        assert outcome.messages and all(m["role"] in ("system", "user", "assistant") for m in outcome.messages)
        assert all(isinstance(m["content"], str) for m in outcome.messages)


@settings(max_examples=600, deadline=None)
@given(near_valid)
def test_a_valid_body_with_any_field_changed_is_accepted_or_refused_precisely(body):
    outcome = settle(body)
    if isinstance(outcome, RequestError):
        assert_precise(outcome)
        assert outcome.param and outcome.param.split(".")[0].split("[")[0] in body
    else:
        assert 0 <= outcome.temperature <= 2 and 0 <= outcome.top_p <= 1
        assert outcome.constraint is None or outcome.constraint.field.split(".")[0] in body


@settings(max_examples=300, deadline=None)
@given(any_json)
def test_any_json_value_as_the_whole_body(value):
    outcome = settle(value) if isinstance(value, dict) else None
    if isinstance(outcome, RequestError):
        assert_precise(outcome)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | any_json.map(lambda v: json.dumps(v).encode()))
def test_any_bytes_are_a_json_object_or_an_invalid_json_400(raw):
    try:
        body = parse_body(raw)
    except RequestError as error:
        assert (error.status, error.code) == (400, "invalid_json")
        return
    assert isinstance(body, dict)
    outcome = settle(body)
    if isinstance(outcome, RequestError):
        assert_precise(outcome)
