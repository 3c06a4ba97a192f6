"""Read and check an OpenAI chat-completions request body before the model sees it."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from helpers.api_errors import RequestError
from helpers.dialects import Constraint, constraint_from_body

# The embedded model reads text only; an image part becomes this line so the
# conversation keeps its shape (the Holo3 observation wrapper stays intact).
IMAGE_PLACEHOLDER = "[image omitted: the embedded model reads text only]"
ROLES = {"system", "user", "assistant", "developer"}
UNSUPPORTED_FIELDS = {
    "tools": "tool calling is not implemented here; ask for a JSON schema instead (the Holo3 format needs no tools)",
    "tool_choice": "tool calling is not implemented here; ask for a JSON schema instead",
    "functions": "function calling is not implemented here; ask for a JSON schema instead",
}


@dataclass
class ChatRequest:
    model: str
    messages: list[dict[str, str]]
    constraint: Constraint | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int | None = None
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False


def _text_of(content: Any, where: str) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    if not isinstance(content, list):
        raise RequestError(f"{where}.content must be a string or a list of parts", f"{where}.content")
    pieces = []
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            pieces.append(part["text"])
        elif kind in ("image_url", "input_image", "image"):
            pieces.append(IMAGE_PLACEHOLDER)
        else:
            raise RequestError(f"{where}.content[{i}] must be a text or image_url part", f"{where}.content[{i}]")
    return "".join(pieces)


def _messages(raw: Any) -> list[dict[str, str]]:
    if not isinstance(raw, list) or not raw:
        raise RequestError("'messages' is required and must be a non-empty list", "messages", "missing_messages")
    messages = []
    for i, message in enumerate(raw):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise RequestError(f"{where} must be an object with 'role' and 'content'", where)
        role = message.get("role")
        if role == "tool":
            raise RequestError(f"{where}: the 'tool' role is not supported; send tool results as a user "
                               "message, as the Holo3 format does", f"{where}.role")
        if role not in ROLES:
            raise RequestError(f"{where}.role must be one of system, user, assistant; got {role!r}", f"{where}.role")
        role = "system" if role == "developer" else role
        messages.append({"role": role, "content": _text_of(message.get("content"), where)})
    return messages


def _number(body: dict, key: str, default: float, low: float, high: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise RequestError(f"{key} must be a number between {low} and {high}, got {value!r}", key)
    return float(value)


def _optional_int(body: dict, key: str, low: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise RequestError(f"{key} must be an integer >= {low}, got {value!r}", key)
    return value


def _stop(value: Any) -> list[str]:
    if value is None:
        return []
    stops = [value] if isinstance(value, str) else value
    if not isinstance(stops, list) or len(stops) > 4 or not all(isinstance(s, str) and s for s in stops):
        raise RequestError("stop must be a non-empty string or a list of at most 4 of them", "stop")
    return stops


def _refuse_unsupported(body: dict) -> None:
    for key, why in UNSUPPORTED_FIELDS.items():
        if body.get(key):
            raise RequestError(why, key, "unsupported_parameter")
    if body.get("n") not in (None, 1):
        raise RequestError("this server returns one choice per request: n must be 1", "n", "unsupported_parameter")
    if body.get("logprobs"):
        raise RequestError("logprobs are not implemented by this server", "logprobs", "unsupported_parameter")


def parse_body(raw: bytes) -> dict:
    try:
        body = json.loads(raw or b"")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}", None, "invalid_json") from exc
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", None, "invalid_json")
    return body


def parse_chat_request(body: dict, served_models: list[str]) -> ChatRequest:
    """A checked `ChatRequest`, or a `RequestError` that names the offending field."""
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("'model' is required", "model", "missing_model")
    if model not in served_models:
        raise RequestError(f"unknown model {model!r}; this server serves {', '.join(served_models)}",
                           "model", "model_not_found")
    _refuse_unsupported(body)
    max_tokens = _optional_int(body, "max_completion_tokens", 1) or _optional_int(body, "max_tokens", 1)
    stream = body.get("stream") or False
    if not isinstance(stream, bool):
        raise RequestError("stream must be true or false", "stream")
    return ChatRequest(
        model=model,
        messages=_messages(body.get("messages")),
        constraint=constraint_from_body(body),
        temperature=_number(body, "temperature", 1.0, 0.0, 2.0),
        top_p=_number(body, "top_p", 1.0, 0.0, 1.0),
        seed=_optional_int(body, "seed", 0),
        max_tokens=max_tokens,
        stop=_stop(body.get("stop")),
        stream=stream,
        include_usage=bool((body.get("stream_options") or {}).get("include_usage")),
    )
