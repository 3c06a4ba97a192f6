"""The chat-completions request and response, as Pydantic models: notebook 02's lesson applied to the server.

A request body is read in three steps, each with an OpenAI-style error that names the field:
`parse_body` (is it a JSON object?), `ChatCompletionRequest` (is every field one this server
knows, of the right type and range?), then `helpers.runtime.dialects` (which constraint do the
guided-decoding fields ask for?). A field nobody here knows is refused, as OpenAI refuses it,
and so is a known parameter this server does not implement: dropping either would hand the
client something it never asked for.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
    create_model,
    model_validator,
)
from pydantic_core import PydanticCustomError

from helpers.runtime.dialects import BODY_FIELDS, TRACE_FIELD, Constraint, DialectError, constraint_from_body
from helpers.runtime.schema_tree import json_path

# The embedded model reads text only, and the server says so, as text-only servers do (llama-cpp-python's answers
# a 500): an image it silently dropped would let a client believe a model saw a screen it never saw.
IMAGES_REFUSED = ("the embedded model reads text only: send the screen as text (helpers.loop.observation_message "
                  "with image=False), not an image_url part")
MAX_STOP_STRINGS = 4
# A stop string is a short marker ("</answer>", "\n\n"); a long one only makes the server hold back that much text.
MAX_STOP_LENGTH = 64
MAX_SEED = 2**63 - 1
# Messages, and content parts, one request may hold: an agent's conversation sends a few dozen, and each message's frame
# in the chat template takes 5 of the context's 8,192 tokens. They are counted on the raw JSON, before the request
# models read them: reading 300,000 one-character messages took seconds.
MAX_MESSAGES = 1024
MAX_DEADLINE_S = 3600.0
# OpenAI's range for frequency_penalty and presence_penalty; vLLM only asks that repetition_penalty be positive.
PENALTY_RANGE = 2.0

# OpenAI chat-completions parameters this server knows but does not implement: refused by name unless
# they hold their default. Identity fields (user, metadata, ...) change nothing about the reply and are accepted.
NOT_IMPLEMENTED: dict[str, tuple[Any, str]] = {
    "tools": (None, "tool calling is not implemented here; ask for a JSON schema instead (the Holo3 format "
                    "needs no tools)"),
    "tool_choice": (None, "tool calling is not implemented here; ask for a JSON schema instead"),
    "parallel_tool_calls": (None, "tool calling is not implemented here"),
    "functions": (None, "function calling is not implemented here; ask for a JSON schema instead"),
    "function_call": (None, "function calling is not implemented here; ask for a JSON schema instead"),
    "n": (1, "this server returns one choice per request: n must be 1"),
    "logprobs": (False, "logprobs are not implemented by this server"),
    "top_logprobs": (None, "logprobs are not implemented by this server"),
    "logit_bias": (None, "logit_bias is not implemented by this server"),
    "top_k": (None, "top_k (a vLLM extension) is not implemented by this server"),
    "min_p": (None, "min_p (a vLLM extension) is not implemented by this server"),
    "guided_decoding_backend": (None, "guided_decoding_backend (a vLLM extension) is not implemented: this "
                                      "server always guides with llguidance"),
    "guided_whitespace_pattern": (None, "guided_whitespace_pattern (a vLLM extension) is not implemented by "
                                        "this server"),
    "audio": (None, "audio output is not implemented by this server"),
    "modalities": (None, "this server answers in text only"),
    "prediction": (None, "predicted outputs are not implemented by this server"),
    "reasoning_effort": (None, "this model does not reason before answering"),
    "verbosity": (None, "verbosity is not implemented by this server"),
    "web_search_options": (None, "web search is not implemented by this server"),
    "service_tier": (None, "service tiers are not implemented by this server"),
    "store": (False, "this server stores nothing: store must be false"),
}


@dataclass
class RequestError(Exception):
    """A request the server refuses; becomes `{"error": {...}}` with `status`."""

    message: str
    param: str | None = None
    code: str | None = None
    status: int = 400
    type: str = "invalid_request_error"
    retry_after: int | None = None

    def __str__(self) -> str:
        return self.message

    def body(self) -> dict:
        return ErrorBody(error=ErrorDetail(message=self.message, type=self.type, param=self.param,
                                           code=self.code)).model_dump()


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ImageURL(_Closed):
    url: StrictStr
    detail: Literal["auto", "low", "high"] | None = None


class ContentPart(_Closed):
    """A text part or an image part of a message's content."""

    type: Literal["text", "image_url"]
    text: StrictStr | None = None
    image_url: ImageURL | None = None

    @model_validator(mode="after")
    def _holds_its_kind(self) -> "ContentPart":
        if self.type == "text" and self.text is None:
            raise PydanticCustomError("missing_text", "a text part needs 'text' (a string)")
        if self.type == "image_url" and self.image_url is None:
            raise PydanticCustomError("missing_image", "an image_url part needs 'image_url' with a 'url'")
        if self.type == "image_url":
            raise PydanticCustomError("image_not_supported", IMAGES_REFUSED)
        return self


