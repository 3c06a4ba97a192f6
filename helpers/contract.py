"""The campus assistant's final-answer contract, parsed and checked in plain Python."""

from __future__ import annotations

import json
import re
from typing import Any, Literal, get_args

from helpers.runtime.paths import DATA
from helpers.runtime.schema_tree import json_path

Status = Literal["answered", "not_found", "needs_clarification"]
Category = Literal["campus_event", "campus_hours", "campus_resource", "comparison", "refusal"]

STATUSES: tuple[str, ...] = get_args(Status)
CATEGORIES: tuple[str, ...] = get_args(Category)
KEYS: tuple[str, ...] = ("status", "answer", "category", "items", "missing", "sources")
ENUMS: dict[str, tuple[str, ...]] = {"status": STATUSES, "category": CATEGORIES}
LIST_KEYS: tuple[str, ...] = ("items", "missing", "sources")

ITEM_KEYS: tuple[str, ...] = ("name", "value")

# Bounds make guided decoding terminate: without them a tiny model can keep writing one string, one list
# or one object until max_tokens. Every text is plain: printable ASCII without " or \, so one character is
# one byte and never more than one token, and the longest valid object fits in ANSWER_TOKENS (helpers.bounds).
ANSWER_MAX_LENGTH = 100
ITEM_TEXT_MAX_LENGTH = 24
SHORT_TEXT_MAX_LENGTH = 30
MAX_LIST_ENTRIES = 2
ANSWER_TOKENS = 512
PLAIN_TEXT = r"^[ !#-\[\]-~]*$"
_PLAIN = re.compile(PLAIN_TEXT)

# The NIM workshop's own fallback, word for word; `missing` names the cause.
FALLBACK_ANSWER = "I couldn't produce a valid structured response. Please ask again."


def _text_schema(limit: int) -> dict[str, Any]:
    return {"type": "string", "maxLength": limit, "pattern": PLAIN_TEXT}


ANSWER_JSON_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "status": {"type": "string", "enum": list(STATUSES)},
        "answer": _text_schema(ANSWER_MAX_LENGTH),
        "category": {"type": "string", "enum": list(CATEGORIES)},
        "items": {
            "type": "array",
            "maxItems": MAX_LIST_ENTRIES,
            "items": {"type": "object", "properties": {key: _text_schema(ITEM_TEXT_MAX_LENGTH) for key in ITEM_KEYS},
                      "required": list(ITEM_KEYS), "additionalProperties": False},
        },
        "missing": {"type": "array", "maxItems": MAX_LIST_ENTRIES, "items": _text_schema(SHORT_TEXT_MAX_LENGTH)},
        "sources": {"type": "array", "maxItems": MAX_LIST_ENTRIES, "items": _text_schema(SHORT_TEXT_MAX_LENGTH)},
    },
    "required": list(KEYS),
    "additionalProperties": False,
}

_TYPE_NAMES = {
    dict: "an object",
    list: "a list",
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    type(None): "null",
}

_FENCE = re.compile(r"```[\w-]*\s*(.*?)```", re.DOTALL)


