"""Checks for notebook 00's exercises: spell a guided request for NIM 1.x, and write a schema for a verdict."""
from __future__ import annotations

import inspect
import json
from typing import Any

from helpers.exercises import Verdict, schema_validator

# What the notebook's city_schema accepts and rejects: the check recognises it by behaviour, so the
# schema itself has one source, the notebook's cell.
CITY = {"city": "Paris", "country": "France"}
NOT_CITIES = [{"city": "Paris"}, {"city": 1, "country": "France"}, {**CITY, "river": "Seine"}]

VERDICTS = [{"verdict": "yes"}, {"verdict": "no"}]
NOT_VERDICTS = [{"verdict": "maybe"}, {"verdict": "Yes"}, {}, {"verdict": "yes", "why": "because"},
                {"verdict": True}, "yes", None]


def _is_city_schema(schema: Any) -> bool:
    validator = schema_validator(schema)
    return (validator is not None and validator.is_valid(CITY)
            and not any(validator.is_valid(wrong) for wrong in NOT_CITIES))


def _create_arguments() -> set[str]:
    """The keyword arguments `client.chat.completions.create` takes, read off the installed openai client."""
    from openai.resources.chat.completions import Completions

    return set(inspect.signature(Completions.create).parameters) - {"self"}


# Arguments that ask for another kind of output: the answer must constrain the reply through `nvext` alone.
OTHER_CONSTRAINTS = {"response_format", "tools", "tool_choice", "functions", "function_call"}
# Guided-decoding fields of other servers (vLLM's) and NIM's other constraints: beside or instead of `guided_json`,
# they are not the NIM 1.x spelling of this request. Any other key (top_k, repetition_penalty...) may stand beside.
OTHER_SPELLINGS = {"guided_json", "guided_choice", "guided_regex", "guided_grammar", "structured_outputs",
                   "response_format"}


def _schema_value(value: Any) -> Any:
    """The schema a `guided_json` holds: NIM takes it as an object or as a JSON string."""
    try:
        return json.loads(value) if isinstance(value, str) else value
    except json.JSONDecodeError:
        return None


def nim_fields(answer: Any) -> Verdict:
    """Your turn 1: the keyword arguments that make NIM 1.x constrain the reply to city_schema. Other arguments of
    `create` that constrain nothing (temperature, max_tokens, seed...) may stand beside them."""
    praise = "that is exactly how NIM 1.x reads guided JSON."
    if not isinstance(answer, dict):
        return False, praise, "write a dict of keyword arguments for client.chat.completions.create."
    if "nvext" in answer or "guided_json" in answer:
        return False, praise, ("the openai client has no `nvext` argument: fields it does not know go inside "
                               "`extra_body`, which it sends as top-level fields of the request body.")
    if unknown := sorted(set(answer) - _create_arguments()):
        return False, praise, f"`{unknown[0]}` is not an argument of client.chat.completions.create."
    if other := sorted(set(answer) & OTHER_CONSTRAINTS):
        return False, praise, (f"`{other[0]}` asks for output another way, which NIM 1.x does not read as guided "
                               "JSON: leave it out.")
    body = answer.get("extra_body")
    if not isinstance(body, dict):
        return False, praise, "NIM reads guided JSON from the request body: the keyword argument `extra_body`."
    if spelled := sorted(set(body) & OTHER_SPELLINGS):
        return False, praise, (f"`{spelled[0]}` at the top of the body is another server's spelling (vLLM's): "
                               "NIM 1.x reads guided JSON inside one object, `nvext`.")
    if not isinstance(body.get("nvext"), dict):
        return False, praise, "NIM 1.x reads its extensions from one object in the body: `extra_body={\"nvext\": {...}}`."
    nvext = body["nvext"]
    if "guided_json" not in nvext or not _is_city_schema(_schema_value(nvext["guided_json"])):
        return False, praise, "inside `nvext`, the key is `guided_json` and its value the schema itself, city_schema."
    if other := sorted(set(nvext) & (OTHER_SPELLINGS - {"guided_json"})):
        return False, praise, f"`{other[0]}` is a second constraint beside `guided_json`: ask for one."
    return True, praise, ""


