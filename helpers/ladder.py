"""The repair ladder: parse -> validate -> repair once with the specific errors -> deterministic fallback.

One implementation for every contract (the final answer, the Holo3 step): a `Contract`
says how to validate and what the fallback is. Whatever the model wrote, `climb`
returns an object that is valid under the contract, and a record of every rung.

The repair prompt defaults to `plain`, the NIM workshop's short one, because it measured no worse than the
schema-embedding one and costs less (notebook 04 measures both; docs/results.md keeps the full run).
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from helpers.contract import ANSWER_JSON_SCHEMA, ANSWER_TOKENS, format_error, parse_json_object, validate_answer
from helpers.runtime.replies import Reply
from helpers.runtime.strict_subset import left_out_nulls
from helpers.pydantic_contract import model_errors
from helpers.steps import STEP_SCHEMA, Step
from helpers.runtime.concealer import concealing

EMPTY_REPLY = "empty_model_response"
INVALID_AFTER_REPAIR = "valid_json"


@dataclass(frozen=True)
class Contract:
    """What a reply must be: its schema, how to check it, what stands in for it when it cannot be had, and how the
    parsed reply is read as its schema means it (where the server was sent OpenAI's strict rewrite of the schema, a
    null stands for a property left out: `left_out_nulls` reads it back, once, before anything checks it)."""

    name: str
    schema: dict
    validate: Callable[[Any], list[str]]
    fallback: Callable[[str], dict]
    read: Callable[[Any], Any] = lambda data: data


def step_fallback(cause: str) -> dict:
    """A valid step that ends the run honestly, saying why, instead of acting on output nobody could read."""
    return {"note": None, "thought": f"Fallback: no valid step ({cause}).",
            "tool_call": {"tool_name": "abort", "reason": f"I could not produce a valid action ({cause})."}}


ANSWER_CONTRACT = Contract("final answer", ANSWER_JSON_SCHEMA, validate_answer, lambda cause: format_error(cause))
STEP_CONTRACT = Contract("Holo3 step", STEP_SCHEMA, lambda data: model_errors(Step, data), step_fallback,
                         lambda data: left_out_nulls(STEP_SCHEMA, data))


@concealing
@dataclass
class LadderRecord:
    raw: str
    parse_ok: bool = False
    errors: list[str] = field(default_factory=list)
    repair_attempted: bool = False
    repair_raw: str | None = None
    repair_errors: list[str] = field(default_factory=list)
    repair_succeeded: bool = False
    fallback_used: bool = False
    cause: str | None = None
    data: dict = field(default_factory=dict)
    seconds: float = 0.0
    usage: list[dict | None] = field(default_factory=list)

    @property
    def rung(self) -> str:
        """Where the ladder stopped: valid at parse, valid after repair, or fallback."""
        return "fallback" if self.fallback_used else "repaired" if self.repair_succeeded else "valid"


def check(text: str, contract: Contract) -> tuple[dict | None, list[str]]:
    """Parse then validate; the object and [] when it holds, else None or the object and every problem."""
    try:
        data = contract.read(parse_json_object(text))
    except ValueError as exc:
        return None, [f"not a JSON object: {exc}"]
    except RecursionError:  # JSON nested deeper than the parser goes: model output, not a bug
        return None, ["not a JSON object: nested too deeply to read"]
    return data, contract.validate(data)


RepairPrompt = Literal["plain", "schema"]


def repair_messages(raw: str, errors: list[str], contract: Contract, specific: bool = True,
                    prompt: RepairPrompt = "plain") -> list[dict]:
    """The one repair request: the problems (or, vague, only that there were some) and the original reply.

    `plain` is the NIM workshop's short prompt, word for word as its text shows it (its repository's version also
    restates the required keys and enums), `errors` written as the Python list the source's f-string writes; its
    `/no_think` is the backend's to add (`model_repair` applies the profile's system prompt), since only Nemotron
    models read it. `schema` restates the contract as its JSON Schema and asks to add no fact.
    """
    if prompt == "plain":
        problems = errors if specific else ["it is not valid"]
        return [{"role": "system", "content": "You fix malformed JSON. Return ONLY a valid JSON object."},
                {"role": "user", "content": f"Problems: {problems}. Preserve all facts. Original:\n{raw}\n\n"
                                            "Return corrected JSON only."}]
    if specific:
        problems = "These problems were found:\n" + "\n".join(f"- {e}" for e in errors)
    else:
        problems = "It was not valid."
    return [
        {"role": "system", "content": f"You correct JSON so it satisfies a contract. Reply with one JSON object "
                                      f"and nothing else. The {contract.name} contract (JSON Schema):\n"
                                      f"{json.dumps(contract.schema, separators=(',', ':'))}"},
        {"role": "user", "content": f"{problems}\n\nRewrite this reply as one JSON object that satisfies the "
                                    "contract. Preserve all facts it states; add none.\n\nOriginal reply:\n"
                                    f"{raw}"},
    ]


def climb(raw: str | None, contract: Contract, repair: Callable[[list[dict]], Reply] | None = None,
          repair_budget: int = 1, specific: bool = True, prompt: RepairPrompt = "plain") -> LadderRecord:
    """Run the ladder on one model reply; whatever the model wrote, it ends with a contract-valid `data`.

    Only the repair call is guarded: a call that fails (a timeout, a server's error) is one more broken output. A
    contract whose own validator raises is the workshop's bug, not the model's, and is raised, never counted as a
    failed repair."""
    started = time.perf_counter()
    record = LadderRecord(raw=raw if isinstance(raw, str) else "")
    text = record.raw
    if not text.strip():
        return _fallback(record, contract, EMPTY_REPLY, started)
    data, record.errors = check(text, contract)
    record.parse_ok, errors = data is not None, record.errors
    for _ in range(repair_budget if repair else 0):
        if not errors:
            break
        record.repair_attempted = True
        try:
            reply = repair(repair_messages(text, errors, contract, specific, prompt))
        except Exception as exc:  # the call failed: no repair came back
            return _fallback(record, contract, f"repair_failed: {type(exc).__name__}", started)
        record.repair_raw, text = reply.text, reply.text or ""
        record.usage.append(reply.usage)
        data, errors = check(text, contract)
        record.repair_errors, record.repair_succeeded = errors, not errors
    if data is not None and (not record.errors or record.repair_succeeded):
        record.data = data
        record.seconds = time.perf_counter() - started
        return record
    return _fallback(record, contract, INVALID_AFTER_REPAIR, started)


def _fallback(record: LadderRecord, contract: Contract, cause: str, started: float) -> LadderRecord:
    record.fallback_used, record.cause, record.data = True, cause, contract.fallback(cause)
    record.seconds = time.perf_counter() - started
    return record


def model_repair(conn, max_tokens: int = ANSWER_TOKENS, schema: dict | None = None) -> Callable[[list[dict]], Reply]:
    """A repair function that asks `conn`'s model at temperature 0: prompt-only, or guided by `schema` in the
    backend's own dialect when one is given (a backend that speaks none sends it in the prompt alone). The system
    message gets the backend's own preamble (`/no_think` for a Nemotron model, which otherwise reasons until
    `max_tokens`), as every other request of the workshop does."""
    guided = conn.profile.guided(schema, name="repair") if schema is not None else {}

    def repair(messages: list[dict]) -> Reply:
        messages = [{**m, "content": conn.profile.system_prompt(m["content"])} if m["role"] == "system" else m
                    for m in messages]
        return Reply.of(conn.client.chat.completions.create(model=conn.model, messages=messages, temperature=0,
                                                            max_tokens=max_tokens, **guided))

    return repair
