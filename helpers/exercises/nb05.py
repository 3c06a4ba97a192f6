"""Checks for notebook 05's exercises: count how many replies a schema leaves the model to choose from, and bound an
open schema so a guided reply can always close."""
from __future__ import annotations

import copy
import re
from typing import Any, Callable

from helpers.bounds import Unbounded, max_json_bytes
from helpers.contract import ANSWER_JSON_SCHEMA, PLAIN_TEXT
from helpers.exercises import Verdict, schema_validator
from helpers.steps import STEP_SCHEMA

try:  # the regular-expression parser the re module itself uses: Python 3.11 renamed it
    from re import _parser as regex_parser
except ImportError:  # Python 3.10
    import sre_parse as regex_parser

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

# Plain text: printable ASCII without `"` and `\`, one byte a character in JSON, nothing escaped (PLAIN_TEXT).
PLAIN_CODES = frozenset(range(0x20, 0x7F)) - {ord('"'), ord("\\")}
REPEATS = {regex_parser.MAX_REPEAT, regex_parser.MIN_REPEAT, getattr(regex_parser, "POSSESSIVE_REPEAT", None)}


def _not_plain(parsed) -> str | None:
    """What in these parsed parts of a pattern can match a character that is not plain text, or None: literals,
    classes and ranges of plain characters, repeated, grouped or alternated, are plain."""
    for op, arg in parsed:
        if op is regex_parser.LITERAL and arg not in PLAIN_CODES:
            return f"allows {chr(arg)!r}, which is not plain text"
        if op is regex_parser.NOT_LITERAL:
            return "has a negated class [^...], which matches `\"` and letters outside ASCII"
        if op is regex_parser.IN:
            for kind, value in arg:
                if kind is regex_parser.NEGATE:
                    return "has a negated class [^...], which matches `\"` and letters outside ASCII"
                if kind is regex_parser.CATEGORY:
                    return "has a named class such as \\w or \\d, which matches characters outside ASCII"
                codes = set(range(value[0], value[1] + 1)) if kind is regex_parser.RANGE else {value}
                if codes - PLAIN_CODES:
                    return f"allows {chr(min(codes - PLAIN_CODES))!r}, which is not plain text"
        elif op is regex_parser.ANY:
            return "has `.`, which matches any character"
        elif op in REPEATS or op is regex_parser.SUBPATTERN or op is regex_parser.BRANCH:
            if op is regex_parser.SUBPATTERN and arg[1] & regex_parser.SRE_FLAG_IGNORECASE:
                return "ignores case, so that k also matches the Kelvin sign, outside ASCII"
            branches = [arg[2]] if op in REPEATS else [arg[3]] if op is regex_parser.SUBPATTERN else arg[1]
            found = next((problem for branch in branches if (problem := _not_plain(branch))), None)
            if found:
                return found
        elif op not in (regex_parser.LITERAL, regex_parser.AT):  # an anchor matches no character
            return f"uses {str(op).lower()}, which this check cannot read"
    return None


def plain_length(pattern: Any) -> tuple[str | None, int | None]:
    """Why `pattern` may let through more than plain text, as a whole string (None: it does not), and the longest
    string it matches (None: no limit)."""
    try:
        parsed = regex_parser.parse(pattern)
    except (TypeError, re.error):  # not a string, or not a regular expression
        return "is not a regular expression", None
    parts = list(parsed)
    if not (len(parts) >= 2 and parts[0] == (regex_parser.AT, regex_parser.AT_BEGINNING)
            and parts[-1] == (regex_parser.AT, regex_parser.AT_END)):
        return "is not anchored by ^ and $, so it matches inside a string that holds anything else", None
    if parsed.state.flags & regex_parser.SRE_FLAG_IGNORECASE:
        return "ignores case, so that k also matches the Kelvin sign, outside ASCII", None
    longest = parsed.getwidth()[1]
    return _not_plain(parts), None if longest >= regex_parser.MAXREPEAT else longest


