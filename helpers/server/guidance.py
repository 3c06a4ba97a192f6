"""Turn a request's constraint into an llguidance grammar, or a 400 that names the problem.

llguidance reports JSON Schema keywords it cannot enforce (for example `uniqueItems`)
when the grammar is built. That is the moment to refuse the request: silently
guiding with a weaker grammar would hand the client output it never asked for.
"""
from __future__ import annotations

import json

from llguidance import LLMatcher, LLTokenizer

from helpers.dialects import Constraint
from helpers.server.protocol import RequestError

# Compact separators keep a tiny model on short, natural tokens (", " and ": "); a
# schema can still ask for other whitespace through its own "x-guidance" options.
JSON_DEFAULTS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def grammar_text(constraint: Constraint) -> str:
    """The llguidance grammar (as text) for one constraint."""
    if constraint.kind == "json_schema":
        return LLMatcher.grammar_from_json_schema(constraint.value, defaults=JSON_DEFAULTS)
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
