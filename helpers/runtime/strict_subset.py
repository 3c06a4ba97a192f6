"""OpenAI's strict subset of JSON Schema: what a request with `"strict": true` may carry, and how to get there.

`response_format={"type": "json_schema", "json_schema": {..., "strict": true}}` makes OpenAI enforce the
schema, but only a schema in a subset of JSON Schema; any other is refused with an error. `subset_problems`
checks a schema against that subset, one rule at a time, each rule quoted from OpenAI's guide
(https://platform.openai.com/docs/guides/structured-outputs, section "Supported schemas", as read for this
workshop). `to_strict_subset` rewrites a schema into the subset without changing what it means, or raises
`NotInStrictSubset` saying exactly why it cannot. The rewrite:

- `oneOf` becomes `anyOf` where a `const` tells the branches apart (a discriminated union: every union the
  workshop sends), since then no value can match two of them and the two mean the same;
- an optional property that refuses null becomes required and nullable: `null` stands for "left out", and
  `left_out_nulls` reads it back that way, so that its default applies. One that already allows null stays
  as it is, required: null then means null, which only keeps its meaning where its default is null;
- every object that declares its properties and leaves `additionalProperties` out gets `additionalProperties:
  false` (it allows fewer replies, never more);
- annotations, which constrain nothing, are dropped (`default`, `examples`, Pydantic's `discriminator`...).

Everything else stays, so the checker reports what the subset cannot carry: a root that is not an object, a
node with no type (`items: {}`, an array without `items`, a property with only a description), a keyword
outside the subset (`patternProperties`, `prefixItems`, `uniqueItems`, `allOf`...), an open map of keys.
And a change of meaning is refused: `required` naming an undeclared property, an object declaring no
properties (closed, it could only be `{}`), a `oneOf` whose branches may overlap, an optional nullable
property whose default is not null.

`empty_alternatives` finds the other thing no schema may carry, on any server: an empty `enum` or `anyOf`
allows nothing, and one engine's converter turns it into an empty grammar rule.
"""
from __future__ import annotations

import copy
import json
from typing import Any

from jsonschema import Draft202012Validator

from helpers.runtime.schema_tree import resolve, subschemas

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
# Keywords that constrain nothing, which the rewrite drops: a reply valid without them is valid with them.
ANNOTATIONS = {"default", "examples", "$comment", "deprecated", "readOnly", "writeOnly", "$schema", "discriminator"}
NAMED_UNSUPPORTED = {"allOf", "not", "dependentRequired", "dependentSchemas", "if", "then", "else"}
TYPED = {"type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref"}  # a node with none of these allows any value
MAX_PROPERTIES, MAX_DEPTH, MAX_STRING_CHARS, MAX_ENUM_VALUES = 5000, 5, 120_000, 1000
BIG_ENUM, BIG_ENUM_CHARS = 250, 15_000


class NotInStrictSubset(ValueError):
    """A schema that cannot be sent with `strict: true`; `problems` says why, one rule each."""

    def __init__(self, problems: list[str]):
        super().__init__("this schema cannot be sent with strict: true: " + "; ".join(problems))
        self.problems = problems


def _where(path: str) -> str:
    return path or "the root"


def empty_alternatives(schema: dict) -> list[str]:
    """Where `schema` has an empty `enum`, `anyOf` or `oneOf`: a place that allows nothing, on any server."""
    return [f"{_where(path)}: an empty {key} allows nothing; leave the property out, or bound the array by "
            "maxItems: 0" for path, node in subschemas(schema) for key in ("enum", "anyOf", "oneOf")
            if key in node and not node[key]]


def _types(node: dict) -> list[str]:
    kind = node.get("type")
    return kind if isinstance(kind, list) else [kind] if kind else []


def _is_object(node: dict) -> bool:
    return "object" in _types(node) or "properties" in node


def _depth(schema: dict, node: dict, seen: frozenset[str] = frozenset()) -> int:
    """Levels of nested objects below and including `node` (a recursive $ref counts once)."""
    ref = node.get("$ref")
    if ref:
        return 0 if ref in seen else _depth(schema, resolve(schema, node), seen | {ref})
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

    if not isinstance(schema, dict) or "anyOf" in schema or _types(schema) != ["object"]:
        rule("", "the root is not an object", "root")
    properties = enum_values = string_chars = 0
    dangling = False  # a reference to nothing: the depth, which follows every reference, cannot be counted
    for path, node in subschemas(schema):
        for key in node:
            if key in NAMED_UNSUPPORTED:
                rule(path, f"{key} is not supported", "unsupported")
            elif key == "oneOf":
                rule(path, "oneOf is not one of the supported types (anyOf is)", "types")
            elif key not in SUBSET_KEYWORDS:
                rule(path, f"{key} is not a keyword of the subset", "types")
        if not TYPED & node.keys():
            rule(path, "no type: it allows any value", "types")
        for kind in _types(node):
            if kind not in TYPES:
                rule(path, f"type {kind!r} is not supported", "types")
        if "array" in _types(node) and not isinstance(node.get("items"), dict):
            rule(path, "an array without items: its items have no type", "types")
        if "$ref" in node:
            try:
                resolve(schema, node)
            except ValueError as exc:
                problems.append(f"{_where(path)}: {exc}")
                dangling = True
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
    depth = 0 if dangling or not isinstance(schema, dict) else _depth(schema, schema)
    if properties > MAX_PROPERTIES or depth > MAX_DEPTH:
        rule("", f"{properties} object properties, {depth} levels of nesting", "size")
    if string_chars > MAX_STRING_CHARS:
        rule("", f"{string_chars} characters of names and values", "strings")
    if enum_values > MAX_ENUM_VALUES:
        rule("", f"{enum_values} enum values", "enums")
    return problems