def _as_counted(schema: Any, where: str, not_plain: list[str]) -> Any:
    """`schema` as `max_json_bytes` can count it: a string whose pattern is stricter than PLAIN_TEXT gets PLAIN_TEXT
    (and, for maxLength, the smaller of its own and its pattern's longest match). Where a pattern lets through more
    than plain text, `not_plain` gets the place and why."""
    if isinstance(schema, list):
        return [_as_counted(part, where, not_plain) for part in schema]
    if not isinstance(schema, dict):
        return schema
    counted = {}
    for key, value in schema.items():
        if key in ("const", "enum", "default", "examples"):  # values, not schemas
            counted[key] = value
        elif key == "properties" and isinstance(value, dict):
            counted[key] = {name: _as_counted(field, f"{where}.{name}", not_plain) for name, field in value.items()}
        else:
            counted[key] = _as_counted(value, f"{where}[]" if key == "items" else where, not_plain)
    if schema.get("type") == "string" and schema.get("pattern", PLAIN_TEXT) != PLAIN_TEXT:
        problem, longest = plain_length(schema["pattern"])
        if problem:
            not_plain.append(f"{where} {problem}")
            return counted
        limits = [limit for limit in (schema.get("maxLength"), longest) if limit is not None]
        counted.update({"pattern": PLAIN_TEXT, **({"maxLength": min(limits)} if limits else {})})
    return counted


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
                               "number of tags, the patterns, and that `where` holds `building` and `room`.")
    not_plain: list[str] = []
    counted = _as_counted(answer, "$", not_plain)
    if not_plain:
        return False, praise, (f"the pattern at {not_plain[0]}. A character outside plain text may take several "
                               "bytes of JSON: use PLAIN_TEXT, or a stricter set of plain characters, anchored by ^ "
                               "and $.")
    try:
        size = max_json_bytes(counted)
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


# Your turn 1's schemas, built only from what the core showed: the answer contract's enums (notebook 01) and the
# Step's tools (notebook 02, traced in this notebook's core).
_TOOLS = STEP_SCHEMA["$defs"]
_GO_BACK, _SCROLL, _WRITE, _CLICK = (_TOOLS[name] for name in ("GoBackArgs", "ScrollArgs", "WriteArgs", "ClickArgs"))
_STATUS, _CATEGORY = (ANSWER_JSON_SCHEMA["properties"][key] for key in ("status", "category"))