def verdict_schema(answer: Any, conn: Any = None) -> Verdict:
    """Your turn 2: a schema for {"verdict": "yes"} or {"verdict": "no"} and nothing else. Given a
    connection, it also asks the model, guided by the schema, and checks the reply against it."""
    praise = "the schema accepts yes and no and rejects the rest"
    validator = schema_validator(answer)
    if validator is None:
        return False, praise, "write a JSON schema: a dict such as {\"type\": \"object\", ...}."
    if not all(validator.is_valid(good) for good in VERDICTS):
        return False, praise, "it must accept {\"verdict\": \"yes\"} and {\"verdict\": \"no\"}."
    accepted = [wrong for wrong in NOT_VERDICTS if validator.is_valid(wrong)]
    if accepted:
        return False, praise, (f"it also accepts {json.dumps(accepted[0])}: an object needs `required` and "
                               "`additionalProperties: false`, and `verdict` an `enum` of the two strings.")
    if conn is None:
        return True, praise + ".", ""
    reply = conn.client.chat.completions.create(
        model=conn.model, temperature=0, max_tokens=20, **conn.profile.guided(answer, name="verdict"),
        messages=[{"role": "user", "content": "Is Paris in France? Answer with a verdict."}])
    text = reply.choices[0].message.content or ""
    try:
        matched = validator.is_valid(json.loads(text))
    except json.JSONDecodeError:
        matched = False
    if not matched:
        return False, praise, f"the schema is right, but the guided reply {text!r} does not match it: is this server guided?"
    return True, f"{praise}, and the model's guided reply {text} matches it.", ""


SOLUTIONS = {"nim_fields": "nim_fields", "verdict_schema": "verdict_schema"}
_CITY_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
                "required": ["city", "country"], "additionalProperties": False}
_VERDICT = {"verdict": {"enum": ["yes", "no"]}}
WRONG = {
    "nim_fields": [
        {"nvext": {"guided_json": _CITY_SCHEMA}},  # not through extra_body
        {"extra_body": {"guided_json": _CITY_SCHEMA}},  # vLLM <= 0.11
        {"extra_body": {"structured_outputs": {"json": _CITY_SCHEMA}}},  # vLLM >= 0.10.2
        {"response_format": {"type": "json_schema", "json_schema": {"name": "place", "schema": _CITY_SCHEMA}}},
        {"extra_body": {"nvext": {"json_schema": _CITY_SCHEMA}}},  # a key NIM does not read
        {"extra_body": {"nvext": {"guided_json": {"type": "object"}}}},  # not city_schema
        {"temperature": 0, "extra_body": {"nvext": {"guided_json": _CITY_SCHEMA}},
         "response_format": {"type": "json_object"}},  # a second constraint beside it
        {"temprature": 0, "extra_body": {"nvext": {"guided_json": _CITY_SCHEMA}}},  # not an argument of create
        {"extra_body": {"nvext": {"guided_json": _CITY_SCHEMA}, "guided_json": _CITY_SCHEMA}},  # two dialects
        {"extra_body": {"nvext": {"guided_json": _CITY_SCHEMA, "guided_regex": ".*"}}},  # two constraints
        "nvext",
    ],
    "verdict_schema": [
        {"type": "object"},  # accepts anything
        {"type": "object", "properties": _VERDICT},  # {} passes: nothing required
        {"type": "object", "properties": _VERDICT, "required": ["verdict"]},  # extra keys pass
        {"type": "object", "properties": {"verdict": {"type": "string"}}, "required": ["verdict"],
         "additionalProperties": False},  # any string passes
        {"type": "object", "properties": {"verdict": {"enum": ["yes", "no", "maybe"]}}, "required": ["verdict"],
         "additionalProperties": False},
        {"enum": ["yes", "no"]},  # a bare string, not an object
        {"type": "objekt"},  # not a JSON schema
    ],
}

# Other correct spellings the prompt allows: the check must accept each.
RIGHT = {"nim_fields": [{"temperature": 0, "extra_body": {"nvext": {"guided_json": _CITY_SCHEMA}}},
                        # other body fields NIM reads, beside its guided JSON
                        {"extra_body": {"nvext": {"guided_json": _CITY_SCHEMA}, "top_k": 40}},
                        {"extra_body": {"nvext": {"guided_json": _CITY_SCHEMA, "repetition_penalty": 1.0}}},
                        {"temperature": 0, "max_tokens": 40, "seed": 0,
                         "extra_body": {"nvext": {"guided_json": json.dumps(_CITY_SCHEMA)}}}]}
