"""The campus assistant of notebook 01: its knowledge base, its prompt, the prompt-only request, its eval questions.

The assistant answers questions about a campus from the facts a search would return, as one JSON object
that keeps the answer contract (`helpers.contract`). Notebook 04 sends it through the repair ladder and
the harness (`helpers.pipeline`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from helpers.runtime.paths import DATA
from helpers.runtime.replies import Reply

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
    return Reply.of(conn.client.chat.completions.create(
        model=conn.model, messages=messages_for(question, conn.profile.system_prompt), temperature=0,
        max_tokens=max_tokens, **conn.profile.prompt_only()))


def load_evals(path: Path | str = DATA / "evals.jsonl") -> list[dict[str, Any]]:
    """The eval questions: id, question, facts shown, expected status, category, missing and sources."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
