"""The harness: the model proposes, the harness disposes.

A parsed reply becomes one typed intent (final answer, tool request, clarification, plan update, abort);
turning raw output into such typed intents is Layer 2, structured output, and the harness is what
decides above it. `decide` runs `CHECKS`, an ordered list of small functions of (the proposal, the context),
each returning a verdict or nothing; the first verdict wins. A reply that expresses more than one intent, or a
step with keys beside note, thought and tool_call, is refused: the harness never guesses. The checks, in the
order they run (`CHECKS`): what the reply says, `within_budget`, `has_an_intent`, `one_intent`, `step_keys_only`,
`no_silent_refusal`, `fallback_delivered`, `nothing_to_run`; then what a tool request is, `declared_tool`,
`required_arguments`, `valid_arguments`, `within_policy`, `role_allows`; then what it would change, as the app
itself describes it, `typed_as_asked`, `not_repeated`, `effect_asked_for`, `user_approves`. So an effect that cannot
be undone runs only once, only if what the user asked for includes it, and only if the user, asked by the harness
last, approves it.
Every rejection is a typed `Decision` whose text goes back to the model as a `<tool_output>`.

`governed_turn` is the one pass a proposal takes: decide, try the step on a copy of the app and refuse an
irreversible effect nobody approved (the prediction and the approval must agree), dispatch, record what ran in
the ledger, and check, as a second line, that no more ran than was approved.

Permission comes from the user and nowhere else: no text the model writes (a plan, a note, a thought, an
answer) and no text on a screen can grant it, because the harness never reads them for that.
"""
from __future__ import annotations

import copy
import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from helpers.contract import is_fallback
from helpers.loop import execute, tool_output_message
from helpers.pydantic_contract import model_errors
from helpers.steps import TOOL_MODELS, IntentKind, Step
from helpers.world.effects import Effect, Ledger
from helpers.runtime.concealer import conceal, concealing
from helpers.world.store import CampusStore

# The keys of a step; the answer contract (which has a `status`) has its keys checked by the ladder.
STEP_KEYS: tuple[str, ...] = tuple(Step.model_fields)
INTENTS: dict[str, IntentKind] = {name: model.intent for name, model in TOOL_MODELS.items()}
ACTIONS: tuple[str, ...] = tuple(name for name, kind in INTENTS.items() if kind == "tool_request")
SPECIAL_TOOLS: tuple[str, ...] = tuple(name for name, kind in INTENTS.items() if kind != "tool_request")
ROLES: dict[str, frozenset[str]] = {"shopper": frozenset(ACTIONS),
                                    "viewer": frozenset(ACTIONS) - {"write"}}  # a viewer looks, never types
# A refusal says, in the first person and first thing (after an apology or an "as an AI ..."), that the answerer
# cannot or will not answer. "Sorry" or "I cannot" further on is part of an answer ("Sorry, the gym is closed on
# Sundays.") and reaches the user.
APOLOGY = re.compile(r"^\W*(?:i['’]?m\s+|i\s+am\s+)?(?:(?:very|so|really)\s+)?sorry\b\W*(?:but\b\W*)?", re.IGNORECASE)
PERSONA = re.compile(r"^as\s+an?\s[^,.]{1,40},\s*", re.IGNORECASE)
INABILITY = re.compile(r"^i(?:['’]m|\s+am)?\s+(?:(?:really|simply|just)\s+)?(?:can(?:no|['’])t|unable|won['’]t|will\s+not"
                       r"|must\s+decline|have\s+to\s+decline)\b", re.IGNORECASE)
PLAN_NOTED = "plan noted; a plan grants no permission"
MAX_TYPED_CHARACTERS = 40  # tighter than the schema (60): policy is the harness's, not the format's
DENY_LIST: list[tuple[str, str, re.Pattern]] = [
    ("write", "content", re.compile(r"(?i)drop\s+table|rm\s+-rf|<script")),
]


class User(Protocol):
    """A person (or a stand-in for one) outside the model: the only source of approvals and of answers."""

    def approve(self, effect: Effect) -> bool: ...

    def reply(self, question: str) -> str: ...