def _closed(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


_ADD = "anyOf allows the values of each branch: add them up."
_MULTIPLY = "a closed object allows every combination of its properties' values: multiply."
_FREE = "a string with no const or enum is free text, too many to count: None; and a part that is None makes the " \
        "whole None."
_OPTIONAL = "a property missing from `required` may also be left out: one more choice for it than its own count."
_OPEN = "an object without `additionalProperties: false` also takes any other key, with any value: too many, None."
_BOUNDS = "an integer with both a minimum and a maximum allows each whole number between them, both ends included."
# (what the schema is, the schema, how many replies it allows (None: too many to count), what to look at if not)
COUNTED: list[tuple[str, dict[str, Any], int | None, str]] = [
    ("the contract's status", _STATUS, 3, "an enum allows one value per entry, whatever its type."),
    ("go_back's tool_name", _GO_BACK["properties"]["tool_name"], 1, "a const allows one value, whatever its type."),
    ("press_enter, a boolean", _WRITE["properties"]["press_enter"], 2, "a boolean allows two values."),
    ("null", {"type": "null"}, 1, "null allows one value."),
    ("a click's x", _CLICK["properties"]["x"], 1001, _BOUNDS),
    ("an integer with no maximum", {"type": "integer", "minimum": 0}, None, "an integer missing a bound is free."),
    ("a number from 0 to 1", {"type": "number", "minimum": 0, "maximum": 1}, None, "a number need not be whole."),
    ("a go_back or a scroll", {"anyOf": [_GO_BACK, _SCROLL]}, 3, _ADD),
    ("the go_back call", _GO_BACK, 1, _MULTIPLY),
    ("the scroll call", _SCROLL, 2, _MULTIPLY),
    ("a status with a category", _closed(status=_STATUS, category=_CATEGORY), 15, _MULTIPLY),
    ("a click whose element is the const \"Search\"",
     {**_CLICK, "properties": {**_CLICK["properties"], "element": {"const": "Search"}}}, 1001 * 1001, _MULTIPLY),
    ("the note, text or null", STEP_SCHEMA["properties"]["note"], None, _FREE),
    ("the write call", _WRITE, None, _FREE),
    ("a write whose content is the const \"Red mug\"",
     {**_WRITE, "properties": {**_WRITE["properties"], "content": {"const": "Red mug"}}}, 3, _OPTIONAL),
    ("an empty closed object", {"type": "object", "additionalProperties": False}, 1,
     "a closed object that names no property allows one value, {}."),
    ("go_back without additionalProperties: false",
     {"type": "object", "properties": {"tool_name": {"const": "go_back"}}, "required": ["tool_name"]}, None, _OPEN),
    ("go_back with additionalProperties: true", {**_GO_BACK, "additionalProperties": True}, None, _OPEN),
    ("go_back neither closed nor required", {"type": "object", "properties": {"tool_name": {"const": "go_back"}}},
     None, _OPEN),
    ("any object at all", {"type": "object"}, None, "an object need not name its properties. " + _OPEN),
    ("a type list of boolean or null", {"type": ["boolean", "null"]}, 3,
     "a type list allows the values of each type: the skeleton hands it to your anyOf."),
    ("a type list of string or null", {"type": ["string", "null"], "maxLength": 80}, None, _FREE),
]


def count_replies(answer: Any) -> Verdict:
    """Your turn 1: how many JSON values a schema of const, enum, boolean, null, bounded integers, objects, anyOf and
    type lists allows."""
    praise = "you can tell, before any request, how much a schema leaves to the model."
    if not callable(answer):
        return False, praise, "replace None with a function that takes a schema and returns a number, or None."
    for called in ("", "called a second time, "):  # a count kept between calls goes wrong the second time round
        for label, schema, expected, why in COUNTED:
            allows = ("too many replies to count (None)" if expected is None
                      else f"{expected} repl{'y' if expected == 1 else 'ies'}")
            try:
                got = answer(copy.deepcopy(schema))
            except Exception as error:  # a half-written function means "not yet", not a crash
                return False, praise, (f"{called}on {label} it raised {type(error).__name__}: {error}, but that schema "
                                       f"allows {allows}: {why}")
            if got != expected or isinstance(got, bool):
                state = " Keep no state between calls, such as a product outside the function." if called else ""
                return False, praise, f"{called}on {label} it returns {got!r}, but that schema allows {allows}: " \
                                      f"{why}{state}"
    return True, praise, ""


SOLUTIONS = {"bounded_schema": "bounded_event_schema", "count_replies": "count_replies"}


# --- wrong answers the checks must refuse, and right ones they must accept -------------------------------------

def _text(limit: int, pattern: str = PLAIN_TEXT) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit, "pattern": pattern}


def _event(title: dict, tags: dict, where: dict, closed: bool = True) -> dict[str, Any]:
    schema = {"type": "object", "properties": {"title": title, "tags": tags, "where": where},
              "required": list(EVENT_KEYS)}
    return {**schema, "additionalProperties": False} if closed else schema


def _where(building: dict, room: dict) -> dict[str, Any]:
    return {"type": "object", "properties": {"building": building, "room": room},
            "required": list(WHERE_KEYS), "additionalProperties": False}


_WHERE = _where(_text(30), _text(10))
_TAGS = {"type": "array", "maxItems": 3, "items": _text(12)}
_NOT_PLAIN = {"type": "string", "maxLength": 40}


