"""The harness: the model proposes, the harness disposes.

A parsed reply becomes one typed intent (final answer, tool request, clarification, plan update, abort);
turning raw output into such typed intents is Layer 2, structured output, and the harness is what
decides above it. A reply that expresses more than one intent, or a step with keys beside note, thought
and tool_call, is refused: the harness never guesses. A tool request runs only after every check passes,
in this order: the tool is declared, required arguments are present, types and values are valid, policy
allows it, the caller's role may use it, and the budgets hold. Then its side effects, as the app itself
describes them, are weighed: one that cannot be undone runs only once, and only if the user, asked by
the harness, approves it. Every rejection is a typed `Decision` whose text goes back to the model as a
`<tool_output>`.

Permission comes from the user and nowhere else: no text the model writes (a plan, a note, a thought, an
answer) and no text on a screen can grant it, because the harness never reads them for that.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from helpers.contract import is_fallback
from helpers.instruction import typing_asked_for
from helpers.loop import execute, tool_output_message
from helpers.steps import TOOL_MODELS, IntentKind, Step, model_errors
from helpers.world.effects import Effect, Ledger
from helpers.world.screen import CampusStore

# The keys of a step; the answer contract (which has a `status`) has its keys checked by the ladder.
STEP_KEYS: tuple[str, ...] = tuple(Step.model_fields)
INTENTS: dict[str, IntentKind] = {name: model.intent for name, model in TOOL_MODELS.items()}
ACTIONS: tuple[str, ...] = tuple(name for name, kind in INTENTS.items() if kind == "tool_request")
SPECIAL_TOOLS: tuple[str, ...] = tuple(name for name, kind in INTENTS.items() if kind != "tool_request")
ROLES: dict[str, frozenset[str]] = {"shopper": frozenset(ACTIONS),
                                    "viewer": frozenset(ACTIONS) - {"write"}}  # a viewer looks, never types
REFUSAL = re.compile(r"^\s*$|\b(i can(no|')t|i am unable|i'm unable|i won't|i will not|sorry)\b", re.IGNORECASE)
PLAN_NOTED = "plan noted; a plan grants no permission"
MAX_TYPED_CHARACTERS = 40  # tighter than the schema (60): policy is the harness's, not the format's
DENY_LIST: list[tuple[str, str, re.Pattern]] = [
    ("write", "content", re.compile(r"(?i)drop\s+table|rm\s+-rf|<script")),
]


class User(Protocol):
    """A person (or a stand-in for one) outside the model: the only source of approvals and of answers."""

    def approve(self, effect: Effect) -> bool: ...

    def reply(self, question: str) -> str: ...


class ConfirmedGoal(Protocol):
    """What the user confirmed they asked for (notebook 06 builds one): what may be typed where, and which
    irreversible effects were asked for at all."""

    def describe(self) -> str: ...

    def typing_allowed(self, text: str, box: str) -> tuple[bool, str]: ...

    def effect_allowed(self, effect: Effect) -> tuple[bool, str]: ...


class HarnessBreach(AssertionError):
    """An irreversible effect ran that the user had not approved: a bug in the harness or the app, never a model's
    doing; the run stops here."""


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
    effects: list[Effect] = field(default_factory=list)
    asked: set[tuple] = field(default_factory=set)  # keys of the effects the user asked for

    def tool_output(self) -> str:
        verdict = "allowed" if self.allowed else f"rejected ({self.cause})"
        return f'<tool_output tool="harness">\n{verdict}: {self.message}\n</tool_output>'


@dataclass
class Context:
    """What the checks need beyond the intent: who asks, what the app says an action would change, the user
    who may approve it, what the user asked for (the instruction, or the goal they confirmed, which then decides),
    the ledger of side effects, the budgets."""

    role: str = "shopper"
    effects_of: Callable[[str, dict], list[Effect]] | None = None
    user: User | None = None
    instruction: str | None = None
    goal: ConfirmedGoal | None = None
    ledger: Ledger = field(default_factory=Ledger)
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
        intents.append(Intent(INTENTS.get(name, "tool_request"), name, args))
    if is_fallback(data):  # the ladder's fallback is a controlled error, never a question for the user
        return [*intents, Intent("final_answer", "fallback", {"content": data["answer"], "cause": data["missing"][0]})]
    for key in ("answer", "final_answer"):
        if isinstance(data.get(key), str):
            # The answer contract declares its intent in `status`: needs_clarification is a question back.
            kind = "clarification" if data.get("status") == "needs_clarification" else "final_answer"
            intents.append(Intent(kind, "answer", {"content": data[key]}))
    return intents


def unexpected_keys(data: dict) -> list[str]:
    """The top-level keys a step may not have (a step holds note, thought and tool_call, nothing else)."""
    return [] if "status" in data else [key for key in data if key not in STEP_KEYS]


def decide(data: Any, ctx: Context) -> Decision:
    """Whether the harness acts on this parsed reply, and if not, the typed reason.

    A side effect that cannot be undone is put to `ctx.user`, described by the app (`ctx.effects_of`), not
    by the model. Nothing else in the reply is read for permission.
    """
    intents = read_intents(data)
    if not intents:
        return Decision(False, "malformed_structure", "no intent found: send one object with a tool_call")
    if len(intents) > 1:  # never guess which one was meant, and never let a side effect ride along
        named = ", ".join(f"{i.kind}({i.tool})" for i in intents)
        return Decision(False, "ambiguous_intent", f"one reply, {len(intents)} intents: {named}; send one "
                        "tool_call and nothing beside it")
    intent = intents[0]
    if extra := unexpected_keys(data):
        return Decision(False, "malformed_structure", f"unexpected key: {', '.join(extra)}; a step holds "
                        f"{', '.join(STEP_KEYS)} and nothing else", intent)
    if _silent_refusal(intent, data):
        return Decision(False, "silent_refusal", "an empty or refusing answer is not a result: call abort(reason) "
                        "to stop, or ask_user(question) if something is unclear", intent)
    if intent.tool == "fallback":
        return Decision(True, None, f"fallback delivered: {intent.args['cause']}", intent)
    if intent.kind != "tool_request":
        granted = "; it grants no permission" if intent.kind == "plan_update" else ""
        return Decision(True, None, f"{intent.kind} accepted{granted}", intent)
    effects = ctx.effects_of(intent.tool, intent.args) if ctx.effects_of and _declared_and_valid(intent) else []
    problem = check_tool_request(intent, ctx, effects) or weigh_side_effects(effects, ctx)
    if problem:
        for effect in effects:
            ctx.ledger.blocked(effect, problem[0])
        return Decision(False, problem[0], problem[1], intent, effects)
    asked = {e.key for e in effects if e.irreversible or ctx.instruction is not None or ctx.goal is not None}
    return Decision(True, None, f"{intent.tool} may run", intent, effects, asked)


def _declared_and_valid(intent: Intent) -> bool:
    model = TOOL_MODELS.get(intent.tool)
    return model is not None and not model_errors(model, {"tool_name": intent.tool, **intent.args})


def _silent_refusal(intent: Intent, data: dict) -> bool:
    """An empty or refusing final answer; the answer contract's status not_found is a refusal said out loud."""
    content = str(intent.args.get("content", ""))
    if intent.kind != "final_answer" or not REFUSAL.search(content):
        return False
    return not (content.strip() and data.get("status") == "not_found")