class AskedFor(Protocol):
    """What the user asked for, as the harness consults it: what may be typed into which box, and which
    irreversible effects were asked for at all. This notebook reads it off the instruction
    (`helpers.instruction.Instruction`); whoever builds the context may hand in another."""

    def typing_allowed(self, text: str, box: str) -> tuple[bool, str]: ...

    def effect_allowed(self, effect: Effect) -> tuple[bool, str]: ...


class HarnessBreach(AssertionError):
    """An irreversible effect ran that the user had not approved: a bug in the harness or the app, never a model's
    doing; the run stops here. `turn` is the turn that breached, as `governed_turn` returns one, for the record."""

    def __init__(self, message: str, turn: tuple | None = None):
        super().__init__(message)
        self.turn = turn


@concealing
@dataclass(frozen=True)
class Intent:
    kind: IntentKind
    tool: str
    args: dict


@concealing
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
        return tool_output_message("harness", f"{verdict}: {self.message}")["content"]

    def approved(self) -> Counter:
        """How many times each irreversible effect may run under this decision: once per approved effect."""
        return Counter(e.key for e in self.effects if e.irreversible and e.key in self.asked)


@concealing
@dataclass
class Context:
    """What the checks need beyond the intent: who asks, what the app says an action would change, the user
    who may approve it, what the user asked for, the ledger of side effects, the budgets. `steps_used` counts
    the replies the harness has decided; whoever calls the model reports each call's tokens with `charge`.

    The prices are illustrative, per 1,000 tokens, a reply's tokens dearer than the prompt's (set your backend's):
    with two prices, either budget can bind first, the token budget on long prompts, the cost budget on long
    replies."""

    role: str = "shopper"
    effects_of: Callable[[str, dict], list[Effect]] | None = None
    user: User | None = None
    asked_for: AskedFor | None = None
    ledger: Ledger = field(default_factory=Ledger)
    max_steps: int = 12
    max_tokens: int = 40_000
    max_cost_usd: float = 0.05
    usd_per_1k_prompt: float = 0.0005
    usd_per_1k_reply: float = 0.0015
    steps_used: int = 0
    tokens_used: int = 0
    cost_usd: float = 0.0

    def charge(self, prompt_tokens: int, reply_tokens: int) -> None:
        """Count one call toward the token and cost budgets."""
        self.tokens_used += prompt_tokens + reply_tokens
        self.cost_usd += (prompt_tokens * self.usd_per_1k_prompt + reply_tokens * self.usd_per_1k_reply) / 1000


@concealing
@dataclass
class Proposed:
    """What the harness read from a reply: the parsed data and every intent it expresses. For a single declared
    and valid tool request, `effects()` asks the app what it would change, once, when a check first needs it."""

    data: Any
    intents: list[Intent]
    effects_of: Callable[[str, dict], list[Effect]] | None = None
    predicted: list[Effect] | None = None

    @property
    def intent(self) -> Intent:
        return self.intents[0]

    def effects(self) -> list[Effect]:
        if self.predicted is None:
            model = TOOL_MODELS.get(self.intent.tool)
            valid = model is not None and not model_errors(model, {"tool_name": self.intent.tool, **self.intent.args})
            self.predicted = self.effects_of(self.intent.tool, self.intent.args) if valid and self.effects_of else []
        return self.predicted


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


def refuse(cause: str, message: str) -> Decision:
    return Decision(False, cause, message)


def accept(message: str) -> Decision:
    return Decision(True, None, message)


# --- the checks, in order: each returns a verdict, or None to let the next one look -----------------------------

def has_an_intent(p: Proposed, ctx: Context) -> Decision | None:
    return None if p.intents else refuse("malformed_structure", "no intent found: send one object with a tool_call")


def one_intent(p: Proposed, ctx: Context) -> Decision | None:
    """Never guess which one was meant, and never let a side effect ride along."""
    if len(p.intents) == 1:
        return None
    named = ", ".join(f"{i.kind}({i.tool})" for i in p.intents)
    return refuse("ambiguous_intent", f"one reply, {len(p.intents)} intents: {named}; send one tool_call and "
                  "nothing beside it")


