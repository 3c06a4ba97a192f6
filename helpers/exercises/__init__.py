"""The exercises' checks. Each notebook's "your turn" check cell calls a checker from `nbNN` here and prints
its verdict with `check`:

    from helpers.exercises import check, nb01
    check(*nb01.tricky_reply(tricky_reply))

A checker takes the reader's answer and returns (solved, praise, hint). Each `nbNN` module also lists, in
`SOLUTIONS`, which name of `notebooks/solutions/NN.py` answers which checker, and, in `WRONG`, answers that
must not pass (the stub `None` never does). `tests/test_exercise_checks.py` runs every checker on the worked
solution, which must pass, and on every wrong answer, which must not: a check a wrong answer passes is a bug.
"""
from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

Verdict = tuple[bool, str, str]


def schema_validator(schema: Any) -> Draft202012Validator | None:
    """A validator for a reader's `schema`, or None when it is not a JSON schema at all."""
    if not isinstance(schema, dict):
        return None
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError:
        return None
    return Draft202012Validator(schema)


def check(solved: bool, praise: str, hint: str) -> None:
    """Print whether an exercise is solved, with what to try next when it is not."""
    print(f"✅ Solved: {praise}" if solved else f"❌ Not yet: {hint}")