def _counter(*flaws: str) -> Callable[[Any], int | None]:
    """A counter right but for its `flaws`, each a mistake a hurried learner makes."""
    running = [1]  # only the flaw "running product" reads it: a product kept between calls

    def count(schema: dict[str, Any]) -> int | None:
        if "const" in schema:
            return 1
        if "enum" in schema:
            return len(schema["enum"])
        kind = schema.get("type")
        if isinstance(kind, list):
            kinds = kind[:1] if "first type" in flaws else kind
            return count({"anyOf": [{**schema, "type": one} for one in kinds]})
        if kind == "integer" and "minimum" in schema and "maximum" in schema:
            return schema["maximum"] - schema["minimum"] + 1
        if "skeleton" in flaws and ("anyOf" in schema or kind == "object"):
            return None  # the notebook's stub, untouched: anyOf and objects left to the learner
        if "anyOf" in schema:
            counts = [count(branch) for branch in schema["anyOf"]]
            if "None as zero" in flaws:
                return sum(part or 0 for part in counts)
            return None if None in counts else sum(counts)
        if kind == "object":
            if "open is closed" not in flaws and schema.get("additionalProperties", True) is not False:
                return None
            total = running if "running product" in flaws else [1]
            for name, field in schema.get("properties", {}).items():
                part = count(field)
                if part is None:
                    return None
                optional = "required ignored" not in flaws and name not in schema.get("required", [])
                total[0] *= (part * 2 if "optional doubles" in flaws else part + 1) if optional else part
            return total[0]
        return {"boolean": 2, "null": 1}.get(kind)

    return count


def _before_the_fix(schema: dict[str, Any]) -> int | None:
    """The worked solution this notebook once shipped: it multiplied any object's properties, open or not, and
    crashed on `{"type": "object"}` and on a type list."""
    if "const" in schema:
        return 1
    if "enum" in schema:
        return len(schema["enum"])
    if "anyOf" in schema:
        counts = [_before_the_fix(branch) for branch in schema["anyOf"]]
        return None if None in counts else sum(counts)
    if schema.get("type") == "object":
        total = 1
        for field in schema["properties"].values():
            count = _before_the_fix(field)
            if count is None:
                return None
            total *= count
        return total
    if schema.get("type") == "integer" and "minimum" in schema and "maximum" in schema:
        return schema["maximum"] - schema["minimum"] + 1
    return {"boolean": 2, "null": 1}.get(schema.get("type"))


def _none_where_a_string_is(schema: dict[str, Any]) -> int | None:
    """A substring test: None wherever the schema mentions a string, even a string const or enum."""
    return None if "string" in str(schema) else _counter()(schema)


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
        _event(_text(40, "^[ -~]*$"), _TAGS, _WHERE),  # printable, but `"` and `\` are escaped: two bytes each
        _event(_text(40, "[A-Za-z :]*"), _TAGS, _WHERE),  # not anchored: it matches inside any string
        _event(_text(40, "^.*$"), _TAGS, _WHERE),  # any character
        _event(_text(40, r"^[\w :]*$"), _TAGS, _WHERE),  # \w takes letters beyond ASCII
        _event(_text(40, "(?i)^[a-z :]*$"), _TAGS, _WHERE),  # ignoring case, k also matches the Kelvin sign
    ],
    "count_replies": [
        _counter("open is closed", "required ignored"),  # multiplies the properties of any object
        _counter("open is closed"),
        _counter("required ignored"),
        _counter("optional doubles"),
        _counter("None as zero"),
        _counter("first type"),
        _counter("running product"),  # passes once, fails when called again
        _counter("skeleton"),
        _before_the_fix,
        _none_where_a_string_is,
        lambda schema: 1,
        lambda schema: len(schema.get("properties", schema.get("enum", [0]))),
        "count_replies",
    ],
}

# Correct spellings the checks must accept: patterns stricter than PLAIN_TEXT, with or without maxLength.
RIGHT: dict[str, list[Any]] = {
    "bounded_schema": [
        _event(_text(40, "^[A-Za-z0-9 :]*$"), {**_TAGS, "items": _text(12, "^[a-z ]*$")},
               _where(_text(30, "^[A-Za-z ]*$"), _text(10, "^[A-Za-z0-9]*$"))),
        _event({"type": "string", "pattern": "^[A-Z][A-Za-z :]{0,39}$"}, _TAGS,
               _where(_text(30), {"type": "string", "pattern": "^(?:[A-Z][a-z]{0,3}|[A-Z]?[0-9]{1,4})$"})),
    ],
}