def type_name(value: Any) -> str:
    """Name a parsed value's JSON type, the words a reader (or a model) knows."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def wrong_type(path: str, expected: str, value: Any) -> str:
    """A type problem, e.g. items[1]: expected an object, got a string (no path at the top level)."""
    where = f"{path}: " if path else ""
    return f"{where}expected {expected}, got {type_name(value)}"


def wrong_value(path: str, allowed: tuple[str, ...], value: Any) -> str:
    """A value outside an enum, e.g. status: expected one of answered, ...; got 'done'."""
    return f"{path}: expected one of {', '.join(allowed)}; got {value!r}"


def too_long(path: str, limit: int, size: int, unit: str) -> str:
    """A bound exceeded, e.g. answer: expected at most 400 characters, got 523."""
    return f"{path}: expected at most {limit} {unit}, got {size}"


def naive_parse_json_object(text: str) -> dict:
    """First '{' to last '}', then json.loads: short, and wrong on many real replies."""
    return json.loads(text[text.find("{") : text.rfind("}") + 1])


def _whole_values(blocks: list[str]) -> list[Any]:
    values = []
    for block in blocks:
        try:
            values.append(json.loads(block))
        except json.JSONDecodeError:
            continue
    return values


def _closing_bracket(text: str, start: int) -> int | None:
    # Strings respected, so a '}' inside "..." does not count.
    depth, in_string, escaped = 0, False, False
    for i, char in enumerate(text[start:], start):
        if escaped:
            escaped = False
        elif in_string and char == "\\":
            escaped = True
        elif char == '"':
            in_string = not in_string
        elif not in_string and char in "{[":
            depth += 1
        elif not in_string and char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def _first_object(text: str) -> dict:
    decoder = json.JSONDecoder()
    first_failure = ""
    tried_up_to = 0
    for start in (i for i, char in enumerate(text) if char == "{"):
        # A '{' inside a span that already failed (an item of a broken answer)
        # is not where the answer starts; an unclosed '{' in prose spans nothing.
        if start < tried_up_to:
            continue
        try:
            return decoder.raw_decode(text, start)[0]
        except json.JSONDecodeError as error:
            first_failure = first_failure or f" (the '{{' at char {start} fails: {error})"
            tried_up_to = _closing_bracket(text, start) or error.pos
    raise ValueError(f"no JSON object found in the reply{first_failure}")


def parse_json_object(text: str) -> dict:
    """Return the first JSON object in a model reply; raise ValueError saying why when there is none."""
    if not text.strip():
        raise ValueError("reply is empty")
    # The whole reply and each fenced block decide first: a list of objects is
    # reported as a list, not mined for an object, and a broken first block
    # does not hide a good second one.
    values = _whole_values([text, *_FENCE.findall(text)])
    for value in values:
        if isinstance(value, dict):
            return value
    if values:
        raise ValueError(f"found JSON but it is {type_name(values[0])}, not an object")
    return _first_object(text)


def not_plain(path: str, value: str) -> str:
    """A text with a character outside plain printable ASCII, or a double quote or backslash."""
    odd = next(char for char in value if not _PLAIN.fullmatch(char))
    return f"{path}: expected plain text (printable ASCII without \" or \\), got {odd!r}"


def fits(text: str, limit: int) -> bool:
    """Whether a plain-text field of at most `limit` characters accepts `text`. A schema that offers text it did not
    write (a value a page shows, a word of the user's instruction) as an `enum`, `const` or pattern offers only
    what fits the field it fills: the server would otherwise allow what the client then refuses."""
    return len(text) <= limit and _PLAIN.fullmatch(text) is not None


def text_problems(path: str, value: Any, limit: int) -> list[str]:
    """What is wrong with one text of the contract: not a string, not plain, or longer than `limit`."""
    if not isinstance(value, str):
        return [wrong_type(path, "a string", value)]
    problems = [] if _PLAIN.fullmatch(value) else [not_plain(path, value)]
    if len(value) > limit:
        problems.append(too_long(path, limit, len(value), "characters"))
    return problems


def item_problems(path: str, value: Any) -> list[str]:
    """What is wrong with one entry of `items`: exactly `name` and `value`, each a short plain text."""
    if not isinstance(value, dict):
        return [wrong_type(path, "an object", value)]
    problems = [f"missing key: {path}.{key}" for key in ITEM_KEYS if key not in value]
    problems += [f"unexpected key: {path}.{key}" for key in value if key not in ITEM_KEYS]
    return problems + [p for key in ITEM_KEYS if key in value
                       for p in text_problems(f"{path}.{key}", value[key], ITEM_TEXT_MAX_LENGTH)]


def list_problems(key: str, value: Any) -> list[str]:
    """What is wrong with one of the three lists, and with each of its entries."""
    if not isinstance(value, list):
        return [wrong_type(key, "a list", value)]
    # Past the bound the entries are not worth checking one by one.
    if len(value) > MAX_LIST_ENTRIES:
        return [too_long(key, MAX_LIST_ENTRIES, len(value), "entries")]
    if key == "items":
        return [p for i, entry in enumerate(value) for p in item_problems(f"{key}[{i}]", entry)]
    return [p for i, entry in enumerate(value) for p in text_problems(f"{key}[{i}]", entry, SHORT_TEXT_MAX_LENGTH)]


def validate_answer(data: Any) -> list[str]:
    """Every way `data` breaks the contract, one message each; [] when it is valid."""
    if not isinstance(data, dict):
        return [wrong_type("", "a JSON object", data)]
    problems = [f"missing key: {key}" for key in KEYS if key not in data]
    problems += [f"unexpected key: {key}" for key in data if key not in KEYS]
    for key, allowed in ENUMS.items():
        if key in data and data[key] not in allowed:
            problems.append(wrong_value(key, allowed, data[key]))
    if "answer" in data:
        problems += text_problems("answer", data["answer"], ANSWER_MAX_LENGTH)
    for key in LIST_KEYS:
        if key in data:
            problems += list_problems(key, data[key])
    return problems


def format_error(missing: str = "valid_json", answer: str | None = None) -> dict:
    """The deterministic fallback, as the NIM workshop writes it: an honest non-answer that is itself valid
    under the contract, its cause in `missing`. Its status asks the user to try again; `is_fallback` tells it
    apart from a model's own question."""
    return {
        "status": "needs_clarification",
        "answer": FALLBACK_ANSWER if answer is None else answer,
        "category": "refusal",
        "items": [],
        "missing": [missing],
        "sources": [],
    }


def load_corpus() -> list[dict[str, Any]]:
    """The corpus of realistic replies (`data/broken_outputs.jsonl`): id, reply, whether it should parse and be
    valid, and why."""
    return [json.loads(line) for line in (DATA / "broken_outputs.jsonl").read_text(encoding="utf-8").splitlines()]


def is_fallback(data: Any) -> bool:
    """Whether `data` is the deterministic fallback (what `format_error` builds), not a model's answer."""
    return (isinstance(data, dict) and data.get("category") == "refusal" and data.get("items") == []
            and data.get("sources") == [] and isinstance(data.get("missing"), list) and len(data["missing"]) == 1
            and data.get("status") == "needs_clarification")
