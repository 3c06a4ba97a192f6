"""OpenAI's strict subset of JSON Schema: what a request with `"strict": true` may carry, and how to get there.

`response_format={"type": "json_schema", "json_schema": {..., "strict": true}}` makes OpenAI enforce the
schema, but only a schema in a subset of JSON Schema; any other is refused with an error. `subset_problems`
checks a schema against that subset, one rule at a time, each rule quoted from OpenAI's guide
(https://platform.openai.com/docs/guides/structured-outputs, section "Supported schemas", as read for this
workshop). `to_strict_subset` rewrites any schema the workshop sends into the subset, or raises
`NotInStrictSubset` saying exactly why it cannot. The rewrite:

- `oneOf` becomes `anyOf` (the same language where the branches cannot both match, as with a union
  discriminated by a `const`: every union the workshop sends);
- an optional property becomes required and nullable (`null` stands for "left out"; the Pydantic models
  accept it where a field has a default);
- every object that leaves `additionalProperties` out gets `additionalProperties: false` (one that sets it to a
  schema or `true` asks for keys the subset cannot express, and is reported);
- keywords outside the subset (`default`, Pydantic's `discriminator`, `uniqueItems`, ...) are dropped from
  what is sent; the client still checks them, because the ladder validates every reply with the full model.

`empty_alternatives` finds the other thing no schema may carry, on any server: an empty `enum` or `anyOf`
allows nothing, and one engine's converter turns it into an empty grammar rule.
"""
from __future__ import annotations

import copy
from typing import Any

GUIDE = "https://platform.openai.com/docs/guides/structured-outputs#supported-schemas"

# Each rule as the guide words it (quoted verbatim), with the name a problem message refers to.
RULES = {
    "types": "The following types are supported for Structured Outputs: String Number Boolean Integer Object "
             "Array Enum anyOf",
    "root": "Root objects must not be anyOf and must be an object",
    "required": "To use Structured Outputs, all fields or function parameters must be specified as required.",
    "nullable": "it is possible to emulate an optional parameter by using a union type with null.",
    "additional": "additionalProperties: false must always be set in objects",
    "unsupported": "Some type-specific keywords are not yet supported / Composition: allOf, not, "
                   "dependentRequired, dependentSchemas, if, then, else",
    "size": "A schema may have up to 5000 object properties total, with up to 5 levels of nesting.",
    "strings": "In a schema, total string length of all property names, definition names, enum values, and const "
               "values cannot exceed 120,000 characters.",
    "enums": "A schema may have up to 1000 enum values across all enum properties.",
    "big_enum": "For a single enum property with string values, the total string length of all enum values cannot "
                "exceed 15,000 characters when there are more than 250 enum values.",
    "any_of": "For anyOf, the nested schemas must each be a valid JSON Schema per this subset",
    "formats": "format — Predefined formats for strings. Currently supported: date-time time date duration email "
               "hostname ipv4 ipv6 uuid",
}

TYPES = {"string", "number", "boolean", "integer", "object", "array", "null"}  # null: RULES["nullable"]
FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
# The guide's "Supported properties" (pattern, format; multipleOf, maximum, exclusiveMaximum, minimum,
# exclusiveMinimum; minItems, maxItems), plus minLength and maxLength: it lists those two only among the keywords
# that "For fine-tuned models, we additionally do not support", beside pattern and format, which it supports.
CONSTRAINTS = {"pattern", "format", "minLength", "maxLength", "multipleOf", "maximum", "exclusiveMaximum",
               "minimum", "exclusiveMinimum", "minItems", "maxItems"}
# What the guide's own examples use to build a schema ($defs and $ref: "Definitions are supported"), and the
# two annotations that constrain nothing.
STRUCTURE = {"type", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf",
             "$ref", "$defs", "definitions", "description", "title"}
SUBSET_KEYWORDS = STRUCTURE | CONSTRAINTS
NAMED_UNSUPPORTED = {"allOf", "not", "dependentRequired", "dependentSchemas", "if", "then", "else"}
MAX_PROPERTIES, MAX_DEPTH, MAX_STRING_CHARS, MAX_ENUM_VALUES = 5000, 5, 120_000, 1000
BIG_ENUM, BIG_ENUM_CHARS = 250, 15_000


class NotInStrictSubset(ValueError):
    """A schema that cannot be sent with `strict: true`; `problems` says why, one rule each."""

    def __init__(self, problems: list[str]):
        super().__init__("this schema cannot be sent with strict: true: " + "; ".join(problems))
        self.problems = problems


def _where(path: str) -> str:
    return path or "the root"


