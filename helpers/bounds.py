"""How long can a guided reply get? The byte length of the longest JSON a schema allows.

A token is at least one byte, so a reply of N bytes is at most N tokens, whatever the tokenizer. When
every free-text string is plain printable ASCII without `"` or `\\` (`PLAIN_TEXT`), each character is
one byte, nothing needs escaping, and the longest reply a bounded schema allows can be counted exactly:
if it fits in `max_tokens`, a guided reply can always close.
"""
from __future__ import annotations

import json
from typing import Any

from helpers.contract import PLAIN_TEXT
from helpers.runtime.schema_tree import resolve

# Separators as the embedded server generates JSON (helpers.server.guidance.JSON_DEFAULTS).
ITEM_SEPARATOR, KEY_SEPARATOR = ", ", ": "


class Unbounded(ValueError):
    """The schema lets a reply grow without limit: a string without maxLength, an array without maxItems..."""


def max_json_bytes(schema: dict[str, Any], root: dict[str, Any] | None = None, where: str = "$") -> int:
    """The byte length of the longest compact JSON `schema` allows; `Unbounded` names the first open part.
    A `$ref` points into `root`, the whole schema `schema` is part of (by default, `schema` itself)."""
    root = schema if root is None else root
    schema = resolve(root, schema)
    if "const" in schema:
        return len(json.dumps(schema["const"]))
    if "enum" in schema:
        return max(len(json.dumps(value)) for value in schema["enum"])
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return max(max_json_bytes(branch, root, where) for branch in branches)
    kinds = schema.get("type")
    if isinstance(kinds, list):
        return max(max_json_bytes({**schema, "type": kind}, root, where) for kind in kinds)
    return _by_type(kinds, schema, root, where)


def _by_type(kind: str | None, schema: dict[str, Any], root: dict[str, Any], where: str) -> int:
    if kind == "null":
        return 4
    if kind == "boolean":
        return 5
    if kind == "integer":
        if "minimum" not in schema or "maximum" not in schema:
            raise Unbounded(f"{where}: an integer without minimum and maximum")
        return max(len(str(schema["minimum"])), len(str(schema["maximum"])))
    if kind == "string":
        if "maxLength" not in schema:
            raise Unbounded(f"{where}: a string without maxLength")
        if schema.get("pattern") != PLAIN_TEXT:
            raise Unbounded(f"{where}: a string that may need escapes or several bytes a character; "
                            "give it pattern PLAIN_TEXT")
        return schema["maxLength"] + 2
    if kind == "array":
        if "maxItems" not in schema:
            raise Unbounded(f"{where}: an array without maxItems")
        count = schema["maxItems"]
        item = max_json_bytes(schema.get("items", {}), root, f"{where}[]") if count else 0
        return 2 + count * item + max(0, count - 1) * len(ITEM_SEPARATOR)
    if kind == "object":
        if schema.get("additionalProperties", True) is not False:
            raise Unbounded(f"{where}: an object that allows keys it does not name")
        properties = schema.get("properties", {})
        members = [len(json.dumps(name)) + len(KEY_SEPARATOR) + max_json_bytes(value, root, f"{where}.{name}")
                   for name, value in properties.items()]
        return 2 + sum(members) + max(0, len(members) - 1) * len(ITEM_SEPARATOR)
    raise Unbounded(f"{where}: no type, enum or const to bound it")