def _content_as_parts(value: Any) -> Any:
    if value is None:
        return []
    if isinstance(value, str):
        return [{"type": "text", "text": value}]
    if not isinstance(value, list):
        raise PydanticCustomError("content_type", "content must be a string or a list of text and image_url parts")
    return value


def _role(value: Any) -> Any:
    if value == "tool":
        raise PydanticCustomError("tool_role", "the 'tool' role is not supported; send tool results as a user "
                                               "message, as the Holo3 format does")
    return value


class Message(_Closed):
    role: Annotated[Literal["system", "user", "assistant", "developer"], BeforeValidator(_role)]
    content: Annotated[list[ContentPart], BeforeValidator(_content_as_parts)] = []
    name: StrictStr | None = None
    # What the openai client's own message objects carry when a reader sends one back; only null is accepted.
    refusal: StrictStr | None = None
    tool_calls: None = None
    function_call: None = None
    audio: None = None
    annotations: None = None

    def as_chat(self) -> dict[str, str]:
        return {"role": "system" if self.role == "developer" else self.role,
                "content": "".join(part.text for part in self.content)}


def _stop_as_list(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


class StreamOptions(_Closed):
    include_usage: StrictBool | None = None


RepetitionPenalty = Annotated[StrictFloat, Field(gt=0, allow_inf_nan=False)]
_repetition_penalty = TypeAdapter(RepetitionPenalty)


GuidedFields = create_model("GuidedFields", __config__=ConfigDict(extra="forbid"),
                            **{name: (Any, None) for name in BODY_FIELDS})


class ChatCompletionRequest(GuidedFields):
    """The body of `POST /v1/chat/completions`: OpenAI's parameters, the guided-decoding extensions, and
    this server's own `x_trace` and `x_deadline_s`."""

    model_config = ConfigDict(extra="forbid")

    model: StrictStr = Field(min_length=1)
    messages: list[Message] = Field(min_length=1)
    temperature: StrictFloat | None = Field(None, ge=0, le=2)
    top_p: StrictFloat | None = Field(None, ge=0, le=1)
    seed: StrictInt | None = Field(None, ge=0, le=MAX_SEED)
    frequency_penalty: StrictFloat | None = Field(None, ge=-PENALTY_RANGE, le=PENALTY_RANGE, allow_inf_nan=False)
    presence_penalty: StrictFloat | None = Field(None, ge=-PENALTY_RANGE, le=PENALTY_RANGE, allow_inf_nan=False)
    repetition_penalty: RepetitionPenalty | None = None
    max_tokens: StrictInt | None = Field(None, ge=1)
    max_completion_tokens: StrictInt | None = Field(None, ge=1)
    stop: Annotated[list[Annotated[StrictStr, Field(min_length=1, max_length=MAX_STOP_LENGTH)]] | None,
                    BeforeValidator(_stop_as_list)] = Field(None, max_length=MAX_STOP_STRINGS)
    stream: StrictBool | None = None
    stream_options: StreamOptions | None = None
    user: StrictStr | None = None
    metadata: dict[StrictStr, StrictStr] | None = None
    safety_identifier: StrictStr | None = None
    prompt_cache_key: StrictStr | None = None
    trace: StrictBool = Field(False, alias=TRACE_FIELD)
    deadline_s: StrictFloat | None = Field(None, alias="x_deadline_s", gt=0, le=MAX_DEADLINE_S)

    @model_validator(mode="before")
    @classmethod
    def _refuse_not_implemented(cls, data: Any) -> Any:
        """A known parameter holding anything but its default is refused by name; its default is harmless."""
        if not isinstance(data, dict):
            return data
        for key, (default, why) in NOT_IMPLEMENTED.items():
            value = data.get(key)
            if value is None or (isinstance(value, bool) == isinstance(default, bool) and value == default):
                continue
            raise PydanticCustomError("unsupported_parameter", "{key}: {why}", {"key": key, "why": why})
        return {k: v for k, v in data.items() if k not in NOT_IMPLEMENTED}

    @property
    def token_limit(self) -> int | None:
        return self.max_completion_tokens or self.max_tokens

    def guided_fields(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in BODY_FIELDS if getattr(self, name) is not None}

    def repetition(self) -> float:
        """repetition_penalty, read at the top level (vLLM) or inside nvext (NIM), never both."""
        nested = self.nvext.get("repetition_penalty") if isinstance(self.nvext, dict) else None
        if nested is None:
            return 1.0 if self.repetition_penalty is None else float(self.repetition_penalty)
        if self.repetition_penalty is not None:
            raise RequestError("repetition_penalty is given twice, at the top level and in nvext; send one",
                               "nvext.repetition_penalty", "conflicting_parameters")
        try:
            return float(_repetition_penalty.validate_python(nested))
        except ValidationError as exc:
            raise RequestError(f"nvext.repetition_penalty: {exc.errors(include_url=False)[0]['msg']}, got "
                               f"{_short(nested)}", "nvext.repetition_penalty") from None


@dataclass
class ChatRequest:
    """What the engine needs from a request, checked: plain chat messages, the constraint, the sampling."""

    model: str
    messages: list[dict[str, str]]
    constraint: Constraint | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None
    max_tokens: int | None = None
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    stop: tuple[str, ...] = ()
    stream: bool = False
    include_usage: bool = False
    trace: bool = False
    deadline_s: float | None = None


def _reject_constant(name: str) -> float:
    raise ValueError(f"{name} is not a JSON number")


def parse_body(raw: bytes) -> dict:
    """The request body as a JSON object, or a 400: not JSON, not an object, or text that cannot be encoded."""
    try:
        body = json.loads(raw or b"", parse_constant=_reject_constant)
        # A lone surrogate escape ("\\ud800") decodes to a str that cannot be encoded to UTF-8 later.
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except (ValueError, UnicodeError, RecursionError) as exc:
        raise RequestError(f"the request body is not valid JSON: {exc}", None, "invalid_json") from exc
    if not isinstance(body, dict):
        raise RequestError("the request body must be a JSON object", None, "invalid_json")
    return body


def _as_request_error(error: dict) -> RequestError:
    """One Pydantic error as the OpenAI-style 400 it stands for, naming the field."""
    kind, loc = error["type"], tuple(error["loc"])
    if kind == "unsupported_parameter":
        key = error["ctx"]["key"]
        return RequestError(error["ctx"]["why"], key, "unsupported_parameter")
    path = json_path(loc)
    if kind == "extra_forbidden":
        if len(loc) == 1:
            return RequestError(f"Unrecognized request argument supplied: {path}", path, "unknown_parameter")
        return RequestError(f"{path} is not a field this server knows", path, "unknown_parameter")
    if loc == ("model",):
        return RequestError("'model' is required and must be a non-empty string", "model", "missing_model")
    if loc and loc[0] == "messages" and len(loc) == 1:
        return RequestError("'messages' is required and must be a non-empty list", "messages", "missing_messages")
    shown = "" if kind == "missing" else f", got {_short(error.get('input'))}"
    return RequestError(f"{path or 'the request body'}: {error['msg']}{shown}", path or None)


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def check_counts(body: dict) -> None:
    """Refuse more than MAX_MESSAGES messages, or content parts, before any model reads them."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return
    parts = sum(len(message["content"]) for message in messages
                if isinstance(message, dict) and isinstance(message.get("content"), list))
    for what, count in (("messages", len(messages)), ("content parts", parts)):
        if count > MAX_MESSAGES:
            raise RequestError(f"the request holds {count} {what}; this server accepts at most {MAX_MESSAGES}",
                               "messages", "too_many_messages")


def parse_chat_request(body: dict, served_models: list[str]) -> ChatRequest:
    """A checked `ChatRequest`, or a `RequestError` that names the offending field."""
    check_counts(body)
    try:
        request = ChatCompletionRequest.model_validate(body)
    except ValidationError as exc:
        raise _as_request_error(exc.errors(include_url=False)[0]) from None
    if request.model not in served_models:
        raise RequestError(f"unknown model {request.model!r}; this server serves {', '.join(served_models)}",
                           "model", "model_not_found")
    try:
        constraint = constraint_from_body(request.guided_fields())
    except DialectError as exc:
        raise RequestError(str(exc), exc.field, exc.code) from None
    return ChatRequest(
        model=request.model,
        messages=[message.as_chat() for message in request.messages],
        constraint=constraint,
        temperature=1.0 if request.temperature is None else float(request.temperature),
        top_p=1.0 if request.top_p is None else float(request.top_p),
        seed=request.seed,
        max_tokens=request.token_limit,
        frequency_penalty=float(request.frequency_penalty or 0.0),
        presence_penalty=float(request.presence_penalty or 0.0),
        repetition_penalty=request.repetition(),
        stop=tuple(request.stop or ()),
        stream=bool(request.stream),
        include_usage=bool(request.stream_options and request.stream_options.include_usage),
        trace=request.trace,
        deadline_s=None if request.deadline_s is None else float(request.deadline_s),
    )


# --- responses ---------------------------------------------------------------------------------------------------

def _is_none(value: Any) -> bool:
    return value is None


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None
    code: str | None


class ErrorBody(BaseModel):
    error: ErrorDetail


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class Choice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: Literal["stop", "length"]
    logprobs: None = None


class ChatCompletion(BaseModel):
    """The non-streamed answer; `timings` and `trace` are this server's extensions."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: Usage
    timings: dict[str, Any]
    trace: list[dict] | None = Field(None, exclude_if=_is_none)


class Delta(BaseModel):
    role: Literal["assistant"] | None = Field(None, exclude_if=_is_none)
    content: str | None = Field(None, exclude_if=_is_none)


class ChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: Literal["stop", "length"] | None = None
    logprobs: None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: Usage | None = Field(None, exclude_if=_is_none)
    timings: dict[str, Any] | None = Field(None, exclude_if=_is_none)


def usage_of(prompt_tokens: int, completion_tokens: int) -> Usage:
    return Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                 total_tokens=prompt_tokens + completion_tokens)

