"""The campus assistant end to end: ask prompt-only, climb the repair ladder, let the harness decide.

Notebook 04 builds this pipeline in cells; its eval test and later notebooks import it from here.
Whatever the model writes, `settle` and `answer_question` return an object that keeps the answer
contract: the model's own when it is valid (or repaired) and the harness accepts it, else a fallback
that names the cause in `missing`.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from helpers.contract import format_error, validate_answer
from helpers.harness import Context, Decision, Tracer, decide
from helpers.ladder import ANSWER_CONTRACT, LadderRecord, Reply, climb
from helpers.paths import DATA

# A valid answer is under 100 tokens; the cap stops a reply that loops (a 135M model often does).
ASK_TOKENS = 160
KNOWLEDGE_BASE = json.loads((DATA / "knowledge_base.json").read_text(encoding="utf-8"))
ENTRIES = {entry["id"]: entry for entry in KNOWLEDGE_BASE["entries"]}

SYSTEM = f"""You answer questions about {KNOWLEDGE_BASE['campus']} using only the facts given.
Reply with one JSON object with exactly these keys:
status: answered, not_found or needs_clarification
answer: one sentence
category: campus_event, campus_hours, campus_resource, comparison or refusal
items: up to 2 short facts, each an object with name and value
missing: list of what the facts do not say
sources: list of fact ids"""

# One worked example turn: a small model imitates far better than it follows instructions (notebook 01).
EXAMPLE_QUESTION = {"question": "When does the gym open on Monday?", "facts": ["hours-gym"]}
EXAMPLE_ANSWER = {"status": "answered", "answer": "The gym opens at 06:30 on Monday.", "category": "campus_hours",
                  "items": [{"name": "Pike Sports Centre gym", "value": "Mon-Fri 06:30-21:00"}],
                  "missing": [], "sources": ["hours-gym"]}


def fact_line(entry: dict) -> str:
    """One knowledge-base entry as one short line: fewer tokens for the model to read."""
    fields = []
    for key, value in entry.items():
        if key not in ("id", "category"):
            if isinstance(value, dict):
                value = ", ".join(f"{day} {hours}" for day, hours in value.items())
            fields.append(f"{key}: {value}")
    return f"[{entry['id']}] " + "; ".join(fields)


def user_message(question: dict) -> str:
    """The facts a search would return for the question (its `facts` ids), then the question."""
    facts = "\n".join(fact_line(ENTRIES[i]) for i in question.get("facts", [])) or "(none)"
    return f"Facts:\n{facts}\n\nQuestion: {question['question']}\nReply with the JSON object only."


def messages_for(question: dict, system_prompt: Callable[[str], str] = lambda text: text) -> list[dict]:
    """System prompt, the example turn, then the question: short, so a CPU reads it in about a second."""
    return [{"role": "system", "content": system_prompt(SYSTEM)},
            {"role": "user", "content": user_message(EXAMPLE_QUESTION)},
            {"role": "assistant", "content": json.dumps(EXAMPLE_ANSWER)},
            {"role": "user", "content": user_message(question)}]


def ask(conn, question: dict, max_tokens: int = ASK_TOKENS) -> Reply:
    """One prompt-only request at temperature 0: the contract lives in the prompt alone."""
    reply = conn.client.chat.completions.create(
        model=conn.model, messages=messages_for(question, conn.profile.system_prompt), temperature=0,
        max_tokens=max_tokens, **conn.profile.prompt_only())
    return Reply(reply.choices[0].message.content or "", reply.usage.model_dump() if reply.usage else None)


@dataclass
class Outcome:
    """One question's trip through the pipeline: raw reply, ladder, harness decision, delivered object."""

    raw: str
    ladder: LadderRecord
    decision: Decision
    data: dict
    seconds: float
    usage: dict | None


def settle(reply: Reply, repair: Callable[[list[dict]], Reply] | None = None, specific: bool = True,
           ctx: Context | None = None, tracer: Tracer | None = None, turn: int = 0,
           asked_seconds: float = 0.0) -> Outcome:
    """Ladder then harness: the contract-valid object to deliver, whatever `reply` holds; traced if asked."""
    started = time.perf_counter()
    ladder = climb(reply.text, ANSWER_CONTRACT, repair, specific=specific)
    decision = decide(ladder.data, ctx or Context())
    # A rejected answer is a controlled error: the fallback, naming the harness's cause.
    data = ladder.data if decision.allowed else format_error(decision.cause or "rejected")
    outcome = Outcome(reply.text, ladder, decision, data, asked_seconds + time.perf_counter() - started,
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
    return settle(reply, repair, specific, tracer=tracer, turn=turn, asked_seconds=time.perf_counter() - started)


def total_usage(usages: list[dict | None]) -> dict | None:
    """Token counts summed over the turn's calls; None when any call reported none (never fake zeros)."""
    if any(u is None for u in usages):
        return None
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {k: sum(u.get(k) or 0 for u in usages) for k in keys}


def load_evals(path: Path | str = DATA / "evals.jsonl") -> list[dict[str, Any]]:
    """The eval questions: id, question, facts shown, expected status, category, missing and sources."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


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
