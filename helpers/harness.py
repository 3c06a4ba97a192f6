"""Layer 2: the model proposes, the harness disposes.

A parsed reply becomes one typed intent (final answer, tool request, clarification,
plan update, abort). A tool request runs only after every check passes, in this order:
the tool is declared, required arguments are present, types and values are valid,
policy allows it, the caller's role may use it, and the budgets hold. Every rejection
is a typed `Decision` whose text goes back to the model as a `<tool_output>`.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.steps import ClickArgs, GoBackArgs, ScrollArgs, WriteArgs, model_errors

IntentKind = Literal["final_answer", "tool_request", "clarification", "plan_update", "abort"]
# When one reply holds several intents, the first kind in this list wins. A side effect never rides along
# with another intent: a tool request only runs when it is the reply's one and only intent.
PRIORITY: list[IntentKind] = ["abort", "clarification", "final_answer", "plan_update", "tool_request"]
SPECIAL_TOOLS: dict[str, IntentKind] = {"answer": "final_answer", "ask_user": "clarification",
                                        "update_plan": "plan_update", "abort": "abort"}
REFUSAL = re.compile(r"^\s*$|\b(i can(no|')t|i am unable|i'm unable|i won't|i will not|sorry)\b", re.IGNORECASE)
MAX_TYPED_CHARACTERS = 100
DENY_LIST: list[tuple[str, str, re.Pattern]] = [
    ("write", "content", re.compile(r"(?i)drop\s+table|rm\s+-rf|<script")),
]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class AskUserArgs(_Closed):
    """Ask the user a question when the task is ambiguous, instead of guessing."""

    tool_name: Literal["ask_user"]
    question: str = Field(max_length=200)


class UpdatePlanArgs(_Closed):
    """Record the plan, for example to confirm an irreversible step before taking it."""

    tool_name: Literal["update_plan"]
    plan: str = Field(max_length=300)


class AbortArgs(_Closed):
    """Stop, saying why, when the task cannot or must not be done."""

    tool_name: Literal["abort"]
    reason: str = Field(max_length=200)


@dataclass(frozen=True)
class ToolSpec:
    model: type[BaseModel]
    roles: frozenset[str]
    irreversible_targets: frozenset[str] = frozenset()


TOOLS: dict[str, ToolSpec] = {
    "click": ToolSpec(ClickArgs, frozenset({"shopper", "viewer"}), frozenset({"order"})),
    "write": ToolSpec(WriteArgs, frozenset({"shopper"})),
    "scroll": ToolSpec(ScrollArgs, frozenset({"shopper", "viewer"})),
    "go_back": ToolSpec(GoBackArgs, frozenset({"shopper", "viewer"})),
}


@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    tool: str
    args: dict


@dataclass
class Decision:
    allowed: bool
    cause: str | None
    message: str
    intent: Intent | None = None
    dropped: list[str] = field(default_factory=list)

    def tool_output(self) -> str:
        verdict = "allowed" if self.allowed else f"rejected ({self.cause})"
        return f'<tool_output tool="harness">\n{verdict}: {self.message}\n</tool_output>'


@dataclass
class Context:
    """What the checks need beyond the intent: who asks, the screen, what the plan confirmed, the budgets."""

    role: str = "shopper"
    element_at: Callable[[int, int], Any] | None = None
    confirmed: bool = False
    max_steps: int = 12
    max_tokens: int = 40_000
    max_cost_usd: float = 0.05
    usd_per_1k_tokens: float = 0.0005
    steps_used: int = 0
    tokens_used: int = 0


def read_intents(data: Any) -> list[Intent]:
    """Every intent a parsed reply expresses: its tool_call, plus any stray answer or extra tool calls."""
    if not isinstance(data, dict):
        return []
    calls = [data["tool_call"]] if isinstance(data.get("tool_call"), dict) else []
    calls += [c for c in data.get("tool_calls", []) if isinstance(c, dict)] if isinstance(data.get("tool_calls"),
                                                                                            list) else []
    intents = []
    for call in calls:
        name = str(call.get("tool_name", ""))
        args = {k: v for k, v in call.items() if k != "tool_name"}
        intents.append(Intent(SPECIAL_TOOLS.get(name, "tool_request"), name, args))
    for key in ("answer", "final_answer"):
        if isinstance(data.get(key), str):
            # The answer contract declares its intent in `status`: needs_clarification is a question back.
            kind = "clarification" if data.get("status") == "needs_clarification" else "final_answer"
            intents.append(Intent(kind, "answer", {"content": data[key]}))
    return intents


def choose(intents: list[Intent]) -> tuple[Intent | None, list[str]]:
    """The one intent to act on by PRIORITY, and a description of each one dropped."""
    if not intents:
        return None, []
    chosen = min(intents, key=lambda i: PRIORITY.index(i.kind))
    return chosen, [f"{i.kind}({i.tool})" for i in intents if i is not chosen]


def decide(data: Any, ctx: Context) -> Decision:
    """Whether the harness acts on this parsed reply, and if not, the typed reason."""
    intent, dropped = choose(read_intents(data))
    if intent is None:
        return Decision(False, "malformed_structure", "no intent found: send one object with a tool_call")
    if _silent_refusal(intent, data):
        return Decision(False, "silent_refusal", "an empty or refusing answer is not a result: call abort(reason) "
                        "to stop, or ask_user(question) if something is unclear", intent, dropped)
    if intent.kind == "plan_update" and "confirm" in str(intent.args.get("plan", "")).lower():
        ctx.confirmed = True
    if intent.kind != "tool_request":
        note = f"; ambiguous reply, also dropped {', '.join(dropped)}" if dropped else ""
        return Decision(True, None, f"{intent.kind} accepted{note}", intent, dropped)
    problem = check_tool_request(intent, ctx)
    return Decision(problem is None, problem[0] if problem else None,
                    problem[1] if problem else f"{intent.tool} may run", intent, dropped)


def _silent_refusal(intent: Intent, data: dict) -> bool:
    """An empty or refusing final answer; the answer contract's status not_found is a refusal said out loud."""
    content = str(intent.args.get("content", ""))
    if intent.kind != "final_answer" or not REFUSAL.search(content):
        return False
    return not (content.strip() and data.get("status") == "not_found")