def step_keys_only(p: Proposed, ctx: Context) -> Decision | None:
    if extra := unexpected_keys(p.data):
        return refuse("malformed_structure", f"unexpected key: {', '.join(extra)}; a step holds "
                      f"{', '.join(STEP_KEYS)} and nothing else")
    return None


def refuses(answer: str) -> bool:
    """Whether an answer is a refusal: empty, or opening by saying that it cannot or will not answer."""
    rest = PERSONA.sub("", APOLOGY.sub("", answer.strip(), count=1), count=1)
    return not re.search(r"\w", answer) or INABILITY.match(rest) is not None


def no_silent_refusal(p: Proposed, ctx: Context) -> Decision | None:
    """An empty or refusing final answer; the answer contract's status not_found is a refusal said out loud."""
    content = str(p.intent.args.get("content", ""))
    if p.intent.kind != "final_answer" or not refuses(content):
        return None
    if content.strip() and p.data.get("status") == "not_found":
        return None
    return refuse("silent_refusal", "an empty or refusing answer is not a result: call abort(reason) to stop, "
                  "or ask_user(question) if something is unclear")


def fallback_delivered(p: Proposed, ctx: Context) -> Decision | None:
    return accept(f"fallback delivered: {p.intent.args['cause']}") if p.intent.tool == "fallback" else None


def nothing_to_run(p: Proposed, ctx: Context) -> Decision | None:
    """An answer, a question, a plan or an abort changes nothing in the world; a plan grants nothing either."""
    if p.intent.kind == "tool_request":
        return None
    granted = "; it grants no permission" if p.intent.kind == "plan_update" else ""
    return accept(f"{p.intent.kind} accepted{granted}")


def declared_tool(p: Proposed, ctx: Context) -> Decision | None:
    if p.intent.tool in ACTIONS:
        return None
    return refuse("unknown_tool", f"tool {p.intent.tool!r} is not declared; declared tools: {', '.join(ACTIONS)}; "
                  f"to finish, ask or stop: {', '.join(SPECIAL_TOOLS)}")


def required_arguments(p: Proposed, ctx: Context) -> Decision | None:
    model = TOOL_MODELS[p.intent.tool]
    required = [n for n, f in model.model_fields.items() if f.is_required() and n != "tool_name"]
    if missing := [n for n in required if n not in p.intent.args]:
        return refuse("missing_argument", f"{p.intent.tool} needs {', '.join(missing)}")
    return None


def valid_arguments(p: Proposed, ctx: Context) -> Decision | None:
    if errors := model_errors(TOOL_MODELS[p.intent.tool], {"tool_name": p.intent.tool, **p.intent.args}):
        return refuse("invalid_argument", "; ".join(errors))
    return None


def within_policy(p: Proposed, ctx: Context) -> Decision | None:
    tool, args = p.intent.tool, p.intent.args
    for denied_tool, argument, pattern in DENY_LIST:
        if tool == denied_tool and pattern.search(str(args.get(argument, ""))):
            return refuse("policy_violation", f"{tool} with this {argument} is on the deny-list")
    if tool == "write" and len(args["content"]) > MAX_TYPED_CHARACTERS:
        return refuse("policy_violation",
                      f"typing {len(args['content'])} characters; the limit is {MAX_TYPED_CHARACTERS}")
    return None


def typed_as_asked(p: Proposed, ctx: Context) -> Decision | None:
    """Whatever is typed is what the user asked to have typed there (without a record of what was asked: anything)."""
    if ctx.asked_for is None:
        return None
    for effect in p.effects():
        if effect.action == "type_text":
            asked, why = ctx.asked_for.typing_allowed(effect.text, effect.field)
            if not asked:
                return refuse("not_asked", why)
    return None


def role_allows(p: Proposed, ctx: Context) -> Decision | None:
    if p.intent.tool in ROLES.get(ctx.role, frozenset()):
        return None
    return refuse("permission_denied", f"the {ctx.role} role may not use {p.intent.tool}")


