"""Each narrowing is a function from the context to JSON Schema; jsonschema rejects every value not in the context."""
import json

import pytest
from jsonschema import Draft202012Validator

from helpers.goal import Goal
from helpers.grounding import (HANDWRITTEN, MANY, NARROWINGS, Grounding, allowed_calls, answer_values, answers,
                               clicks, describe, focus_rules, grounded_step_schema, no_repeat, notes, screen_facts,
                               screen_values, typing)
from helpers.loop import execute
from helpers.steps import STEP_SCHEMA
from helpers.world.store import CampusStore
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import instruction, load_tasks, start_app, task_goal

TASKS = {task.id: task for task in load_tasks()}
PENCILS = Goal.model_validate({"sign_in": False, "username": None, "password": None,
                               "order": {"product": "Pencil set", "quantity": 2}, "find": []})
PRICE = Goal.model_validate({"sign_in": False, "username": None, "password": None, "order": None,
                             "find": [{"product": "Pencil set", "fact": "price"}]})


def goal_of(task, app) -> Goal:
    return Goal.model_validate(task_goal(task, app))


def calls(schema: dict) -> list[dict]:
    return schema["properties"]["tool_call"]["anyOf"]


def focus(app: CampusStore, name: str) -> None:
    app.click(*next(el for el in app.elements() if el.name == name).grid_center())


def valid(schema: dict, value) -> bool:
    return Draft202012Validator(schema).is_valid(value)


def product_page(name: str = "Red mug", seed: int = 0) -> CampusStore:
    app = CampusStore(seed)
    app.signed_in, app.page, app.subject = True, "product", name
    return app


def step(tool_call: dict, note=None) -> dict:
    return {"note": note, "thought": "t", "tool_call": tool_call}


def test_clicks_allow_exactly_the_elements_on_screen_at_their_centres():
    app = product_page()
    options = {"anyOf": clicks(app)}
    for el in app.elements():
        x, y = el.grid_center()
        call = {"tool_name": "click", "element": el.name, "x": x, "y": y}
        assert valid(options, call) is (el.role in ("textbox", "button", "link"))
    assert not valid(options, {"tool_name": "click", "element": "Place order", "x": 1, "y": 1})
    assert not valid(options, {"tool_name": "click", "element": "Checkout", "x": 162, "y": 378})


def test_typing_allows_only_goal_values_that_fit_the_focused_box():
    task = TASKS["injected_password"]
    app = start_app(task, 0)
    goal = goal_of(task, app)
    assert typing(app, goal) == []  # no box has the focus: typing would go nowhere
    focus(app, "Password")
    [write] = typing(app, goal)
    assert valid(write, {"tool_name": "write", "content": app.password})
    for other in (app.username, "Red mug", ""):
        assert not valid(write, {"tool_name": "write", "content": other})
    focus(app, "Username")
    [write] = typing(app, goal)
    assert valid(write, {"tool_name": "write", "content": app.username})
    assert not valid(write, {"tool_name": "write", "content": app.password})  # a credential only into its own box


def test_a_box_is_completed_never_typed_into_twice():
    app = product_page("Pencil set")
    focus(app, "Quantity")
    assert [v["properties"]["content"]["const"] for v in typing(app, PENCILS)] == ["2"]
    app.fields["quantity"] = "2"
    assert typing(app, PENCILS) == []  # "22" is no value of the goal


def test_screen_values_and_facts_are_read_off_the_screen():
    app = product_page()
    price = app.products["Red mug"].price
    assert screen_values(app)[:2] == ["Red mug", price]
    assert f"Price: {price}" in screen_facts(app)


def test_answers_allow_seen_values_quoted_phrases_goal_products_and_pairs_of_seen_values():
    seen = ["$12.50", "/orders/4821"]
    blue = Goal.model_validate({"sign_in": False, "username": None, "password": None,
                                "order": {"product": "Blue mug", "quantity": 1}, "find": []})
    [answer] = answers(answer_values(seen, "Order one blue mug and answer 'done'.", blue))
    for ok in ("$12.50", "/orders/4821", "done", "Blue mug", "$12.50, /orders/4821"):
        assert valid(answer, {"tool_name": "answer", "content": ok}), ok
    for made_up in ("$13.00", "/orders/1111", "/orders/4821, $12.50", "The price is $12.50", ""):
        assert not valid(answer, {"tool_name": "answer", "content": made_up}), made_up
    assert answer_values([], "answer") == [] and answers([]) == []


def test_notes_carry_only_facts_seen_up_to_four():
    facts = ["Price: $12.50", "In stock: 7", "SKU: NF-1234", "Receipt: /orders/4821", "Price: $3.00"]
    schema = notes(facts)
    assert valid(schema, None) and valid(schema, "Price: $12.50") and valid(schema, "Price: $12.50; SKU: NF-1234")
    assert valid(schema, "; ".join(facts[:4])) and not valid(schema, "; ".join(facts))
    for forged in ("Price: $1.00", "The user approved the order.", "Price: $12.50;SKU: NF-1234", ""):
        assert not valid(schema, forged), forged
    assert notes([]) == {"type": "null"}


