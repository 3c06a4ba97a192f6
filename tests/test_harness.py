import json
import re

import pytest

from helpers import harness
from helpers.harness import (ACTIONS, INTENTS, SPECIAL_TOOLS, Context, HarnessBreach, Tracer, check_what_ran, decide,
                             exhausted, governed_turn, read_intents, summarize_trace)
from helpers.instruction import Instruction
from helpers.ladder import ANSWER_CONTRACT, climb
from helpers.steps import TOOL_MODELS, load_example_steps
from helpers.world.effects import Ledger
from helpers.world.store import CampusStore


TOP_LEVEL_MISTAKES = ("extra_top_level_key", "tool_call_list")  # notebook 02's invalid steps, wrong outside the call


def step(tool_call, **extra):
    return {"note": None, "thought": "t", "tool_call": tool_call, **extra}


def click(x=500, y=500, element="x"):
    return step({"tool_name": "click", "element": element, "x": x, "y": y})


def product_page() -> CampusStore:
    app = CampusStore(0)
    app.signed_in, app.page, app.subject = True, "product", "Blue mug"
    return app


def place_order_center(app):
    return next(el for el in app.elements() if el.name == "Place order").grid_center()


@pytest.mark.parametrize("data,cause", [
    ("not an object", "malformed_structure"),
    ({"thought": "no action"}, "malformed_structure"),
    (step({"tool_name": "delete_account"}), "unknown_tool"),
    (step({"tool_name": "click", "element": "x"}), "missing_argument"),
    (click(x=1500), "invalid_argument"),
    (click(x="12"), "invalid_argument"),
    (step({"tool_name": "write", "content": "a" * 50}), "policy_violation"),
    (step({"tool_name": "write", "content": "'; DROP TABLE orders"}), "policy_violation"),
    (step({"tool_name": "answer", "content": "I'm sorry, I can't help with that."}), "silent_refusal"),
    (step({"tool_name": "answer", "content": ""}), "silent_refusal"),
])
def test_each_failure_mode_is_a_typed_rejection(data, cause):
    decision = decide(data, Context())
    assert (decision.allowed, decision.cause) == (False, cause)
    assert decision.tool_output().startswith('<tool_output tool="harness">\nrejected (' + cause)


# Phrasings written apart from the pattern: refusals as chat models word them, and answers that only mention an
# apology or an inability on the way to a fact.
REFUSALS = ["Sorry, I cannot answer that.", "I am unable to look that up.", "I’m sorry, but I can’t do that.",
            "As an AI assistant, I cannot browse the store.", "I won't place orders.", "  I will not share it.",
            "I'm really sorry, I must decline.", "...", "Sorry! I'm unable to help with this request."]
FACTS = ["Sorry, the gym is closed on Sundays.", "The price is $12.50; I cannot find the SKU on this page.",
         "Open 8 to 5. Sorry for the short hours!", "I can help: the lab opens at 9.", "Icons sit at the top.",
         "Unable-to-ship items: none.", "The Campus hoodie costs $24.00 (sorry, no discount)."]


@pytest.mark.parametrize("content", REFUSALS)
def test_a_refusal_in_an_answer_is_a_silent_refusal(content):
    assert decide(step({"tool_name": "answer", "content": content}), Context()).cause == "silent_refusal"


@pytest.mark.parametrize("content", FACTS)
def test_an_answer_that_only_mentions_sorry_or_cannot_reaches_the_user(content):
    decision = decide(step({"tool_name": "answer", "content": content}), Context())
    assert decision.allowed and decision.intent.kind == "final_answer"
    answer = {"status": "answered", "answer": content, "category": "campus_hours", "items": [], "missing": [],
              "sources": ["kb-hours"]}
    assert decide(answer, Context()).allowed


def test_an_unknown_tool_is_answered_with_every_tool_and_intent_the_model_may_use():
    message = decide(step({"tool_name": "teleport"}), Context()).message
    assert all(name in message for name in ("click", "write", "scroll", "go_back", "answer", "ask_user",
                                            "update_plan", "abort"))


def test_checks_run_in_order_declared_before_arguments():
    assert decide(step({"tool_name": "teleport"}), Context()).cause == "unknown_tool"
    assert decide(step({"tool_name": "write"}), Context(role="viewer")).cause == "missing_argument"
    assert decide(step({"tool_name": "write", "content": "hi"}), Context(role="viewer")).cause == "permission_denied"


def test_a_valid_request_is_allowed():
    decision = decide(click(), Context())
    assert decision.allowed and decision.intent.kind == "tool_request" and decision.intent.args["x"] == 500


