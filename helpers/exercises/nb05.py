"""Checks for notebook 05's exercises: bound an open schema so a guided reply can always close, and p95 by hand."""
from __future__ import annotations

import types
from typing import Any

import numpy as np

from helpers.bounds import Unbounded, max_json_bytes
from helpers.contract import PLAIN_TEXT
from helpers.exercises import Verdict, schema_validator

# Your turn 1's open schema and the facts the check holds a bounded version to. The notebook shows them; this
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
    """Your turn 1: the event schema, still accepting events, with a worst case of at most BYTE_BUDGET bytes."""
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


# Spellings of "let a library compute it", which the exercise asks you not to use.
LIBRARY_NAMES = {"np", "numpy", "percentile", "quantile", "quantiles", "nanpercentile"}
P95_SAMPLES = [[2.0], [3.0, 1.0], [0.5, 2.0, 9.0, 1.5], [float(x) for x in range(21)],
               [0.31, 0.12, 5.2, 0.9, 1.7, 0.4]]


def _names(code: types.CodeType) -> set[str]:
    """Every global and attribute name a function's code uses, nested functions and lambdas included."""
    nested = [_names(const) for const in code.co_consts if isinstance(const, types.CodeType)]
    return set(code.co_names).union(*nested)


def p95(answer: Any) -> Verdict:
    """Your turn 2: the 95th percentile without numpy, interpolated as numpy does by default."""
    praise = "your p95 agrees with numpy's on every list, ties and one-element lists included."
    if not callable(answer):
        return False, praise, "write a function that takes a list of numbers and returns a number."
    if isinstance(answer, types.FunctionType) and _names(answer.__code__) & LIBRARY_NAMES:
        return False, praise, "compute it yourself: no numpy, no statistics.quantiles."
    try:
        agree = all(abs(answer(list(sample)) - float(np.percentile(sample, 95))) < 1e-9 for sample in P95_SAMPLES)
    except Exception:  # a half-written function means "not yet", not a crash
        agree = False
    if not agree:
        return False, praise, ("sort the values, take the position 0.95 * (n - 1), and interpolate between the "
                               "values just below and just above it.")
    return True, praise, ""


SOLUTIONS = {"bounded_schema": "bounded_event_schema", "p95": "p95"}


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


def _nearest_rank(values: list[float]) -> float:
    return sorted(values)[min(int(0.95 * len(values)), len(values) - 1)]


def _unsorted(values: list[float]) -> float:
    position = 0.95 * (len(values) - 1)
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (position - low) * (values[high] - values[low])


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
    "p95": [
        max,
        _nearest_rank,
        _unsorted,
        lambda values: sorted(values)[round(0.95 * (len(values) - 1))],
        lambda values: float(np.percentile(values, 95)),
        lambda values: sum(values) / len(values),
        lambda values: 1.0,
        "p95",
    ],
}