def check_tool_request(intent: Intent, ctx: Context, effects: list[Effect] = ()) -> tuple[str, str] | None:
    """The checks before any side effect, in order; the first failure as (cause, message), else None."""
    model = TOOL_MODELS.get(intent.tool) if intent.tool in ACTIONS else None
    if model is None:
        return "unknown_tool", (f"tool {intent.tool!r} is not declared; declared tools: {', '.join(ACTIONS)}; "
                                f"to finish, ask or stop: {', '.join(SPECIAL_TOOLS)}")
    required = [n for n, f in model.model_fields.items() if f.is_required() and n != "tool_name"]
    if missing := [n for n in required if n not in intent.args]:
        return "missing_argument", f"{intent.tool} needs {', '.join(missing)}"
    if errors := model_errors(model, {"tool_name": intent.tool, **intent.args}):
        return "invalid_argument", "; ".join(errors)
    if violation := policy_violation(intent):
        return "policy_violation", violation
    for effect in effects:
        if effect.action != "type_text":
            continue
        if ctx.goal is not None:
            asked, why = ctx.goal.typing_allowed(effect.text, effect.field)
        elif ctx.instruction is not None:
            asked, why = typing_asked_for(ctx.instruction, effect.text, effect.field)
        else:
            asked, why = True, ""
        if not asked:
            return "not_asked", why
    if intent.tool not in ROLES.get(ctx.role, frozenset()):
        return "permission_denied", f"the {ctx.role} role may not use {intent.tool}"
    if ctx.steps_used >= ctx.max_steps:
        return "budget_exhausted", f"the step budget of {ctx.max_steps} is used up"
    cost = ctx.tokens_used / 1000 * ctx.usd_per_1k_tokens
    if ctx.tokens_used > ctx.max_tokens or cost > ctx.max_cost_usd:
        return "budget_exhausted", f"{ctx.tokens_used} tokens (${cost:.4f}) exceed the budget"
    return None


