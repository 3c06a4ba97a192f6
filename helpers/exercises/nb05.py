"""Checks for notebook 05's exercises: count how many replies a schema leaves the model to choose from, and bound an
open schema so a guided reply can always close."""
from __future__ import annotations

import math
from typing import Any, Callable

from helpers.bounds import Unbounded, max_json_bytes
from helpers.contract import PLAIN_TEXT
from helpers.exercises import Verdict, schema_validator

# Your turn 2's open schema and the facts the check holds a bounded version to. The notebook shows them; this
# module is their one source.
OPEN_EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
                   "where": {"type": "object"}},
    "required": ["title", "tags", "where"],
}
EVENT_KEYS = ("title", "tags", "where")
WHERE_KEYS = ("building", "room")
EXAMPLE_EVENT = {"title": "Film night: Metropolis", "tags": ["film", "free entry"],
                 "where": {"building": "Aldous Auditorium", "room": "A1"}}
BYTE_BUDGET = 256
# Other events a bounded schema must still accept, so that a schema written around the example alone fails.
OTHER_EVENTS = [
    {"title": "Robotics talk", "tags": [], "where": {"building": "Harbor Hall", "room": "B204"}},
    {"title": "Spring Career Fair", "tags": ["jobs"], "where": {"building": "Pike Sports Centre", "room": "Hall"}},
    {"title": "Chess club", "tags": ["games", "weekly"], "where": {"building": "Library", "room": "2"}},
]


def _without(data: dict, key: str) -> dict:
    return {k: v for k, v in data.items() if k != key}


def bounded_schema(answer: Any) -> Verdict:
    """Your turn 2: the event schema, still accepting events, with a worst case of at most BYTE_BUDGET bytes."""
    praise = "every part of the event is bounded, and the longest reply it allows fits the budget."
    validator = schema_validator(answer)
    if validator is None:
        return False, praise, "write a JSON schema: a dict such as {\"type\": \"object\", ...}."
    refused = [event for event in [EXAMPLE_EVENT, *OTHER_EVENTS] if not validator.is_valid(event)]
    if refused:
        return False, praise, (f"it refuses an event it should accept, {refused[0]}: check the lengths, the "
                               "number of tags, and that `where` holds `building` and `room`.")
    try:
        size = max_json_bytes(answer)
    except Unbounded as exc:
        return False, praise, f"max_json_bytes says it is unbounded at {exc}."
    if size > BYTE_BUDGET:
        return False, praise, (f"its longest reply is {size} bytes, over the budget of {BYTE_BUDGET}: lower "
                               "maxLength or maxItems where they are generous.")
    loose = [_without(EXAMPLE_EVENT, key) for key in EVENT_KEYS]
    loose += [{**EXAMPLE_EVENT, "where": _without(EXAMPLE_EVENT["where"], key)} for key in WHERE_KEYS]
    if any(validator.is_valid(event) for event in loose):
        return False, praise, ("it accepts an event with a key left out: keep `required` for the three keys, "
                               "and give `where` its own `required`.")
    return True, f"{praise} ({size} bytes of {BYTE_BUDGET})", ""


def _closed(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_SCROLL = _closed(tool_name={"const": "scroll"}, direction={"enum": ["up", "down"]})
_CLICKS = {"anyOf": [_closed(tool_name={"const": "click"}, element={"const": name}, x={"const": x}, y={"const": y})
                     for name, x, y in (("Home", 918, 46), ("Search products", 400, 301), ("Search", 162, 378),
                                        ("My orders", 400, 455))]}
_FREE_TEXT = {"type": "string", "maxLength": 40}
# Your turn 1's schemas: what each is, the schema, and how many replies it allows (None: too many to count).
COUNTED: list[tuple[str, dict[str, Any], int | None]] = [
    ("a const", {"const": "go_back"}, 1),
    ("an enum of two directions", {"enum": ["up", "down"]}, 2),
    ("a boolean", {"type": "boolean"}, 2),
    ("null", {"type": "null"}, 1),
    ("a scroll call", _SCROLL, 2),
    ("notebook 03's per-screen click on the home page", _CLICKS, 4),
    ("a scroll, a per-screen click or go_back", {"anyOf": [_SCROLL, _CLICKS, _closed(tool_name={"const": "go_back"})]},
     7),
    ("an object of a status, a boolean and a per-screen click",
     _closed(status={"enum": ["answered", "not_found", "needs_clarification"]}, final={"type": "boolean"},
             tool=_CLICKS), 24),
    ("a step whose note may be free text", _closed(note={"anyOf": [{"type": "null"}, _FREE_TEXT]}, tool_call=_SCROLL),
     None),
    ("a write call with free text", _closed(tool_name={"const": "write"}, content=_FREE_TEXT), None),
    ("an integer from 0 to 1000", {"type": "integer", "minimum": 0, "maximum": 1000}, 1001),
    ("an object of a direction and an integer from 1 to 10",
     _closed(direction={"enum": ["up", "down"]}, steps={"type": "integer", "minimum": 1, "maximum": 10}), 20),
    ("an integer with no maximum", {"type": "integer", "minimum": 0}, None),
    ("a number from 0 to 1", {"type": "number", "minimum": 0, "maximum": 1}, None),
]


def count_replies(answer: Any) -> Verdict:
    """Your turn 1: how many JSON values a schema of const, enum, boolean, null, closed objects and anyOf allows."""
    praise = "you can tell, before any request, how much a schema leaves to the model."
    if not callable(answer):
        return False, praise, "replace None with a function that takes a schema and returns a number, or None."
    for label, schema, expected in COUNTED:
        try:
            got = answer(schema)
        except Exception as error:  # a half-written function means "not yet", not a crash
            return False, praise, f"on {label} it raised {type(error).__name__}: {error}"
        if got != expected or isinstance(got, bool):
            allows = "too many replies to count (None)" if expected is None else f"{expected} replies"
            return False, praise, f"on {label} it returns {got!r}, but that schema allows {allows}. {_COUNT_HINT}"
    return True, praise, ""


_COUNT_HINT = ("A const allows one value, an enum one per entry, an integer with a minimum and a maximum one per "
               "whole number between them (both included); an object allows every combination of its properties' "
               "values, anyOf the values of each branch; anything else is free.")


SOLUTIONS = {"bounded_schema": "bounded_event_schema", "count_replies": "count_replies"}


def _text(limit: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit, "pattern": PLAIN_TEXT}


def _event(title: dict, tags: dict, where: dict, closed: bool = True) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"title": title, "tags": tags, "where": where},
              "required": list(EVENT_KEYS)}
    return {**schema, "additionalProperties": False} if closed else schema