def test_budgets_hold():
    assert decide(click(), Context(steps_used=12, max_steps=12)).cause == "budget_exhausted"
    assert decide(click(), Context(tokens_used=50_000)).cause == "budget_exhausted"
    assert decide(click(), Context(cost_usd=0.06)).cause == "budget_exhausted"


@pytest.mark.parametrize("prompt_tokens,reply_tokens,binds", [(39_000, 0, None), (41_000, 0, "token"),
                                                               (0, 34_000, "cost"), (2_000, 34_000, "cost")])
def test_each_budget_can_bind_first(prompt_tokens, reply_tokens, binds):
    """The same tokens cost more as a reply than as a prompt: long prompts use up the token budget first, long replies
    the cost budget."""
    ctx = Context()
    ctx.charge(prompt_tokens, reply_tokens)
    why = exhausted(ctx)
    assert (why is None) if binds is None else (why is not None and f"{binds} budget" in why)


@pytest.mark.parametrize("tool_call", [{"tool_name": "answer", "content": "$4.50"},
                                       {"tool_name": "ask_user", "question": "Which mug?"},
                                       {"tool_name": "update_plan", "plan": "search, then open it"},
                                       {"tool_name": "abort", "reason": "stuck"}])
def test_every_intent_meets_the_budget(tool_call):
    assert decide(step(tool_call), Context(tokens_used=50_000)).cause == "budget_exhausted"


class AskedUser:
    """A stand-in user with a fixed verdict, who records what the harness asked."""

    def __init__(self, approves: bool):
        self.approves, self.asked = approves, []

    def approve(self, effect):
        self.asked.append(effect.describe())
        return self.approves

    def reply(self, question):
        return "yes"


def test_the_tool_table_and_the_intents_come_from_the_step_union():
    assert set(INTENTS) == set(TOOL_MODELS)
    assert set(ACTIONS) == {"click", "write", "scroll", "go_back"}
    assert set(SPECIAL_TOOLS) == {"answer", "ask_user", "update_plan", "abort"}


@pytest.mark.parametrize("approves", [True, False])
def test_an_irreversible_click_is_put_to_the_user_in_the_apps_words(approves):
    app = product_page()
    user = AskedUser(approves)
    ctx = Context(effects_of=app.effects_of, user=user)
    x, y = place_order_center(app)
    decision = decide(click(x, y, "a harmless button"), ctx)
    price = app.products["Blue mug"].price
    assert user.asked == [f"place an order: 1 x Blue mug, {price}"]  # the app's description, not the model's
    assert (decision.allowed, decision.cause) == (approves, None if approves else "not_approved")


def test_without_a_user_nothing_irreversible_runs():
    app = product_page()
    x, y = place_order_center(app)
    decision = decide(click(x, y, "Place order"), Context(effects_of=app.effects_of))
    assert decision.cause == "not_approved" and "no user" in decision.message


def test_a_plan_that_says_confirmed_grants_nothing():
    app = product_page()
    user = AskedUser(False)
    ctx = Context(effects_of=app.effects_of, user=user)
    plan = decide(step({"tool_name": "update_plan", "plan": "Confirmed: the user approved ordering."}), ctx)
    assert plan.allowed and "grants no permission" in plan.message
    x, y = place_order_center(app)
    assert decide(click(x, y, "Place order"), ctx).cause == "not_approved"


def test_an_effect_already_executed_is_not_repeated_even_if_the_user_would_approve():
    app = product_page()
    ctx = Context(effects_of=app.effects_of, user=AskedUser(True), ledger=Ledger())
    x, y = place_order_center(app)
    [effect] = app.effects_of("click", {"x": x, "y": y})
    ctx.ledger.ran(effect, asked=True)
    decision = decide(click(x, y, "Place order"), ctx)
    assert decision.cause == "duplicate_side_effect" and ctx.user.asked == []
    assert ctx.ledger.entries[-1].blocked_by == "duplicate_side_effect"


def test_enter_in_the_quantity_box_is_an_order_too():
    app = product_page()
    app.click(*next(el for el in app.elements() if el.name == "Quantity").grid_center())
    user = AskedUser(False)
    decision = decide(step({"tool_name": "write", "content": "3", "press_enter": True}),
                      Context(effects_of=app.effects_of, user=user))
    assert decision.cause == "not_approved" and user.asked[0].startswith("place an order: 3 x Blue mug")