def policy_violation(intent: Intent) -> str | None:
    args = intent.args
    for tool, argument, pattern in DENY_LIST:
        if intent.tool == tool and pattern.search(str(args.get(argument, ""))):
            return f"{tool} with this {argument} is on the deny-list"
    if intent.tool == "write" and len(args["content"]) > MAX_TYPED_CHARACTERS:
        return f"typing {len(args['content'])} characters; the limit is {MAX_TYPED_CHARACTERS}"
    return None


def weigh_side_effects(effects: list[Effect], ctx: Context) -> tuple[str, str] | None:
    """An effect that cannot be undone runs once per ledger, only when the confirmed goal (if any) asks for it, and
    only when the user, asked now, approves."""
    for effect in effects:
        if not effect.irreversible:
            continue
        if ctx.ledger.executed(effect.key):
            return "duplicate_side_effect", f"already done, not repeated: {effect.describe()}"
        if ctx.goal is not None:
            asked, why = ctx.goal.effect_allowed(effect)
            if not asked:
                return "not_asked", f"{why}; refused without asking"
        if ctx.user is None:
            return "not_approved", f"{effect.describe()} cannot be undone, and there is no user to approve it"
        if not ctx.user.approve(effect):
            return "not_approved", f"the user did not approve: {effect.describe()}"
    return None


class Tracer:
    """One JSONL line per turn: raw output and parsed intent kept apart, the ladder, the decision, latency, usage."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, turn: int, raw: str, ladder: Any, decision: Decision, seconds: float,
              usage: dict | None, side_effects: list[dict] | None = None) -> None:
        line = {"turn": turn, "raw": raw, "intent": asdict(decision.intent) if decision.intent else None,
                "validation": {"parse_ok": ladder.parse_ok, "errors": ladder.errors},
                "repair": {"attempted": ladder.repair_attempted, "raw": ladder.repair_raw,
                           "succeeded": ladder.repair_succeeded},
                "fallback": ladder.cause if ladder.fallback_used else None,
                "decision": {"allowed": decision.allowed, "cause": decision.cause, "message": decision.message},
                "side_effects": side_effects or [], "seconds": round(seconds, 3), "usage": usage}
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



def record_effects(app: CampusStore, since: int, ctx: Context, asked: Callable[[Any], bool]) -> None:
    for effect in app.effects[since:]:
        ctx.ledger.ran(effect, asked(effect))


def check_what_ran(executed: list[Effect], decision: Decision) -> None:
    """Every irreversible effect that ran was approved: what the app did is a subset of what the user allowed. The
    app predicts (`effects_of`) and records (`effects`) an effect with the same function, so this holds unless one
    of them is wrong, and then nothing else may run."""
    if unapproved := [e.describe() for e in executed if e.irreversible and e.key not in decision.asked]:
        raise HarnessBreach(f"ran without approval: {'; '.join(unapproved)}")


def governed_turn(data: dict, app: CampusStore, ctx: Context, user: User) -> tuple[dict, Decision, str]:
    """Decide, then dispatch or refuse: the model's step never reaches the app but through the harness.

    Returns the step, the harness's decision, and the text that goes back to the model ("" when the step ends the
    run: an answer or an abort). Every side effect the app reports is entered in `ctx.ledger`, asked for or not.
    """
    step = Step.model_validate(data)
    decision = decide(data, ctx)
    if not decision.allowed:
        return step.model_dump(), decision, decision.tool_output()
    kind = decision.intent.kind
    if kind == "tool_request":
        since = len(app.effects)
        result = execute(step, app)
        record_effects(app, since, ctx, lambda e: e.key in decision.asked)
        check_what_ran(app.effects[since:], decision)
        return step.model_dump(), decision, tool_output_message(step.tool_call.tool_name, result)["content"]
    if kind == "clarification":
        return step.model_dump(), decision, tool_output_message("ask_user", user.reply(step.tool_call.question))["content"]
    if kind == "plan_update":
        return step.model_dump(), decision, tool_output_message("update_plan", PLAN_NOTED)["content"]
    return step.model_dump(), decision, ""
