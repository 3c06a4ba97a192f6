"""Checks for notebook 02's exercises: a `wait` tool as a Pydantic model, and its JSON schema by hand."""
from __future__ import annotations

from typing import Any, ClassVar, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field

from helpers.exercises import Verdict
from helpers.pydantic_contract import model_errors

WAIT_GOOD = [{"tool_name": "wait", "seconds": 1}, {"tool_name": "wait", "seconds": 10}]
WAIT_BAD = [{"tool_name": "wait", "seconds": 0}, {"tool_name": "wait", "seconds": 11},
            {"tool_name": "wait", "seconds": "3"}, {"tool_name": "wait", "seconds": 2.5},
            {"tool_name": "wait", "seconds": True}, {"tool_name": "wait"}, {"tool_name": "pause", "seconds": 3},
            {"seconds": 3}, {"tool_name": "wait", "seconds": 3, "reason": "slow page"}]


def _first_wrong(accepts: Any) -> str | None:
    """What the tool gets wrong, in words: a good call refused or a bad call accepted; None when it is right."""
    refused = [good for good in WAIT_GOOD if not accepts(good)]
    if refused:
        return f"it refuses {refused[0]}, a valid call"
    accepted = [bad for bad in WAIT_BAD if accepts(bad)]
    return f"it accepts {accepted[0]}, which is not a valid call" if accepted else None


def wait_model(answer: Any) -> Verdict:
    """Your turn 1: WaitArgs, a closed, bounded, described tool model with its intent, ready for the union."""
    praise = "a closed, bounded, described tool with its intent, ready for the union."
    if not (isinstance(answer, type) and issubclass(answer, BaseModel)):
        return False, praise, "write a class: class WaitArgs(BaseModel): ..."
    schema = answer.model_json_schema()
    if not schema.get("description") or not schema.get("properties", {}).get("seconds", {}).get("description"):
        return False, praise, "the model reads the docstring and each Field(description=...): give it both."
    if getattr(answer, "intent", None) != "tool_request" or "intent" in answer.model_fields:
        return False, praise, ("like click and scroll, wait acts on the app: intent: ClassVar[IntentKind] = "
                               "\"tool_request\" (a ClassVar, so it is no field of the call).")
    if model_errors(answer, {"seconds": 3}) == []:
        return False, praise, ("it accepts {'seconds': 3}, a call that names no tool: give tool_name no default, "
                               "as in ClickArgs, so the model must write it.")
    wrong = _first_wrong(lambda call: model_errors(answer, call) == [])
    if wrong:
        return False, praise, (f"{wrong}. Keep model_config = CLOSED, and make seconds an int with "
                               "Field(ge=..., le=..., description=...).")
    return True, praise, ""


def wait_schema(answer: Any) -> Verdict:
    """Your turn 2: the JSON schema of the same tool, written by hand."""
    praise = "the hand-written schema and the model agree on every call."
    if not isinstance(answer, dict):
        return False, praise, "write a JSON schema: a dict such as {\"type\": \"object\", ...}."
    try:
        Draft202012Validator.check_schema(answer)
    except SchemaError as error:
        return False, praise, f"that is not a valid JSON schema: {error.message}"
    wrong = _first_wrong(Draft202012Validator(answer).is_valid)
    if wrong:
        return False, praise, (f"{wrong}. tool_name needs a const, seconds an integer with minimum and maximum, "
                               "both must be required, and the object needs additionalProperties false.")
    return True, praise, ""


SOLUTIONS = {"wait_model": "WaitArgs", "wait_schema": "wait_schema"}

_CLOSED = ConfigDict(extra="forbid", strict=True)


class _OpenWait(BaseModel):
    """Wait for the page to finish loading."""  # Pydantic's defaults: "3" becomes 3, extra keys are dropped

    intent: ClassVar[str] = "tool_request"
    tool_name: Literal["wait"] = Field(description="The tool: wait.")
    seconds: int = Field(ge=1, le=10, description="How long to wait, in seconds.")


class _UnboundedWait(BaseModel):
    """Wait for the page to finish loading."""

    model_config = _CLOSED
    intent: ClassVar[str] = "tool_request"
    tool_name: Literal["wait"] = Field(description="The tool: wait.")
    seconds: int = Field(description="How long to wait, in seconds.")


class _FromZeroWait(_UnboundedWait):
    """Wait for the page to finish loading."""

    seconds: int = Field(ge=0, le=10, description="How long to wait, in seconds.")


class _FloatWait(_UnboundedWait):
    """Wait for the page to finish loading."""

    seconds: float = Field(ge=1, le=10, description="How long to wait, in seconds.")


class _UndescribedWait(BaseModel):
    model_config = _CLOSED
    intent: ClassVar[str] = "tool_request"
    tool_name: Literal["wait"]
    seconds: int = Field(ge=1, le=10)


class _NoIntentWait(BaseModel):
    """Wait for the page to finish loading."""

    model_config = _CLOSED
    tool_name: Literal["wait"] = Field(description="The tool: wait.")
    seconds: int = Field(ge=1, le=10, description="How long to wait, in seconds.")


class _IntentAsFieldWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: str = "tool_request"  # a field: a call could now carry an intent of its own


class _OptionalSecondsWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[str] = "tool_request"
    seconds: int = Field(default=3, ge=1, le=10, description="How long to wait, in seconds.")


_CALL = {"tool_name": {"const": "wait"}, "seconds": {"type": "integer", "minimum": 1, "maximum": 10}}
WRONG = {
    "wait_model": [_OpenWait, _UnboundedWait, _FromZeroWait, _FloatWait, _UndescribedWait, _NoIntentWait,
                   _IntentAsFieldWait, _OptionalSecondsWait, _CALL],
    "wait_schema": [
        {"type": "object", "properties": _CALL, "required": ["tool_name", "seconds"]},  # extra keys pass
        {"type": "object", "properties": _CALL, "additionalProperties": False},  # nothing required
        {"type": "object", "properties": {**_CALL, "seconds": {"type": "number", "minimum": 1, "maximum": 10}},
         "required": ["tool_name", "seconds"], "additionalProperties": False},  # 2.5 passes
        {"type": "object", "properties": {**_CALL, "tool_name": {"type": "string"}},
         "required": ["tool_name", "seconds"], "additionalProperties": False},  # any tool name passes
        {"type": "object", "properties": {**_CALL, "seconds": {"type": "integer", "exclusiveMinimum": 1,
                                                               "maximum": 10}},
         "required": ["tool_name", "seconds"], "additionalProperties": False},  # 1 is refused
        {"type": "object", "properties": {**_CALL, "seconds": {"type": "integer"}},
         "required": ["tool_name", "seconds"], "additionalProperties": False},  # 0 and 11 pass
        {"type": "objekt"},  # not a JSON schema
        _NoIntentWait,  # a model, not its schema
    ],
}
