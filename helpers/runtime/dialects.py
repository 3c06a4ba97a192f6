"""How each server spells "constrain the output": the one place that knows the request dialects.

Clients call `request_fields` to build the extra keyword arguments of
`client.chat.completions.create`; the embedded server calls `constraint_from_body`
to read them back. Keeping both directions here means a spelling can only be
wrong in one place, and a round-trip test catches it. `as_received` shows a
request's fields the way a server reads them, for a reader to see.

Reading is strict: a key this module does not know inside `nvext`,
`structured_outputs` or `response_format` is a `DialectError`, never ignored,
because a typo that passed silently would look like guided decoding and enforce nothing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from helpers.runtime.strict_subset import NotInStrictSubset, to_strict_subset

ConstraintKind = Literal["json_schema", "json_object", "choice", "regex"]


@dataclass(frozen=True)
class Constraint:
    """What the output must match, independent of how a request spelled it."""

    kind: ConstraintKind
    value: Any = None
    field: str = ""


class DialectError(ValueError):
    """A guided-decoding field that cannot be read; `field` names it the way a request body spells it."""

    def __init__(self, message: str, field: str, code: str | None = None):
        super().__init__(message)
        self.field, self.code = field, code


DIALECTS: dict[str, str] = {
    "nvext": "NVIDIA NIM for LLMs 1.x: extra_body={'nvext': {'guided_json': schema}}",
    "structured_outputs": "vLLM >= 0.10.2, H Company: extra_body={'structured_outputs': {'json': schema}}",
    "guided_json": "vLLM <= 0.11: extra_body={'guided_json': schema}",
    "response_format": "OpenAI, newer NIM, llama.cpp, Ollama: response_format={'type': 'json_schema', ...}",
    "json_object_schema": "llama-cpp-python: response_format={'type': 'json_object', 'schema': schema}",
    "prompt_only": "no constraint: the schema travels in the prompt alone",
}

# vLLM's StructuredOutputsParams declares `json_object: bool | None`: true asks for any JSON object.
STRUCTURED_OUTPUTS_KEYS: dict[str, ConstraintKind] = {"json": "json_schema", "json_object": "json_object",
                                                      "choice": "choice", "regex": "regex"}
LEGACY_KEYS: dict[str, ConstraintKind] = {"guided_json": "json_schema", "guided_choice": "choice", "guided_regex": "regex"}
# Grammars in a server's own syntax (GBNF, Lark, vLLM's structural tags) are not translated here.
UNSUPPORTED_KEYS = ("guided_grammar", "grammar", "structural_tag")
# Keys the servers document beside the constraint (vLLM's StructuredOutputsParams, NIM's nvext): known,
# not implemented here, so refused by name rather than dropped.
NOT_IMPLEMENTED_KEYS = {
    "structured_outputs": ("disable_fallback", "disable_any_whitespace", "disable_additional_properties",
                           "whitespace_pattern"),
    "nvext": ("guided_decoding_backend", "guided_whitespace_pattern", "top_k", "min_p", "ignore_eos", "min_tokens"),
}
# Sampling keys NIM documents inside nvext: not constraints, so not read here; the server's request model reads them.
SAMPLING_KEYS = {"nvext": ("repetition_penalty",)}
RESPONSE_FORMAT_KEYS = {"text": {"type"}, "json_object": {"type", "schema"}, "json_schema": {"type", "json_schema"}}
JSON_SCHEMA_SPEC_KEYS = {"name", "description", "schema", "strict"}
# The top-level body fields this module reads; the server's request model declares exactly these.
BODY_FIELDS = (*LEGACY_KEYS, "guided_grammar", "structured_outputs", "nvext", "response_format")
# The embedded server's per-token mask trace: an extension no other server knows.
TRACE_FIELD = "x_trace"


def _key_for(table: dict[str, ConstraintKind], kind: ConstraintKind, dialect: str) -> str:
    for key, table_kind in table.items():
        if table_kind == kind:
            return key
    raise ValueError(f"the {dialect!r} dialect has no spelling for a {kind} constraint")


def request_fields(dialect: str, constraint: Constraint | None, name: str = "output") -> dict[str, Any]:
    """Keyword arguments for `client.chat.completions.create` that ask `dialect` for `constraint`."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    if constraint is None or dialect == "prompt_only":
        return {}
    kind, value = constraint.kind, constraint.value
    if dialect == "structured_outputs":
        flag = True if kind == "json_object" else value
        return {"extra_body": {"structured_outputs": {_key_for(STRUCTURED_OUTPUTS_KEYS, kind, dialect): flag}}}
    if dialect == "guided_json":
        return {"extra_body": {_key_for(LEGACY_KEYS, kind, dialect): value}}
    if dialect == "nvext":
        return {"extra_body": {"nvext": {_key_for(LEGACY_KEYS, kind, dialect): value}}}
    if kind == "json_object":
        return {"response_format": {"type": "json_object"}}
    if kind != "json_schema":
        raise ValueError(f"the {dialect!r} dialect has no spelling for a {kind} constraint")
    if dialect == "response_format":
        # strict: true only with a schema in OpenAI's strict subset; what the rewrite drops, the client still checks.
        # A schema no rewrite can bring there (an open map of keys) goes as it is, strict: false: OpenAI then does not
        # enforce it, a server that enforces every schema still does, and the client validates either way.
        try:
            spec = {"name": name, "schema": to_strict_subset(value), "strict": True}
        except NotInStrictSubset:
            spec = {"name": name, "schema": value, "strict": False}
        return {"response_format": {"type": "json_schema", "json_schema": spec}}
    return {"response_format": {"type": "json_object", "schema": value}}


