"""Turn a request's constraint into an llguidance grammar, or a 400 that names the problem.

llguidance reports JSON Schema keywords it cannot enforce (for example `uniqueItems`)
when the grammar is built. That is the moment to refuse the request: silently
guiding with a weaker grammar would hand the client output it never asked for.

Inside a string the mask is the expensive part of a guided token: nearly every token of the
vocabulary may come next, and llguidance walks them all, unless its slicer can allow a whole
precomputed slice of the vocabulary at once. That needs the string's lexer to accept every string
of the slice, which it cannot tell when a `pattern` is intersected with `maxLength` (about 15 times
slower a token; docs/results.md). So the server writes the length into the pattern, which is the same
language, and gives the tokenizer slices for the plain-text alphabet the workshop's schemas use.

Compiling runs before the request waits for the model, so what one request may ask of the compiler is
bounded: the constraint's depth, size and enums are checked before anything walks it, and llguidance
builds the grammar under explicit limits. Each refusal is a 400 that names the limit.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any

from llguidance import LLMatcher, LLParserLimits, LLTokenizer

from helpers.runtime.dialects import Constraint
from helpers.runtime.schema_tree import nodes
from helpers.server.protocol import RequestError

# Compact separators keep a tiny model on short, natural tokens (", " and ": "); a
# schema can still ask for other whitespace through its own "x-guidance" options.
JSON_DEFAULTS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}

# The workshop's largest schema (a Holo3 step) nests 7 levels of JSON deep and is 5,700 characters long; OpenAI's
# structured outputs allow 10 levels of nested objects (about 20 of JSON) and 1,000 enum values in a schema.
MAX_SCHEMA_DEPTH = 32  # nested JSON objects and arrays
MAX_SCHEMA_CHARS = 32_768  # the constraint's JSON text
MAX_ENUM_VALUES = 1_000  # in one `enum`, or choices in a choice constraint
# llguidance's limits: the first three bound compiling (its defaults are 1,000,000, 500,000 and 250,000, each lexer
# state taking 1-2 kB), the last two each token's mask (its defaults). The workshop's schemas need under a hundredth
# of each. The slowest schema found within these limits compiled in 1.3 s on the development machine.
GRAMMAR_LIMITS = LLParserLimits(initial_lexer_fuel=200_000, max_grammar_size=100_000, max_lexer_states=50_000,
                                step_lexer_fuel=200_000, step_max_items=50_000)
# How llguidance words an error that a limit, not the schema's meaning, caused.
_LIMIT_WORDS = re.compile(r"fuel|too big|too large|too many")

# A pattern that is one character class repeated, anchored at both ends: `^[...]*$`.
_CLASS_REPEATED = re.compile(r"\^(\[(?:\\.|[^\]\\])+\])\*\$")
# Plain text as schemas that bound free text ask for it: printable ASCII that a JSON string holds unescaped (no
# quote, no backslash), one byte and at most one token a character. The server slices the vocabulary by it; a
# schema whose strings use this class (the workshop's PLAIN_TEXT does) gets the fast masks.
PLAIN_CLASS = r"[ !#-\[\]-~]"
TOKEN_SLICES: list[str] = LLTokenizer.general_slices() + [f"{PLAIN_CLASS}{{1,10}}", f"{PLAIN_CLASS}{{1,30}}",
                                                          f"{PLAIN_CLASS}+"]


def length_in_pattern(schema: Any) -> Any:
    """`schema` with each `^[...]*$` pattern that has a minLength or maxLength rewritten as `^[...]{min,max}$`.

    Both accept exactly the same strings; only the second lets llguidance's slicer work.
    """
    rewritten = copy.deepcopy(schema)
    for node in nodes(rewritten):
        if node.kind == "schema":
            _length_into_pattern(node.value)
    return rewritten


def _length_into_pattern(node: dict) -> None:
    pattern = node.get("pattern")
    repeated = _CLASS_REPEATED.fullmatch(pattern) if isinstance(pattern, str) else None
    lowest, highest = node.get("minLength", 0), node.get("maxLength", "")
    counts = all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (lowest, highest or 0))
    if repeated and ("minLength" in node or "maxLength" in node) and counts and (highest == "" or lowest <= highest):
        node.pop("minLength", None)
        node.pop("maxLength", None)
        node["pattern"] = f"^{repeated.group(1)}{{{lowest},{highest}}}$"


def grammar_text(constraint: Constraint) -> str:
    """The llguidance grammar (as text) for one constraint."""
    if constraint.kind == "json_schema":
        return LLMatcher.grammar_from_json_schema(length_in_pattern(constraint.value), defaults=JSON_DEFAULTS)
    if constraint.kind == "json_object":
        return LLMatcher.grammar_from_json_schema({"type": "object"}, defaults=JSON_DEFAULTS)
    if constraint.kind == "choice":
        alternatives = " | ".join(json.dumps(choice) for choice in constraint.value)
        return LLMatcher.grammar_from_lark(f"start: {alternatives}")
    return LLMatcher.grammar_from_regex(constraint.value)


def check_limits(constraint: Constraint) -> None:
    """Refuse a constraint deeper, larger or with longer enums than this server compiles, before any walk of it
    recurses: a deep enough schema would otherwise end in a RecursionError, a 500."""
    field, value = constraint.field, constraint.value
    too_large = RequestError(f"{field} is longer than {MAX_SCHEMA_CHARS} characters of JSON, the most this server "
                             "compiles", field, "schema_too_large")
    if constraint.kind == "choice" and len(value) > MAX_ENUM_VALUES:
        raise RequestError(f"{field} offers {len(value)} choices; this server takes at most {MAX_ENUM_VALUES}",
                           field, "enum_too_large")
    values = 1
    for node in nodes(value):
        # A level of JSON for the node, and one more for what it holds (a string counts as a level).
        if len(node.path) + (2 if node.value else 1) > MAX_SCHEMA_DEPTH:
            raise RequestError(f"{field} nests deeper than {MAX_SCHEMA_DEPTH} levels of JSON objects and arrays, "
                               "the most this server compiles", field, "schema_too_deep")
        values += len(node.value)
        if values > MAX_SCHEMA_CHARS:  # every value takes a character of JSON text at least
            raise too_large
        enum = node.value.get("enum") if node.kind == "schema" else None
        if isinstance(enum, list) and len(enum) > MAX_ENUM_VALUES:
            raise RequestError(f"{field}: an enum of {len(enum)} values; this server takes at most {MAX_ENUM_VALUES}",
                               field, "enum_too_large")
    if len(json.dumps(value)) > MAX_SCHEMA_CHARS:
        raise too_large


def compile_matcher(constraint: Constraint, tokenizer: LLTokenizer) -> LLMatcher:
    """A matcher that enforces `constraint` in full, or a `RequestError` that says why it cannot."""
    check_limits(constraint)
    try:
        grammar = grammar_text(constraint)
    except ValueError as exc:
        raise RequestError(f"{constraint.field}: {exc}", constraint.field, "invalid_schema") from exc
    matcher = LLMatcher(tokenizer, grammar, log_level=0, limits=GRAMMAR_LIMITS)
    if matcher.is_error():
        error = matcher.get_error().strip()
        if _LIMIT_WORDS.search(error):
            limits = GRAMMAR_LIMITS
            raise RequestError(f"{constraint.field} is too complex for this server's grammar limits (lexer fuel "
                               f"{limits.initial_lexer_fuel}, grammar size {limits.max_grammar_size}, lexer states "
                               f"{limits.max_lexer_states}): {error}", constraint.field, "schema_too_complex")
        raise RequestError(f"{constraint.field} cannot be enforced: {error}", constraint.field, "unsupported_schema")
    return matcher