def exhausted(ctx: Context) -> str | None:
    """Why the budgets allow no further step, or None; the loop asks this before it calls the model again."""
    if ctx.steps_used >= ctx.max_steps:
        return f"the step budget of {ctx.max_steps} is used up"
    if ctx.tokens_used > ctx.max_tokens:
        return f"{ctx.tokens_used} tokens exceed the token budget of {ctx.max_tokens}"
    if ctx.cost_usd > ctx.max_cost_usd:
        return f"${ctx.cost_usd:.4f} exceeds the cost budget of ${ctx.max_cost_usd:.2f}"
    return None


def within_budget(p: Proposed, ctx: Context) -> Decision | None:
    return refuse("budget_exhausted", why) if (why := exhausted(ctx)) else None


def not_repeated(p: Proposed, ctx: Context) -> Decision | None:
    """An effect that cannot be undone runs once per ledger."""
    for effect in p.effects():
        if effect.irreversible and ctx.ledger.executed(effect.key):
            return refuse("duplicate_side_effect", f"already done, not repeated: {effect.describe()}")
    return None


def effect_asked_for(p: Proposed, ctx: Context) -> Decision | None:
    """An effect that cannot be undone and that the user did not ask for is refused without asking."""
    for effect in p.effects():
        if effect.irreversible and ctx.asked_for is not None:
            asked, why = ctx.asked_for.effect_allowed(effect)
            if not asked:
                return refuse("not_asked", f"{why}; refused without asking")
    return None


def user_approves(p: Proposed, ctx: Context) -> Decision | None:
    """Last, so that the user is asked only about what nothing else refused."""
    for effect in p.effects():
        if not effect.irreversible:
            continue
        if ctx.user is None:
            return refuse("not_approved", f"{effect.describe()} cannot be undone, and there is no user to approve it")
        if not ctx.user.approve(effect):
            return refuse("not_approved", f"the user did not approve: {effect.describe()}")
    return None


Check = Callable[[Proposed, Context], "Decision | None"]
# What the reply says, read before anything is asked of the app: a verdict here concerns no side effect. The budget
# comes first: every reply counts, an answer, a question, a plan or an abort as much as a tool request.
READING_CHECKS: tuple[Check, ...] = (within_budget, has_an_intent, one_intent, step_keys_only, no_silent_refusal,
                                     fallback_delivered, nothing_to_run)
# A single tool request: what it is (its tool, its arguments, the policy, the caller's role) ...
REQUEST_CHECKS: tuple[Check, ...] = (declared_tool, required_arguments, valid_arguments, within_policy, role_allows)
# ... and what it would change: typing only what was asked, nothing irreversible twice or unasked, and the user's
# approval last, so that the user is asked only about what nothing else refused.
EFFECT_CHECKS: tuple[Check, ...] = (typed_as_asked, not_repeated, effect_asked_for, user_approves)
CHECKS = READING_CHECKS + REQUEST_CHECKS + EFFECT_CHECKS


def decide(data: Any, ctx: Context, checks: tuple[Check, ...] = CHECKS, effects: list[Effect] | None = None) -> Decision:
    """Whether the harness acts on this parsed reply, and if not, the typed reason: the first verdict of `checks`.

    A side effect that cannot be undone is put to `ctx.user`, described by the app, not by the model: by what a
    trial of the step did (`effects`), or else by the app's own account (`ctx.effects_of`). Nothing else in the
    reply is read for permission. The effects of a refused tool request are entered in the ledger as blocked.
    """
    proposed = Proposed(data, read_intents(data), ctx.effects_of, effects)
    decision, by = None, None
    for check in checks:
        if (decision := check(proposed, ctx)) is not None:
            by = check
            break
    decision = decision or accept(f"{proposed.intent.tool} may run")
    decision.intent = proposed.intent if len(proposed.intents) == 1 else None
    decision.effects = [] if by in READING_CHECKS else proposed.effects()
    if decision.allowed:
        decision.asked = {e.key for e in decision.effects if e.irreversible or ctx.asked_for is not None}
    for effect in [] if decision.allowed else decision.effects:
        ctx.ledger.blocked(effect, decision.cause)
    return decision


