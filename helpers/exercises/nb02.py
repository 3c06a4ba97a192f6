"""Checks for notebook 02's exercises: a `wait` tool as a Pydantic model, and its JSON schema by hand."""
from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, StrictInt, conint

from helpers.exercises import Verdict
from helpers.pydantic_contract import CLOSED, model_errors
from helpers.steps import IntentKind

WAIT_GOOD = [{"tool_name": "wait", "seconds": 1}, {"tool_name": "wait", "seconds": 10}]
# Each call a valid tool must refuse, with what lets it through.
WAIT_BAD = [
    ({"tool_name": "wait", "seconds": 0}, "seconds from 1 to 10: the bounds"),
    ({"tool_name": "wait", "seconds": 11}, "seconds from 1 to 10: the bounds"),
    ({"tool_name": "wait", "seconds": "3"}, "a number in quotes is a string: no conversions (strict)"),
    ({"tool_name": "wait", "seconds": 2.5}, "seconds is a whole number"),
    ({"tool_name": "wait", "seconds": True}, "true is no number of seconds: no conversions (strict)"),
    ({"tool_name": "wait", "seconds": None}, "seconds is a number, never null"),
    ({"tool_name": "wait"}, "a wait says how long: seconds is required, with no default"),
    ({"tool_name": "pause", "seconds": 3}, "the tool's name is exactly \"wait\""),
    ({"tool_name": "Wait", "seconds": 3}, "the tool's name is exactly \"wait\", in lower case"),
    ({"seconds": 3}, "a call names its tool: tool_name is required, with no default"),
    ({"tool_name": "wait", "seconds": 3, "reason": "slow page"}, "a tool takes no other keys"),
]


def _first_wrong(accepts: Any, errors: Any = None) -> str | None:
    """What the tool gets wrong, in words: a good call refused (with `errors`' reason, where there is one) or a bad
    call accepted, and why that one is bad; None when it is right."""
    refused = [good for good in WAIT_GOOD if not accepts(good)]
    if refused:
        reason = f" ({'; '.join(errors(refused[0]))})" if errors else ""
        return f"it refuses {refused[0]}, a valid call{reason}"
    accepted = [(bad, why) for bad, why in WAIT_BAD if accepts(bad)]
    return f"it accepts {accepted[0][0]}, which is not a valid call: {accepted[0][1]}" if accepted else None


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
    wrong = _first_wrong(lambda call: model_errors(answer, call) == [], lambda call: model_errors(answer, call))
    if wrong:
        return False, praise, f"{wrong}. Compare with ClickArgs: model_config = CLOSED, and Field's ge and le."
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


class _NotStrictWait(_OpenWait):
    """Wait for the page to finish loading."""

    model_config = ConfigDict(extra="forbid")  # "3" becomes 3, true becomes 1


class _ExtraIgnoredWait(_OpenWait):
    """Wait for the page to finish loading."""

    model_config = ConfigDict(strict=True)  # an unknown key is dropped without a word


class _ExclusiveBoundsWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[str] = "tool_request"
    seconds: int = Field(gt=1, lt=10, description="How long to wait, in seconds.")  # 1 and 10 refused


class _NullableWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[str] = "tool_request"
    seconds: int | None = Field(ge=1, le=10, description="How long to wait, in seconds.")


class _AnyNameWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[str] = "tool_request"
    tool_name: str = Field(description="The tool: wait.")


class _CapitalisedWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[str] = "tool_request"
    tool_name: Literal["Wait"] = Field(description="The tool: wait.")


class _NamedByDefaultWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[str] = "tool_request"
    tool_name: Literal["wait"] = Field(default="wait", description="The tool: wait.")


class _FinalAnswerWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[str] = "final_answer"  # waiting ends nothing


class _AnnotatedWait(BaseModel):
    """Wait up to ten seconds for a slow page; it clicks and types nothing."""

    model_config = ConfigDict(extra="forbid", strict=True)
    intent: ClassVar = "tool_request"
    tool_name: Literal["wait"]
    seconds: Annotated[int, Field(ge=1, le=10, description="Seconds to wait, 1 to 10.")]


class _ExclusiveEquivalentWait(_NoIntentWait):
    """Wait for the page to finish loading."""

    intent: ClassVar[IntentKind] = "tool_request"
    seconds: int = Field(..., gt=0, lt=11, description="How long to wait, in seconds.")


class _StrictFieldWait(_NotStrictWait):
    """Wait for the page to finish loading."""

    seconds: StrictInt = Field(ge=1, le=10, description="How long to wait, in seconds.")  # strict where it matters


class _ConstrainedWait(BaseModel):
    """Wait for the page to finish loading."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "tool_request"
    tool_name: Literal["wait"] = Field(description="The tool: wait.")
    seconds: conint(ge=1, le=10) = Field(description="How long to wait, in seconds.")  # noqa: F722 - pydantic's own


_CALL = {"tool_name": {"const": "wait"}, "seconds": {"type": "integer", "minimum": 1, "maximum": 10}}
# Other correct spellings a learner writes: each must pass.
RIGHT = {"wait_model": [_AnnotatedWait, _ExclusiveEquivalentWait, _StrictFieldWait, _ConstrainedWait]}
WRONG = {
    "wait_model": [_OpenWait, _UnboundedWait, _FromZeroWait, _FloatWait, _UndescribedWait, _NoIntentWait,
                   _IntentAsFieldWait, _OptionalSecondsWait, _NotStrictWait, _ExtraIgnoredWait, _ExclusiveBoundsWait,
                   _NullableWait, _AnyNameWait, _CapitalisedWait, _NamedByDefaultWait, _FinalAnswerWait, _CALL],
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