def _walk(node: Any, path: str = ""):
    """Every subschema of `node` with its JSON-pointer-like path, the node itself first."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key in ("properties", "$defs", "definitions"):
        for name, child in (node.get(key) or {}).items():
            yield from _walk(child, f"{path}/{key}/{name}")
    for key in ("anyOf", "oneOf", "allOf"):
        for i, child in enumerate(node.get(key) or []):
            yield from _walk(child, f"{path}/{key}/{i}")
    for key in ("items", "not", "if", "then", "else", "additionalProperties"):
        if isinstance(node.get(key), dict):
            yield from _walk(node[key], f"{path}/{key}")


def empty_alternatives(schema: dict) -> list[str]:
    """Where `schema` has an empty `enum`, `anyOf` or `oneOf`: a place that allows nothing, on any server."""
    return [f"{_where(path)}: an empty {key} allows nothing; leave the property out, or bound the array by "
            "maxItems: 0" for path, node in _walk(schema) for key in ("enum", "anyOf", "oneOf")
            if key in node and not node[key]]


def _types(node: dict) -> list[str]:
    kind = node.get("type")
    return kind if isinstance(kind, list) else [kind] if kind else []


def _is_object(node: dict) -> bool:
    return "object" in _types(node) or "properties" in node


def _resolve(schema: dict, node: dict) -> dict:
    ref = node.get("$ref", "")
    if ref == "#":
        return schema
    for key in ("$defs", "definitions"):
        if ref.startswith(f"#/{key}/"):
            return schema.get(key, {}).get(ref.split("/", 2)[2], {})
    return node


def _depth(schema: dict, node: dict, seen: frozenset[str] = frozenset()) -> int:
    """Levels of nested objects below and including `node` (a recursive $ref counts once)."""
    ref = node.get("$ref")
    if ref:
        return 0 if ref in seen else _depth(schema, _resolve(schema, node), seen | {ref})
    children = [*(node.get("properties") or {}).values(), *(node.get("anyOf") or []), *(node.get("oneOf") or [])]
    if isinstance(node.get("items"), dict):
        children.append(node["items"])
    below = max((_depth(schema, child, seen) for child in children if isinstance(child, dict)), default=0)
    return below + (1 if _is_object(node) else 0)


def subset_problems(schema: dict) -> list[str]:
    """Every way `schema` falls outside OpenAI's strict subset, each naming where and the guide's rule; [] if none."""
    problems: list[str] = []

    def rule(path: str, what: str, name: str) -> None:
        problems.append(f"{_where(path)}: {what} (OpenAI: \"{RULES[name]}\")")

    if not isinstance(schema, dict) or "anyOf" in schema or "object" not in _types(schema):
        rule("", "the root is not an object", "root")
    properties = enum_values = string_chars = 0
    for path, node in _walk(schema):
        for key in node:
            if key in NAMED_UNSUPPORTED:
                rule(path, f"{key} is not supported", "unsupported")
            elif key == "oneOf":
                rule(path, "oneOf is not one of the supported types (anyOf is)", "types")
            elif key not in SUBSET_KEYWORDS:
                rule(path, f"{key} is not a keyword of the subset", "types")
        for kind in _types(node):
            if kind not in TYPES:
                rule(path, f"type {kind!r} is not supported", "types")
        if node.get("format") is not None and node["format"] not in FORMATS:
            rule(path, f"format {node['format']!r} is not supported", "formats")
        if _is_object(node):
            props = node.get("properties") or {}
            properties += len(props)
            string_chars += sum(map(len, props))
            if node.get("additionalProperties") is not False:
                rule(path, "additionalProperties is not false", "additional")
            missing = [name for name in props if name not in node.get("required", [])]
            if missing:
                rule(path, f"not required: {', '.join(missing)}", "required")
        for key in ("$defs", "definitions"):
            string_chars += sum(map(len, node.get(key) or {}))
        values = node.get("enum") or []
        enum_values += len(values)
        texts = [v for v in values if isinstance(v, str)]
        string_chars += sum(map(len, texts))
        if len(values) > BIG_ENUM and sum(map(len, texts)) > BIG_ENUM_CHARS:
            rule(path, f"{len(values)} enum values of {sum(map(len, texts))} characters", "big_enum")
        if isinstance(node.get("const"), str):
            string_chars += len(node["const"])
    if properties > MAX_PROPERTIES or (isinstance(schema, dict) and _depth(schema, schema) > MAX_DEPTH):
        rule("", f"{properties} object properties, {_depth(schema, schema)} levels of nesting", "size")
    if string_chars > MAX_STRING_CHARS:
        rule("", f"{string_chars} characters of names and values", "strings")
    if enum_values > MAX_ENUM_VALUES:
        rule("", f"{enum_values} enum values", "enums")
    return problems


def _nullable(node: dict) -> dict:
    """`node` that also allows null: a type list where the node is one plain type, else a union with null."""
    if "null" in _types(node) or any(_types(branch) == ["null"] for branch in node.get("anyOf", [])):
        return node
    if isinstance(node.get("type"), str) and not {"enum", "const"} & node.keys():
        return {**node, "type": [node["type"], "null"]}
    return {"anyOf": [node, {"type": "null"}]}


def _rewrite(node: Any) -> Any:
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "oneOf":
            out["anyOf"] = _rewrite(value)
        elif key in ("properties", "$defs", "definitions"):
            out[key] = {name: _rewrite(child) for name, child in value.items()}
        elif key in SUBSET_KEYWORDS or key in NAMED_UNSUPPORTED:  # named ones stay, to be reported
            out[key] = _rewrite(value)
    if _is_object(out):
        required = set(out.get("required", []))
        props = out.setdefault("properties", {})
        for name in props:
            if name not in required:
                props[name] = _nullable(props[name])
        out["required"] = list(props)
        # Left out, extra keys are allowed by default only; a schema or `true` there asks for them on purpose (an
        # open map of keys), which the subset cannot express: kept, so that the check says so.
        out.setdefault("additionalProperties", False)
    return out


def to_strict_subset(schema: dict) -> dict:
    """`schema` rewritten into OpenAI's strict subset (see the module docstring); raises NotInStrictSubset with
    every reason when no rewrite can get it there (a root that is not an object, a keyword such as allOf or not
    whose meaning would be lost, a schema too big, an empty enum or anyOf)."""
    strict = _rewrite(copy.deepcopy(schema))
    problems = empty_alternatives(schema) + subset_problems(strict)
    if problems:
        raise NotInStrictSubset(problems)
    return strict