class Tracer:
    """One JSONL line per turn: raw output and parsed intent kept apart, the ladder, the decision, latency, usage."""

    def __init__(self, path: Path | str):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, turn: int, raw: str, ladder: Any, decision: Decision, seconds: float,
              usage: dict | None, side_effects: list[dict] | None = None) -> None:
        """Append one turn's line, every known password in it concealed."""
        line = {"turn": turn, "raw": raw, "intent": asdict(decision.intent) if decision.intent else None,
                "validation": {"parse_ok": ladder.parse_ok, "errors": ladder.errors},
                "repair": {"attempted": ladder.repair_attempted, "raw": ladder.repair_raw,
                           "succeeded": ladder.repair_succeeded},
                "fallback": ladder.cause if ladder.fallback_used else None,
                "decision": {"allowed": decision.allowed, "cause": decision.cause, "message": decision.message},
                "side_effects": side_effects or [], "seconds": round(seconds, 3), "usage": usage}
        with self.path.open("a") as trace:
            trace.write(conceal(json.dumps(line)) + "\n")


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


def unapproved(effects: list[Effect], decision: Decision) -> list[Effect]:
    """The irreversible effects beyond what `decision` approved, counted: an order approved once and placed twice
    has one too many."""
    allowed, over = decision.approved(), []
    for effect in effects:
        if not effect.irreversible:
            continue
        if allowed[effect.key] > 0:
            allowed[effect.key] -= 1
        else:
            over.append(effect)
    return over


def dry_run(step: Step, app: CampusStore) -> list[Effect]:
    """The effects the step would have, read off a copy of the app that runs it: the app's own code, not its
    description of itself (`effects_of`), which could be wrong."""
    trial = copy.deepcopy(app)
    since = len(trial.effects)
    execute(step, trial)
    return trial.effects[since:]


def check_what_ran(executed: list[Effect], decision: Decision, turn: tuple | None = None) -> None:
    """The second line: no irreversible effect ran more often than the user approved it. The first line (the
    decision on the trial's effects in `governed_turn`) refuses such a step before it runs, so this fires only on a
    bug in the app or here."""
    if over := unapproved(executed, decision):
        raise HarnessBreach(f"ran without approval: {'; '.join(e.describe() for e in over)}", turn)


def governed_turn(data: Any, app: CampusStore, ctx: Context, user: User) -> tuple[dict | None, Decision, str]:
    """One pass; the model's step never reaches the app but through the harness. Decide what the reply is (one step?
    a declared tool, valid arguments, the policy, the role, the budget); for a tool request, try it on a copy of the
    app and decide on what the trial did (typing only what was asked, nothing irreversible twice or unasked), the user
    asked last, about what would really happen; then dispatch or refuse.

    Returns the step (None when the reply is not one step), the harness's decision, and the text that goes back to
    the model ("" when the step ends the run: an answer or an abort). Every reply counts toward the step budget.
    Every side effect the app reports is entered in `ctx.ledger`, asked for or not.
    """
    decision = decide(data, ctx, READING_CHECKS + REQUEST_CHECKS)
    ctx.steps_used += 1
    if decision.allowed and (errors := model_errors(Step, data)):
        decision = refuse("malformed_structure", f"not one step: {'; '.join(errors[:3])}")
    step = Step.model_validate(data) if not model_errors(Step, data) else None
    if decision.allowed and decision.intent.kind == "tool_request":
        decision = decide(data, ctx, EFFECT_CHECKS, effects=dry_run(step, app))
    shown = step.model_dump() if step else None
    if not decision.allowed:
        return shown, decision, decision.tool_output()
    kind = decision.intent.kind
    if kind == "tool_request":
        since = len(app.effects)
        result = execute(step, app)
        record_effects(app, since, ctx, lambda e: e.key in decision.asked)
        output = tool_output_message(step.tool_call.tool_name, result)["content"]
        check_what_ran(app.effects[since:], decision, (shown, decision, output))
        return shown, decision, output
    if kind == "clarification":
        return shown, decision, tool_output_message("ask_user", user.reply(step.tool_call.question))["content"]
    if kind == "plan_update":
        return shown, decision, tool_output_message("update_plan", PLAN_NOTED)["content"]
    return shown, decision, ""