def _nullable(node: Any) -> dict:
    """`node` that also allows null: a type list where the node is one plain type, else a union with null."""
    if isinstance(node, dict) and isinstance(node.get("type"), str) and not {"enum", "const"} & node.keys():
        return {**node, "type": [node["type"], "null"]}
    return {"anyOf": [node, {"type": "null"}]}


def _tags(schema: dict, node: Any) -> dict[str, set[str]]:
    """For each property that every value of `node` holds, fixed by a `const`: the values it may take (as JSON)."""
    node = resolve(schema, node)
    if not isinstance(node, dict):
        return {}
    branches = node.get("anyOf") or node.get("oneOf")
    if branches:
        tags = [_tags(schema, branch) for branch in branches]
        return {name: set().union(*(tag[name] for tag in tags)) for name in set.intersection(*map(set, tags))}
    fixed = {name: resolve(schema, spec) for name, spec in (node.get("properties") or {}).items()
             if name in node.get("required", [])}
    return {name: {json.dumps(spec["const"])} for name, spec in fixed.items()
            if isinstance(spec, dict) and "const" in spec}


def _told_apart(schema: dict, branches: list) -> bool:
    """Whether no value can match two of `branches`: a property they all fix takes different values in each."""
    tags = [_tags(schema, branch) for branch in branches]
    shared = set.intersection(*map(set, tags)) if tags else set()
    return any(sum(len(tag[name]) for tag in tags) == len(set().union(*(tag[name] for tag in tags)))
               for name in shared)


def _rewrite(schema: dict, admits: Draft202012Validator, path: str, node: dict) -> list[str]:
    """Rewrite one subschema in place (its subschemas are rewritten after it); what no rewrite can bring into the
    subset without changing its meaning. `schema` is the original, where references are looked up."""
    problems = []
    if "oneOf" in node:
        if _told_apart(schema, node["oneOf"]):
            node["anyOf"] = node.pop("oneOf")
        else:
            problems.append(f"{_where(path)}: no const tells the branches of its oneOf apart, and as anyOf it would "
                            "also allow a value that two of them match")
    if _is_object(node):
        props = node.setdefault("properties", {})
        if "additionalProperties" not in node:
            if not props:
                problems.append(f"{_where(path)}: an object that declares no properties; closed, it could only be {{}}")
            node["additionalProperties"] = False
        if undeclared := [name for name in node.get("required", []) if name not in props]:
            problems.append(f"{_where(path)}: required names {', '.join(undeclared)}, which properties does not "
                            "declare; the closed object could not hold them")
        for name, spec in props.items():
            if name in node.get("required", []):
                continue
            if not admits.evolve(schema=spec).is_valid(None):
                props[name] = _nullable(spec)
            elif isinstance(spec, dict) and spec.get("default") is not None:
                problems.append(f"{_where(path)}/properties/{name}: optional, nullable, and "
                                f"{json.dumps(spec['default'])} by default: required, its null could not stand for "
                                "both null and the default")
        node["required"] = list(props)
    for key in ANNOTATIONS & node.keys():
        del node[key]
    return problems


def to_strict_subset(schema: dict) -> dict:
    """`schema` rewritten into OpenAI's strict subset (see the module docstring); raises NotInStrictSubset with
    every reason when no rewrite can get it there without changing what it means."""
    strict = copy.deepcopy(schema)
    problems = empty_alternatives(schema)
    admits = Draft202012Validator(schema)
    for path, node in subschemas(strict):
        problems += _rewrite(schema, admits, path, node)
    problems += subset_problems(strict)
    if problems:
        raise NotInStrictSubset(problems)
    return strict


def left_out_nulls(schema: dict, data: Any) -> Any:
    """`data` as `schema` means it, when it replies to the strict rewrite of `schema`: a null where `schema` lets a
    property be left out and refuses null is that property left out (its default then applies). Where `schema`
    was sent as it is, a server that enforces it writes no such null, and `data` comes back unchanged.

    A client reads every reply through this before it checks the reply against `schema` or a Pydantic model, so
    that it accepts exactly the replies the server was asked to enforce."""
    validator = Draft202012Validator(schema)

    def read(node: Any, value: Any) -> Any:
        node = resolve(schema, node)
        if not isinstance(node, dict):
            return value
        for branch in node.get("anyOf") or node.get("oneOf") or []:
            candidate = read(branch, value)
            if validator.evolve(schema=branch).is_valid(candidate):
                value = candidate
                break
        props = node.get("properties")
        if isinstance(value, dict) and isinstance(props, dict):
            left_out = {name for name, item in value.items()
                        if item is None and name in props and name not in node.get("required", [])
                        and not validator.evolve(schema=props[name]).is_valid(None)}
            value = {name: read(props[name], item) if name in props else item for name, item in value.items()
                     if name not in left_out}
        elif isinstance(value, list) and isinstance(node.get("items"), dict):
            value = [read(node["items"], item) for item in value]
        return value

    return read(schema, data)


def read_back(schema: dict, raw: str) -> str:
    """A reply's JSON text as `schema` means it (`left_out_nulls`), for a parser that reads text
    (`model_validate_json`): the one reading a client gives a reply to a schema it may have sent rewritten. A text
    that is not JSON comes back unchanged, for that parser to say why."""
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    return json.dumps(left_out_nulls(schema, data))
