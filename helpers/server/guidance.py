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
"""
from __future__ import annotations

import json
import re
from typing import Any

from llguidance import LLMatcher, LLTokenizer

from helpers.contract import PLAIN_TEXT
from helpers.runtime.dialects import Constraint
from helpers.server.protocol import RequestError

# Compact separators keep a tiny model on short, natural tokens (", " and ": "); a
# schema can still ask for other whitespace through its own "x-guidance" options.
JSON_DEFAULTS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}

# A pattern that is one character class repeated, anchored at both ends: `^[...]*$`.
_CLASS_REPEATED = re.compile(r"\^(\[(?:\\.|[^\]\\])+\])\*\$")
# Keywords whose values are data, not subschemas: a `const` object may have a "pattern" key of its own.
_DATA_KEYWORDS = frozenset({"const", "enum", "default", "examples"})
_PLAIN_CLASS = _CLASS_REPEATED.fullmatch(PLAIN_TEXT).group(1)
TOKEN_SLICES: list[str] = LLTokenizer.general_slices() + [f"{_PLAIN_CLASS}{{1,10}}", f"{_PLAIN_CLASS}{{1,30}}",
                                                          f"{_PLAIN_CLASS}+"]


def length_in_pattern(schema: Any) -> Any:
    """`schema` with each `^[...]*$` pattern that has a minLength or maxLength rewritten as `^[...]{min,max}$`.

    Both accept exactly the same strings; only the second lets llguidance's slicer work.
    """
    if isinstance(schema, list):
        return [length_in_pattern(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    rewritten = {key: value if key in _DATA_KEYWORDS else length_in_pattern(value) for key, value in schema.items()}
    pattern = rewritten.get("pattern")
    repeated = _CLASS_REPEATED.fullmatch(pattern) if isinstance(pattern, str) else None
    lowest, highest = rewritten.get("minLength", 0), rewritten.get("maxLength", "")
    counts = all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in (lowest, highest or 0))
    if repeated and ("minLength" in rewritten or "maxLength" in rewritten) and counts \
            and (highest == "" or lowest <= highest):
        rewritten.pop("minLength", None)
        rewritten.pop("maxLength", None)
        rewritten["pattern"] = f"^{repeated.group(1)}{{{lowest},{highest}}}$"
    return rewritten


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


def compile_matcher(constraint: Constraint, tokenizer: LLTokenizer) -> LLMatcher:
    """A matcher that enforces `constraint` in full, or a `RequestError` that says why it cannot."""
    try:
        grammar = grammar_text(constraint)
    except ValueError as exc:
        raise RequestError(f"{constraint.field}: {exc}", constraint.field, "invalid_schema") from exc
    matcher = LLMatcher(tokenizer, grammar, log_level=0)
    if matcher.is_error():
        raise RequestError(f"{constraint.field} cannot be enforced: {matcher.get_error().strip()}",
                           constraint.field, "unsupported_schema")
    return matcher