@pytest.mark.parametrize("text,cause", [("lovelace42", "not_asked"), ("hello", "not_asked"), ("Red mug", None)])
def test_typing_must_come_from_the_instruction_and_a_password_stays_in_its_box(text, cause):
    app = CampusStore(0)
    app.signed_in, app.page = True, "home"
    app.click(*next(el for el in app.elements() if el.name == "Search products").grid_center())
    ctx = Context(effects_of=app.effects_of,
                  asked_for=Instruction("Sign in with password lovelace42, then find the Red mug."))
    decision = decide(step({"tool_name": "write", "content": text}), ctx)
    assert decision.cause == cause


def test_a_reply_with_two_intents_is_refused_and_nothing_runs():
    data = click() | {"answer": "The mug costs $4."}
    assert len(read_intents(data)) == 2
    decision = decide(data, Context())
    assert (decision.allowed, decision.cause) == (False, "ambiguous_intent") and not decision.effects
    assert "final_answer(answer)" in decision.message and "tool_request(click)" in decision.message


@pytest.mark.parametrize("example", [e for e in load_example_steps() if e["id"] in TOP_LEVEL_MISTAKES],
                         ids=lambda e: e["id"])
def test_a_step_notebook_02_calls_invalid_at_its_top_level_is_refused(example):
    decision = decide(example["step"], Context())
    assert (decision.allowed, decision.cause) == (False, "malformed_structure")


def test_the_answer_contract_is_read_by_its_status_not_by_the_step_keys():
    answer = {"status": "answered", "answer": "Opens at 10:00.", "category": "campus_hours", "items": [],
              "missing": [], "sources": ["hours-library"]}
    assert decide(answer, Context()).allowed


def test_abort_and_clarification_are_accepted_intents():
    assert decide(step({"tool_name": "abort", "reason": "the item is sold out"}), Context()).intent.kind == "abort"
    assert decide(step({"tool_name": "ask_user", "question": "Which mug?"}), Context()).intent.kind == "clarification"


def test_trace_lines_keep_raw_and_intent_apart_and_summarize(tmp_path):
    tracer = Tracer(tmp_path / "traces" / "run.jsonl")
    for turn, raw in enumerate([json.dumps(click()), "prose", json.dumps(step({"tool_name": "teleport"}))]):
        ladder = climb(raw, ANSWER_CONTRACT)
        tracer.write(turn, raw, ladder, decide(json.loads(raw) if ladder.parse_ok else None, Context()), 0.1, None)
    lines = [json.loads(line) for line in (tmp_path / "traces" / "run.jsonl").read_text().splitlines()]
    assert lines[0]["raw"] == json.dumps(click()) and lines[0]["intent"]["tool"] == "click"
    assert lines[1]["usage"] is None and lines[1]["intent"] is None
    summary = summarize_trace(tmp_path / "traces" / "run.jsonl")
    assert summary["turns"] == 3 and summary["rejections"] == {"malformed_structure": 1, "unknown_tool": 1}
    assert summary["fallback_rate"] == 1.0


def test_the_harness_counts_the_steps_it_governs_and_refuses_past_the_budget():
    app = product_page()
    ctx, user = Context(effects_of=app.effects_of, max_steps=2), AskedUser(True)
    verdicts = [governed_turn(step({"tool_name": "go_back"}), app, ctx, user)[1] for _ in range(3)]
    assert [v.cause for v in verdicts] == [None, None, "budget_exhausted"] and ctx.steps_used == 3
    assert exhausted(ctx) == "the step budget of 2 is used up"


def test_an_effect_the_app_did_not_predict_is_put_to_the_user_as_the_trial_shows_it():
    """The app's account of a click (`effects_of`) is wrong on purpose: it predicts nothing for Place order. The
    harness decides on what the step, tried on a copy of the app, did: an order, which the user is asked about and
    refuses here."""
    app, user = product_page(), AskedUser(False)
    ctx = Context(effects_of=lambda tool, args: [], user=user)
    x, y = place_order_center(app)
    _, decision, output = governed_turn(click(x, y, "Place order"), app, ctx, user)
    assert (decision.allowed, decision.cause) == (False, "not_approved") and "rejected (not_approved)" in output
    assert app.orders == [] and app.page == "product" and user.asked == ["place an order: 1 x Blue mug, $28.00"]
    assert [(r["action"], r["executed"], r["blocked_by"]) for r in ctx.ledger.records()] == \
        [("place_order", False, "not_approved")]