def guided_json(dialect: str, schema: dict, name: str = "output") -> dict[str, Any]:
    """Shorthand for the common case: constrain the reply to a JSON schema."""
    return request_fields(dialect, Constraint("json_schema", schema), name)


def with_trace(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` plus the embedded server's request for a per-token mask trace."""
    return {**fields, "extra_body": {**fields.get("extra_body", {}), TRACE_FIELD: True}}


def _schema(value: Any, field: str) -> Constraint:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise DialectError(f"{field} is a string but not valid JSON: {exc}", field, "invalid_schema") from exc
    if not isinstance(value, dict):
        raise DialectError(f"{field} must be a JSON Schema object, got {type(value).__name__}", field, "invalid_schema")
    return Constraint("json_schema", value, field)


def _checked(kind: ConstraintKind, value: Any, field: str) -> Constraint:
    if kind == "json_schema":
        return _schema(value, field)
    if kind == "json_object":
        if value is not True:
            raise DialectError(f"{field} must be true or false, got {value!r}", field, "invalid_json_object")
        return Constraint("json_object", None, field)
    if kind == "choice":
        if not (isinstance(value, list) and value and all(isinstance(c, str) and c for c in value)):
            raise DialectError(f"{field} must be a non-empty list of non-empty strings", field, "invalid_choice")
        return Constraint("choice", list(value), field)
    if not (isinstance(value, str) and value):
        raise DialectError(f"{field} must be a non-empty regular expression string", field, "invalid_regex")
    return Constraint("regex", value, field)


def _refuse_unknown_keys(container: dict, known: set[str], where: str) -> None:
    """Every key of `container` is one this module reads; a known-but-unimplemented one is named as such."""
    for key, value in container.items():
        if key in NOT_IMPLEMENTED_KEYS.get(where, ()) and value is not None:
            raise DialectError(f"{where}.{key} is not implemented by this server; remove it",
                               f"{where}.{key}", "unsupported_parameter")
        if key not in known and key not in NOT_IMPLEMENTED_KEYS.get(where, ()):
            taken = sorted(set(known) - set(UNSUPPORTED_KEYS))  # a key it refuses is not one it takes
            raise DialectError(f"{where}.{key} is not a field this server knows; {where} takes "
                               f"{', '.join(taken)}", f"{where}.{key}", "unknown_parameter")


def _from_table(container: dict, table: dict[str, ConstraintKind], prefix: str) -> list[Constraint]:
    for key in UNSUPPORTED_KEYS:
        if container.get(key) is not None:
            raise DialectError(f"{prefix}{key} is not supported by this server; use a JSON schema, "
                               "a choice list or a regex", prefix + key, "unsupported_constraint")
    return [_checked(kind, container[key], prefix + key) for key, kind in table.items()
            if container.get(key) is not None and not (kind == "json_object" and container[key] is False)]


def _from_container(body: dict, name: str, table: dict[str, ConstraintKind]) -> list[Constraint]:
    value = body.get(name)
    if value is None:
        return []
    if not isinstance(value, dict):
        raise DialectError(f"{name} must be an object", name)
    _refuse_unknown_keys(value, {*table, *UNSUPPORTED_KEYS, *SAMPLING_KEYS.get(name, ())}, name)
    return _from_table(value, table, f"{name}.")


def _from_response_format(rf: Any) -> list[Constraint]:
    if not isinstance(rf, dict) or "type" not in rf:
        raise DialectError("response_format must be an object with a 'type'", "response_format")
    kind = rf["type"]
    if kind not in RESPONSE_FORMAT_KEYS:
        raise DialectError(f"response_format.type must be text, json_object or json_schema, got {kind!r}",
                           "response_format.type")
    _refuse_unknown_keys(rf, RESPONSE_FORMAT_KEYS[kind], "response_format")
    if kind == "text":
        return []
    if kind == "json_object":
        if rf.get("schema") is not None:
            return [_schema(rf["schema"], "response_format.schema")]
        return [Constraint("json_object", None, "response_format")]
    spec = rf.get("json_schema")
    if not isinstance(spec, dict) or spec.get("schema") is None:
        raise DialectError("response_format.json_schema must be an object holding a 'schema'",
                           "response_format.json_schema", "invalid_schema")
    _refuse_unknown_keys(spec, JSON_SCHEMA_SPEC_KEYS, "response_format.json_schema")
    return [_schema(spec["schema"], "response_format.json_schema.schema")]


def constraint_from_body(body: dict) -> Constraint | None:
    """The one constraint a chat-completions request body asks for, in any dialect; None for plain text.

    `body` holds the request's guided-decoding fields (those in BODY_FIELDS); other keys are not read.
    """
    found = _from_table(body, LEGACY_KEYS, "")
    found += _from_container(body, "structured_outputs", STRUCTURED_OUTPUTS_KEYS)
    found += _from_container(body, "nvext", LEGACY_KEYS)
    if body.get("response_format") is not None:
        found += _from_response_format(body["response_format"])
    if len(found) > 1:
        fields = " and ".join(c.field for c in found)
        raise DialectError(f"conflicting guided-decoding fields: {fields}; send exactly one",
                           found[1].field, "conflicting_constraints")
    return found[0] if found else None


SCHEMA_PLACEHOLDER = "SCHEMA"


def as_received(fields: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """What a server reads from a request's guided-decoding `fields` (those `request_fields` builds), and the wrapper
    around it: the constraint's value as `constraint_from_body` reads it (for `response_format`, the schema in
    OpenAI's strict rewrite), and `fields` with that value shown as "SCHEMA"; None and `fields` when it asks for none.

    `extra_body`'s keys travel as top-level fields of the request body, so the server reads them there."""
    body = {**fields.get("extra_body", {}), **{key: value for key, value in fields.items() if key != "extra_body"}}
    constraint = constraint_from_body(body)
    if constraint is None:
        return None, fields

    def wrap(node: Any) -> Any:
        if node is constraint.value:
            return SCHEMA_PLACEHOLDER
        return {key: wrap(value) for key, value in node.items()} if isinstance(node, dict) else node

    return constraint.value, wrap(fields)