_WHERE = {"type": "object", "properties": {"building": _text(30), "room": _text(10)},
          "required": list(WHERE_KEYS), "additionalProperties": False}
_TAGS = {"type": "array", "maxItems": 3, "items": _text(12)}
_NOT_PLAIN = {"type": "string", "maxLength": 40}


def _adds_properties(schema: dict[str, Any]) -> int | None:
    """Adds up an object's properties' counts, where every combination of them counts."""
    if "const" in schema:
        return 1
    if "enum" in schema:
        return len(schema["enum"])
    if "anyOf" in schema:
        return sum(_adds_properties(branch) or 0 for branch in schema["anyOf"])
    if schema.get("type") == "object":
        return sum(_adds_properties(field) or 0 for field in schema["properties"].values())
    return {"boolean": 2, "null": 1}.get(schema.get("type", ""))


def _first_branch_only(schema: dict[str, Any]) -> int | None:
    if "anyOf" in schema:
        return _first_branch_only(schema["anyOf"][0])
    if "const" in schema:
        return 1
    if "enum" in schema:
        return len(schema["enum"])
    return {"boolean": 2, "null": 1}.get(schema.get("type", ""), 1)


def _zero_for_free_text(schema: dict[str, Any]) -> int:
    if "const" in schema:
        return 1
    if "enum" in schema:
        return len(schema["enum"])
    if "anyOf" in schema:
        return sum(_zero_for_free_text(branch) for branch in schema["anyOf"])
    if schema.get("type") == "object":
        total = 1
        for field in schema["properties"].values():
            total *= _zero_for_free_text(field)
        return total
    return {"boolean": 2, "null": 1}.get(schema.get("type", ""), 0)


def _counting_integers(rule: Callable[[int, int], int | None]) -> Callable[[dict[str, Any]], int | None]:
    """A counter right in everything but an integer range, which it counts by `rule(minimum, maximum)`."""
    def count(schema: dict[str, Any]) -> int | None:
        if "const" in schema:
            return 1
        if "enum" in schema:
            return len(schema["enum"])
        parts = schema.get("anyOf") or list(schema.get("properties", {}).values())
        if parts:
            counts = [count(part) for part in parts]
            if None in counts:
                return None
            return sum(counts) if "anyOf" in schema else math.prod(counts)
        if schema.get("type") == "integer" and {"minimum", "maximum"} <= schema.keys():
            return rule(schema["minimum"], schema["maximum"])
        return {"boolean": 2, "null": 1}.get(schema.get("type"))

    return count


WRONG: dict[str, list[Any]] = {
    "bounded_schema": [
        OPEN_EVENT_SCHEMA,
        _event(_NOT_PLAIN, {**_TAGS, "items": _NOT_PLAIN}, _WHERE),  # bounded in characters, not in bytes
        _event(_text(40), _TAGS, {"type": "object", "maxProperties": 2}),  # `where` takes any keys
        _event(_text(40), _TAGS, _WHERE, closed=False),  # the event takes any extra key
        _event(_text(40), {**_TAGS, "maxItems": 20}, _WHERE),  # bounded, but far over the budget
        _event(_text(8), _TAGS, _WHERE),  # too tight: the example's title does not fit
        {"const": EXAMPLE_EVENT},  # the example and nothing else
        {**_event(_text(40), _TAGS, _WHERE), "required": ["title"]},  # keys may be left out
        _event(_text(40), _TAGS, {**_WHERE, "required": ["building"]}),  # `where` without its room
        {"type": "objekt"},  # not a JSON schema
    ],
    "count_replies": [
        _adds_properties,
        _first_branch_only,
        _zero_for_free_text,
        _counting_integers(lambda low, high: None),  # 0 to 1000 holds exactly 1,001 integers: countable
        _counting_integers(lambda low, high: high - low),  # one short: both ends are allowed
        lambda schema: 1,
        lambda schema: len(schema.get("properties", schema.get("enum", [0]))),
        "count_replies",
    ],
}