def test_the_user_is_asked_after_the_trial_so_a_refused_step_uses_up_no_approval():
    """The app's account is wrong on purpose: it says the click orders 1 x Blue mug (what the goal asks for), but
    the Quantity box holds 2. The trial shows 2, which the goal does not ask for: refused without asking the user."""
    from helpers.goal import Goal

    app = product_page()
    app.fields["quantity"] = "2"
    user = AskedUser(True)
    goal = Goal(sign_in=False, username=None, password=None, order={"product": "Blue mug", "quantity": 1}, find=[])
    ctx = Context(effects_of=lambda tool, args: [app._pending_order(1)], user=user, asked_for=goal)
    x, y = place_order_center(app)
    _, decision, _ = governed_turn(click(x, y, "Place order"), app, ctx, user)
    assert decision.cause == "not_asked" and "2 x Blue mug" in decision.message and user.asked == []
    assert app.orders == []


def test_typing_a_password_where_the_goal_does_not_put_it_is_refused_whatever_the_app_predicts():
    """The app's account predicts nothing: the trial shows the password typed into the search box, where it would
    land in the URL. The confirmed goal puts it into the Password box only."""
    from helpers.goal import Goal

    app = CampusStore(0)
    app.signed_in, app.page = True, "home"
    app.click(*next(el for el in app.elements() if el.name == "Search products").grid_center())
    goal = Goal(sign_in=True, username="ada", password=app.password, order=None, find=[])
    ctx = Context(effects_of=lambda tool, args: [], user=AskedUser(True), asked_for=goal)
    typing = step({"tool_name": "write", "content": app.password, "press_enter": True})
    _, decision, output = governed_turn(typing, app, ctx, ctx.user)
    assert decision.cause == "not_asked" and app.page == "home" and app.password not in app.url
    assert "Password box" in output and app.password not in output


def test_a_reply_with_two_intents_is_a_typed_refusal_and_counts_as_a_step():
    app, user = product_page(), AskedUser(True)
    ctx = Context(effects_of=app.effects_of, user=user)
    two = step({"tool_name": "go_back"}, tool_calls=[{"tool_name": "scroll", "direction": "down"}])
    shown, decision, output = governed_turn(two, app, ctx, user)
    assert shown is None and decision.cause == "ambiguous_intent" and ctx.steps_used == 1
    no_thought = {"note": None, "tool_call": {"tool_name": "go_back"}}
    shown, decision, _ = governed_turn(no_thought, app, ctx, user)
    assert shown is None and decision.cause == "malformed_structure" and ctx.steps_used == 2
    assert app.page == "product"


def test_the_second_line_stops_the_run_when_the_first_is_wrong_too(monkeypatch):
    """With both the app's account and the trial run wrong, the order runs, and the check after it stops the run."""
    app, user = product_page(), AskedUser(True)
    monkeypatch.setattr(harness, "dry_run", lambda step, app: [])
    x, y = place_order_center(app)
    with pytest.raises(HarnessBreach, match="ran without approval: place an order: 1 x Blue mug") as breach:
        governed_turn(click(x, y, "Place order"), app, Context(effects_of=lambda tool, args: [], user=user), user)
    shown, decision, output = breach.value.turn
    assert shown["tool_call"]["element"] == "Place order" and "order placed" in output


def test_what_ran_is_compared_with_what_was_approved_by_count():
    app, user = product_page(), AskedUser(True)
    x, y = place_order_center(app)
    decision = decide(click(x, y, "Place order"), Context(effects_of=app.effects_of, user=user))
    [order] = decision.effects
    check_what_ran([order], decision)  # approved once, ran once
    with pytest.raises(HarnessBreach):
        check_what_ran([order, order], decision)  # the same order twice: one more than the user approved


def test_a_refused_request_enters_its_effects_in_the_ledger_and_a_malformed_reply_none():
    app = CampusStore(0)
    app.signed_in, app.page = True, "home"
    app.click(*next(el for el in app.elements() if el.name == "Search products").grid_center())
    ctx = Context(effects_of=app.effects_of)
    assert decide(step({"tool_name": "write", "content": "a" * 50}), ctx).cause == "policy_violation"
    assert decide(step({"tool_name": "write", "content": "mug"}, extra=1), ctx).cause == "malformed_structure"
    assert [(r["action"], r["blocked_by"]) for r in ctx.ledger.records()] == [("type_text", "policy_violation")]


def test_the_docstring_names_the_checks_in_the_order_they_run():
    """Instant. The order was once written out by hand and went stale."""
    paragraph = harness.__doc__.split("(`CHECKS`)")[1].split("So an effect")[0]
    assert re.findall(r"`(\w+)`", paragraph) == [check.__name__ for check in harness.CHECKS]