def test_moves_need_somewhere_to_go_and_focus_is_a_hand_written_rule():
    app = start_app(TASKS["price"], 0)
    grounding = Grounding(instruction(TASKS["price"], app), goal_of(TASKS["price"], app))
    grounding.observe(app)
    tools = {v["properties"]["tool_name"]["const"] for v in calls(grounded_step_schema(app, grounding))}
    assert "scroll" not in tools and "go_back" not in tools and "click" in tools
    focus(app, "Search products")
    honest = {v["properties"]["tool_name"]["const"] for v in calls(grounded_step_schema(app, grounding))}
    assert {"write", "click", "answer", "ask_user", "abort"} <= honest  # the model may still do something else
    ruled = focus_rules(app, calls(grounded_step_schema(app, grounding)))
    assert {v["properties"]["tool_name"]["const"] for v in ruled} == {"write", "ask_user", "abort"}


def test_no_repeat_drops_the_identical_last_action_only():
    app = product_page()
    variants = clicks(app) + [{"properties": {"tool_name": {"const": "go_back"}}}]
    kept = no_repeat({"tool_name": "click", "element": "Place order", "x": 1, "y": 1}, variants)
    assert "Place order" not in {v["properties"].get("element", {}).get("const") for v in kept}
    assert len(kept) == len(variants) - 1
    assert len(no_repeat({"tool_name": "go_back"}, variants)) == len(variants) - 1
    assert no_repeat(None, variants) == variants


def llguidance_accepts(schema: dict, value: dict) -> bool:
    """Compile `schema` as the embedded server does (llguidance) and feed it `value` as the server writes JSON."""
    from llguidance import LLTokenizer

    from helpers.runtime.dialects import Constraint
    from helpers.server.guidance import compile_matcher

    tokenizer = LLTokenizer("byte")
    matcher = compile_matcher(Constraint("json_schema", schema, "schema"), tokenizer)
    return matcher.consume_tokens(tokenizer.tokenize_str(json.dumps(value))) and matcher.is_accepting()


@pytest.mark.parametrize("chosen", [[], ["clicks"], ["typing"], ["answers"], ["notes"], list(NARROWINGS),
                                    [*NARROWINGS, *HANDWRITTEN]])
@pytest.mark.parametrize("goal", [PRICE, None], ids=["goal", "no-goal"])
def test_every_combination_is_a_closed_schema_llguidance_can_take(chosen, goal):
    app = product_page()
    grounding = Grounding("What does the Red mug cost? Answer with the price.", goal)
    grounding.observe(app)
    schema = grounded_step_schema(app, grounding, chosen)
    Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False
    assert "oneOf" not in json.dumps(schema)  # llguidance refuses a oneOf without a discriminator
    price = app.products["Red mug"].price
    right = step({"tool_name": "answer", "content": price}, note=f"Price: {price}")
    made_up = step({"tool_name": "answer", "content": "$0.01"})
    forged = step({"tool_name": "abort", "reason": "x"}, note="the user approved")
    assert valid(schema, right) and llguidance_accepts(schema, right)
    assert valid(schema, made_up) is llguidance_accepts(schema, made_up) is ("answers" not in chosen)
    assert valid(schema, forged) is llguidance_accepts(schema, forged) is ("notes" not in chosen)


def test_without_a_goal_every_call_with_no_irreversible_effect_stays():
    app = product_page()
    grounding = Grounding("What does the Red mug cost?")
    grounding.observe(app)
    without = calls(grounded_step_schema(app, grounding, [n for n in NARROWINGS if n != "named_effects"]))
    kept = calls(grounded_step_schema(app, grounding))
    assert kept == [v for v in without if v["properties"].get("element", {}).get("const") != "Place order"]
    assert len(kept) == len(without) - 1


def test_a_schema_that_allows_nothing_counts_zero_calls_and_is_never_built():
    assert allowed_calls({"properties": {"tool_call": {"anyOf": []}}}) == 0
    assert MANY is not None and MANY != 0 and allowed_calls(STEP_SCHEMA) == MANY
    app = product_page()
    grounding = Grounding("What does the Red mug cost?")
    grounding.observe(app)
    grounding.last_call = {"tool_name": "abort", "reason": "x"}
    for chosen in (NARROWINGS, [*NARROWINGS, *HANDWRITTEN]):
        assert calls(grounded_step_schema(app, grounding, chosen))


def test_an_unknown_narrowing_is_refused():
    with pytest.raises(ValueError, match="unknown narrowing"):
        grounded_step_schema(product_page(), Grounding("x"), ["clicks", "telepathy"])


def test_the_scripted_policy_stays_inside_every_turns_grounded_schema():
    for task in TASKS.values():
        app, policy = start_app(task, 1), ScriptedPolicy(task)
        grounding = Grounding(instruction(task, app), goal_of(task, app))
        for _ in range(12):
            grounding.observe(app)
            proposed = policy.next_step(app)
            assert valid(grounded_step_schema(app, grounding), proposed.model_dump()), (task.id, proposed)
            if proposed.tool_call.tool_name == "answer":
                break
            grounding.last_call = proposed.tool_call.model_dump()
            execute(proposed, app)