def check_tool_request(intent: Intent, ctx: Context) -> tuple[str, str] | None:
    """The checks before any side effect, in order; the first failure as (cause, message), else None."""
    spec = TOOLS.get(intent.tool)
    if spec is None:
        return "unknown_tool", (f"tool {intent.tool!r} is not declared; declared tools: {', '.join(TOOLS)}; "
                                f"to finish, ask or stop: {', '.join(SPECIAL_TOOLS)}")
    required = [n for n, f in spec.model.model_fields.items() if f.is_required() and n != "tool_name"]
    if missing := [n for n in required if n not in intent.args]:
        return "missing_argument", f"{intent.tool} needs {', '.join(missing)}"
    if errors := model_errors(spec.model, {"tool_name": intent.tool, **intent.args}):
        return "invalid_argument", "; ".join(errors)
    if violation := policy_violation(intent, spec, ctx):
        return "policy_violation", violation
    if ctx.role not in spec.roles:
        return "permission_denied", f"the {ctx.role} role may not use {intent.tool}"
    if ctx.steps_used >= ctx.max_steps:
        return "budget_exhausted", f"the step budget of {ctx.max_steps} is used up"
    cost = ctx.tokens_used / 1000 * ctx.usd_per_1k_tokens
    if ctx.tokens_used > ctx.max_tokens or cost > ctx.max_cost_usd:
        return "budget_exhausted", f"{ctx.tokens_used} tokens (${cost:.4f}) exceed the budget"
    return None


def policy_violation(intent: Intent, spec: ToolSpec, ctx: Context) -> str | None:
    args = intent.args
    for tool, argument, pattern in DENY_LIST:
        if intent.tool == tool and pattern.search(str(args.get(argument, ""))):
            return f"{tool} with this {argument} is on the deny-list"
    if intent.tool == "write" and len(args["content"]) > MAX_TYPED_CHARACTERS:
        return f"typing {len(args['content'])} characters; the limit is {MAX_TYPED_CHARACTERS}"
    if intent.tool == "click" and ctx.element_at is not None:
        element = ctx.element_at(args["x"], args["y"])
        if element is not None and element.target in spec.irreversible_targets and not ctx.confirmed:
            return (f"'{element.name}' cannot be undone: first call update_plan with a plan that confirms it, "
                    "then click again")
    return None


class Tracer:
    """One JSONL line per turn: raw output and parsed intent kept apart, the ladder, the decision, latency, usage."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, turn: int, raw: str, ladder: Any, decision: Decision, seconds: float,
              usage: dict | None) -> None:
        line = {"turn": turn, "raw": raw, "intent": asdict(decision.intent) if decision.intent else None,
                "validation": {"parse_ok": ladder.parse_ok, "errors": ladder.errors},
                "repair": {"attempted": ladder.repair_attempted, "raw": ladder.repair_raw,
                           "succeeded": ladder.repair_succeeded},
                "fallback": ladder.cause if ladder.fallback_used else None,
                "decision": {"allowed": decision.allowed, "cause": decision.cause, "message": decision.message},
                "seconds": round(seconds, 3), "usage": usage}
        with self.path.open("a") as trace:
            trace.write(json.dumps(line) + "\n")


def summarize_trace(path: Path | str) -> dict:
    """Repair rate, fallback rate and rejections by cause, from a trace file."""
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    turns = len(lines) or 1
    return {"turns": len(lines),
            "repair_rate": sum(line["repair"]["attempted"] for line in lines) / turns,
            "fallback_rate": sum(line["fallback"] is not None for line in lines) / turns,
            "rejections": dict(Counter(line["decision"]["cause"] for line in lines
                                       if not line["decision"]["allowed"]))}
