"""Hypothesis strategies for chat-completions bodies: any JSON, bodies with every field name the server
knows (and near misses), and valid bodies with some fields changed. Shared by the model-level and the
HTTP-level fuzz tests."""
from hypothesis import strategies as st

from helpers.runtime.dialects import BODY_FIELDS
from helpers.runtime.embedded import MODEL_ID
from helpers.server.protocol import NOT_IMPLEMENTED

FIELDS = ["model", "messages", "temperature", "top_p", "seed", "max_tokens", "max_completion_tokens", "stop",
          "stream", "stream_options", "user", "metadata", "x_trace", "x_deadline_s", "frequency_penalty",
          "presence_penalty", "repetition_penalty", *BODY_FIELDS, *NOT_IMPLEMENTED,
          "role", "content", "type", "json", "guided_json", "schema", "json_schema", "text", "image_url"]

odd_text = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", "\u0000", "\ufeff", "e\u0301", "\U0001f600" * 3, "\u202e", "tiny", "user", "text", "json_schema"])
numbers = st.integers() | st.floats(allow_nan=False) | st.sampled_from([0, 1, -1, 2**63, 2**64, 10**30, 1e308, -0.0])
scalars = st.none() | st.booleans() | numbers | odd_text
any_json = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.sampled_from(FIELDS) | odd_text, inner, max_size=4), max_leaves=20)
messages = st.lists(st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "developer", "tool", "wizard"]) | any_json},
    optional={"content": any_json | odd_text | st.lists(st.fixed_dictionaries(
        {"type": st.sampled_from(["text", "image_url", "audio"])},
        optional={"text": any_json, "image_url": any_json}), max_size=3),
        "name": any_json}), max_size=3)
bodies = st.fixed_dictionaries({"model": st.sampled_from(["tiny", MODEL_ID]) | any_json,
                                "messages": messages | any_json},
                               optional={name: any_json for name in FIELDS if name not in ("model", "messages")})
plausible = {
    "temperature": st.floats(0, 2) | numbers, "top_p": st.floats(0, 1) | numbers,
    "seed": st.integers(0, 2**63 - 1) | numbers, "max_tokens": st.integers(1, 10**6) | numbers,
    "stop": odd_text | st.lists(odd_text, max_size=5), "stream": st.booleans() | any_json,
    "x_trace": st.booleans() | any_json, "x_deadline_s": numbers,
    "frequency_penalty": st.floats(-2, 2) | numbers, "presence_penalty": st.floats(-2, 2) | numbers,
    "repetition_penalty": st.floats(0, 3) | numbers,
    "guided_json": st.just({"type": "object"}) | any_json,
    "guided_choice": st.lists(odd_text, max_size=3) | any_json, "guided_regex": odd_text | any_json,
    "structured_outputs": st.dictionaries(st.sampled_from(["json", "choice", "regex", "grammar", "jsn"]), any_json,
                                          max_size=2),
    "nvext": st.dictionaries(st.sampled_from(["guided_json", "guided_choice", "top_k", "guided_jsn",
                                                             "repetition_penalty"]), any_json,
                             max_size=2),
    "response_format": st.fixed_dictionaries({"type": st.sampled_from(["text", "json_object", "json_schema", "x"])},
                                             optional={"json_schema": any_json, "schema": any_json}),
    "n": st.sampled_from([1, 2, True, None]), "logprobs": st.sampled_from([False, True, 0, None]),
}
near_valid = st.fixed_dictionaries({"model": st.sampled_from([MODEL_ID, "tiny"]),
                                    "messages": st.just([{"role": "user", "content": "hi"}])}, optional=plausible)