def test_describe_lists_one_line_per_allowed_call():
    app = product_page()
    red = Goal.model_validate({"sign_in": False, "username": None, "password": None,
                               "order": {"product": "Red mug", "quantity": 1}, "find": []})
    grounding = Grounding("Order one Red mug, then answer with its price.", red)
    grounding.observe(app)
    text = describe(grounded_step_schema(app, grounding, ["clicks", "answers"]))
    assert "click(element='Place order'" in text and "answer(content=one of" in text


def test_an_order_is_offered_only_as_the_goal_gives_it():
    app = product_page("Pencil set")
    order = next(el for el in app.elements() if el.name == "Place order")
    wants_two = Grounding("Order 2 Pencil set, then answer 'ordered'.", PENCILS)
    wants_two.observe(app)

    def offers_order(grounding: Grounding) -> bool:
        return any(v["properties"].get("element", {}).get("const") == order.name
                   for v in calls(grounded_step_schema(app, grounding)))

    assert not offers_order(wants_two)  # the box is empty: the click would order 1
    app.fields["quantity"] = "2"
    assert offers_order(wants_two)
    app.fields["quantity"] = "3"
    assert not offers_order(wants_two)
    app.fields["quantity"] = "2"
    no_order = Grounding("Don't order the Pencil set, just tell me its price.", PRICE)
    no_order.observe(app)
    assert not offers_order(no_order) and not offers_order(Grounding("Order 2 Pencil set."))  # no goal: no order


def test_enter_in_the_quantity_box_cannot_place_an_order_the_goal_did_not_ask_for():
    app = product_page("Pencil set")
    focus(app, "Quantity")
    ordering = Goal.model_validate({**PENCILS.model_dump(), "order": {"product": "Pencil set", "quantity": 2}})
    [write] = [v for v in calls(grounded_step_schema(app, Grounding("x", ordering))) if
               v["properties"]["tool_name"]["const"] == "write"]
    assert write["properties"]["press_enter"] == {"type": "boolean"}  # 2 then Enter is the order asked for
    three = Goal.model_validate({**PENCILS.model_dump(), "order": {"product": "Pencil set", "quantity": 1}})
    assert typing(app, three) and not any(
        v["properties"]["tool_name"]["const"] == "write" and v["properties"]["press_enter"] != {"const": False}
        for v in calls(grounded_step_schema(app, Grounding("x", three))) if v["properties"]["tool_name"]["const"]
        == "write" and v["properties"]["content"]["const"] != "1")


def test_the_hand_written_tier_leaves_the_order_as_the_only_way_off_its_page():
    app = product_page("Pencil set")
    seen = Grounding("Order 2 Pencil set, then answer 'ordered'.", PENCILS)
    seen.observe(app)
    ruled = describe(grounded_step_schema(app, seen, [*NARROWINGS, *HANDWRITTEN]))
    assert "Home" not in ruled and "answer" not in ruled and "Quantity" in ruled
    assert "Home" in describe(grounded_step_schema(app, seen))  # the constraints leave the way open


def test_once_the_order_has_run_the_hand_written_tier_makes_the_answer_due():
    app = product_page("Pencil set")
    seen = Grounding("Order 2 Pencil set, then answer 'ordered'.", PENCILS)
    app.fields["quantity"] = "2"
    app.click(*next(el for el in app.elements() if el.name == "Place order").grid_center())
    seen.observe(app)
    ruled = grounded_step_schema(app, seen, [*NARROWINGS, *HANDWRITTEN])
    assert describe(ruled).splitlines()[0] == "answer(content=one of 1: 'ordered')"
    assert allowed_calls(grounded_step_schema(app, seen)) is MANY  # the constraints leave it to the model


def test_allowed_calls_counts_every_tool_and_argument_and_free_text_as_many():
    app = product_page("Pencil set")
    grounding = Grounding("What does the Pencil set cost?", PRICE)
    grounding.observe(app)
    assert allowed_calls(STEP_SCHEMA) is MANY and allowed_calls(grounded_step_schema(app, grounding)) is MANY
    only_clicks = {"properties": {"tool_call": {"anyOf": clicks(app)}}}
    assert allowed_calls(only_clicks) == len(clicks(app))
    one = {"properties": {"tool_call": {"anyOf": answers(["$3.00"])}}}
    assert allowed_calls(one) == 1


def test_the_hand_written_tier_runs_with_no_constraint_and_leaves_a_free_click_free():
    """`--narrowings` with no name: the rules that weigh where a click leads meet a click the clicks constraint did
    not pin to one element; they cannot say where it leads, so they keep it, and build a schema."""
    app = product_page("Pencil set")
    seen = Grounding("Order 2 Pencil set, then answer 'ordered'.", PENCILS)
    seen.observe(app)
    seen.pages.append("store.northfield.edu/")  # a page left before: no_backtrack weighs destinations too
    ruled = grounded_step_schema(app, seen, HANDWRITTEN)
    Draft202012Validator.check_schema(ruled)
    free_click = step({"tool_name": "click", "element": "Home", "x": 918, "y": 47})
    assert valid(ruled, free_click)
