"""The final-answer contract of notebook 01 as Pydantic models, and Pydantic's errors in the validator's words.

Notebook 02 starts here: the same six keys, enums and bounds as `helpers.contract`, declared instead of checked by
hand, and `model_errors`, which words any model's validation errors as `validate_answer` does, so that a repair
prompt (notebook 04) reads the same messages whichever validator found them. `helpers.steps` builds the Holo3 step
from the same pieces.
"""
from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from helpers.contract import (
    ANSWER_MAX_LENGTH,
    ENUMS,
    ITEM_TEXT_MAX_LENGTH,
    MAX_LIST_ENTRIES,
    PLAIN_TEXT,
    SHORT_TEXT_MAX_LENGTH,
    Category,
    Status,
    not_plain,
    too_long,
    wrong_type,
    wrong_value,
)
from helpers.runtime.schema_tree import json_path

# strict: "932" is not 932 and "true" is not True, exactly as in JSON Schema.
# extra="forbid": additionalProperties false, which a guided tiny model needs to stop.
CLOSED = ConfigDict(extra="forbid", strict=True)

def plain_text(limit: int, description: str | None = None) -> Any:
    """A bounded plain-text field: at most `limit` characters of printable ASCII without " or \\."""
    return Field(max_length=limit, pattern=PLAIN_TEXT, description=description)


ShortText = Annotated[str, plain_text(SHORT_TEXT_MAX_LENGTH)]
ItemText = Annotated[str, plain_text(ITEM_TEXT_MAX_LENGTH)]


class Item(BaseModel):
    """One short fact of an answer: what it is about, and what it says."""

    model_config = CLOSED

    name: ItemText
    value: ItemText


class Answer(BaseModel):
    """The campus assistant's final answer."""

    model_config = CLOSED

    status: Status
    answer: str = plain_text(ANSWER_MAX_LENGTH)
    category: Category
    items: list[Item] = Field(max_length=MAX_LIST_ENTRIES)
    missing: list[ShortText] = Field(max_length=MAX_LIST_ENTRIES)
    sources: list[ShortText] = Field(max_length=MAX_LIST_ENTRIES)


_EXPECTED = {
    "model_type": "a JSON object",
    "dict_type": "an object",
    "list_type": "a list",
    "string_type": "a string",
    "int_type": "an integer",
    "bool_type": "a boolean",
}


def _message(error: Any) -> str:
    kind, path, value = error["type"], json_path(error["loc"]), error["input"]
    if kind == "missing":
        return f"missing key: {path}"
    if kind == "extra_forbidden":
        return f"unexpected key: {path}"
    if kind == "literal_error" and path in ENUMS:
        return wrong_value(path, ENUMS[path], value)
    if kind == "model_type" and path:  # a nested model (an item) is "an object"; only the whole reply is "a JSON object"
        return wrong_type(path, "an object", value)
    if kind in _EXPECTED:
        return wrong_type(path, _EXPECTED[kind], value)
    if kind == "string_pattern_mismatch":
        return not_plain(path, value)
    if kind == "string_too_long":
        return too_long(path, error["ctx"]["max_length"], len(value), "characters")
    if kind == "too_long":
        return too_long(path, error["ctx"]["max_length"], error["ctx"]["actual_length"], "entries")
    return f"{path}: {error['msg']}" if path else error["msg"]


def error_messages(error: ValidationError) -> list[str]:
    """Every problem a ValidationError holds, one message each, in validate_answer's words. Pydantic's own say the
    same in words for Python programmers ("Input should be a valid dictionary"); a repair prompt quotes these."""
    return [_message(e) for e in error.errors()]


def model_errors(model: type[BaseModel], data: Any) -> list[str]:
    """Validate `data` against `model`; every problem as one message in validate_answer's words, [] when valid."""
    try:
        model.model_validate(data)
    except ValidationError as error:
        return error_messages(error)
    return []


def answer_errors(data: Any) -> list[str]:
    """The Pydantic twin of contract.validate_answer."""
    return model_errors(Answer, data)
