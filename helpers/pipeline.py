"""The campus assistant end to end: ask prompt-only, climb the repair ladder, let the harness decide.

Notebook 04's core climbs the ladder on one live reply and hands what it delivered to `settle`; its eval test runs
the whole of it with `answer_question`. Whatever the model writes, both return an object that keeps the answer
contract: the model's own when it is valid (or repaired) and the harness accepts it, else a fallback that names the
cause in `missing`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from helpers.assistant import ASK_TOKENS, ask
from helpers.contract import format_error, validate_answer
from helpers.harness import Context, Decision, Tracer, decide
from helpers.ladder import ANSWER_CONTRACT, LadderRecord, climb
from helpers.runtime.replies import Reply, total_usage


@dataclass
class Outcome:
    """One question's trip through the pipeline: raw reply, ladder, harness decision, delivered object."""

    raw: str
    ladder: LadderRecord
    decision: Decision
    data: dict
    seconds: float
    usage: dict | None


def settle(reply: Reply, ladder: LadderRecord, ctx: Context | None = None, tracer: Tracer | None = None,
           turn: int = 0, asked_seconds: float = 0.0) -> Outcome:
    """The harness decides on what the ladder delivered for `reply` (`ladder.data`, whatever rung it came from): the
    contract-valid object to deliver, and one trace line if asked (its time and usage count the ladder's too)."""
    started = time.perf_counter()
    decision = decide(ladder.data, ctx or Context())
    # A rejected answer is a controlled error: the fallback, naming the harness's cause.
    data = ladder.data if decision.allowed else format_error(decision.cause or "rejected")
    outcome = Outcome(reply.text, ladder, decision, data,
                      asked_seconds + ladder.seconds + time.perf_counter() - started,
                      total_usage([reply.usage, *ladder.usage]))
    if tracer is not None:
        tracer.write(turn, outcome.raw, ladder, decision, outcome.seconds, outcome.usage)
    return outcome


def answer_question(conn, question: dict, repair: Callable[[list[dict]], Reply] | None = None,
                    specific: bool = True, tracer: Tracer | None = None, turn: int = 0,
                    max_tokens: int = ASK_TOKENS) -> Outcome:
    """Ask, climb, decide (and trace): one question through the whole pipeline."""
    started = time.perf_counter()
    reply = ask(conn, question, max_tokens)
    asked = time.perf_counter() - started
    return settle(reply, climb(reply.text, ANSWER_CONTRACT, repair, specific=specific), tracer=tracer, turn=turn,
                  asked_seconds=asked)


def missing_matches(expected: list[str], actual: Any) -> bool:
    """Empty when nothing is missing; else every expected keyword appears in some `missing` entry."""
    if not isinstance(actual, list):
        return False
    if not expected:
        return actual == []
    said = " ".join(str(entry) for entry in actual).lower()
    return all(keyword.lower() in said for keyword in expected)


def grade(expected: dict, data: dict) -> dict[str, bool]:
    """Pass or fail per graded field, plus whether the object keeps the contract at all."""
    return {"status": data.get("status") == expected["status"],
            "category": data.get("category") == expected["category"],
            "missing": missing_matches(expected["missing"], data.get("missing")),
            "contract": validate_answer(data) == []}
