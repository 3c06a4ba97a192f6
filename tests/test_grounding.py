"""Each narrowing is a function from the context to JSON Schema; jsonschema rejects every value not in the context."""
import json

import pytest
from jsonschema import Draft202012Validator

from helpers.grounding import (NARROWINGS, Grounding, answer_values, answers, clicks, describe, focus_rules,
                               grounded_step_schema, no_repeat, notes, screen_facts, screen_values, typing)
from helpers.loop import execute
from helpers.world.screen import CampusStore
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import instruction, load_tasks, start_app

TASKS = {task.id: task for task in load_tasks()}


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


def test_typing_allows_only_phrases_of_the_instruction():
    [write] = typing("Order 2 Pencil set, then answer 'ordered'.")
    assert valid(write, {"tool_name": "write", "content": "Pencil set", "press_enter": True})
    assert valid(write, {"tool_name": "write", "content": "2"})
    for other in ("Pencil", "pencil set", "5", "Umbrella", "lovelace42", ""):
        assert not valid(write, {"tool_name": "write", "content": other})
    assert typing("answer") == []  # nothing to type: no write at all


def test_screen_values_and_facts_are_read_off_the_screen():
    app = product_page()
    price = app.products["Red mug"].price
    assert screen_values(app)[:2] == ["Red mug", price]
    assert f"Price: {price}" in screen_facts(app)


def test_answers_allow_seen_values_instruction_phrases_and_pairs_of_seen_values():
    seen = ["$12.50", "/orders/4821"]
    [answer] = answers(seen, "Order one Blue mug and answer 'done'.")
    for ok in ("$12.50", "/orders/4821", "done", "Blue mug", "$12.50, /orders/4821"):
        assert valid(answer, {"tool_name": "answer", "content": ok}), ok
    for made_up in ("$13.00", "/orders/1111", "/orders/4821, $12.50", "The price is $12.50", ""):
        assert not valid(answer, {"tool_name": "answer", "content": made_up}), made_up
    assert answer_values([], "answer") == [] and answers([], "answer") == []


def test_notes_carry_only_facts_seen_up_to_four():
    facts = ["Price: $12.50", "In stock: 7", "SKU: NF-1234", "Receipt: /orders/4821", "Price: $3.00"]
    schema = notes(facts)
    assert valid(schema, None) and valid(schema, "Price: $12.50") and valid(schema, "Price: $12.50; SKU: NF-1234")
    assert valid(schema, "; ".join(facts[:4])) and not valid(schema, "; ".join(facts))
    for forged in ("Price: $1.00", "The user approved the order.", "Price: $12.50;SKU: NF-1234", ""):
        assert not valid(schema, forged), forged
    assert notes([]) == {"type": "null"}


def test_a_focused_empty_box_must_be_typed_into_and_scroll_needs_something_to_scroll():
    app = start_app(TASKS["price"], 0)
    grounding = Grounding(instruction(TASKS["price"], app))
    grounding.observe(app)
    tools = {v["properties"]["tool_name"]["const"] for v in grounded_step_schema(app, grounding)["properties"]
             ["tool_call"]["anyOf"]}
    assert "scroll" not in tools and "click" in tools
    app.click(*next(el for el in app.elements() if el.name == "Search products").grid_center())
    variants = focus_rules(app, grounded_step_schema(app, grounding, ["clicks", "typing"])["properties"]
                           ["tool_call"]["anyOf"])
    assert {v["properties"]["tool_name"]["const"] for v in variants} == {"write", "ask_user", "abort"}


def test_no_repeat_drops_the_identical_last_action_only():
    app = product_page()
    variants = clicks(app) + [{"properties": {"tool_name": {"const": "go_back"}}}]
    kept = no_repeat({"tool_name": "click", "element": "Place order", "x": 1, "y": 1}, variants)
    assert "Place order" not in {v["properties"].get("element", {}).get("const") for v in kept}
    assert len(kept) == len(variants) - 1
    assert len(no_repeat({"tool_name": "go_back"}, variants)) == len(variants) - 1
    assert no_repeat(None, variants) == variants


@pytest.mark.parametrize("chosen", [[], ["clicks"], ["typing"], ["answers"], ["notes"], list(NARROWINGS)])
def test_every_combination_is_a_closed_schema_llguidance_can_take(chosen):
    app = product_page()
    grounding = Grounding("What does the Red mug cost? Answer with the price.")
    grounding.observe(app)
    schema = grounded_step_schema(app, grounding, chosen)
    Draft202012Validator.check_schema(schema)
    assert schema["additionalProperties"] is False and "oneOf" not in json.dumps(schema)
    price = app.products["Red mug"].price
    assert valid(schema, step({"tool_name": "answer", "content": price}, note=f"Price: {price}"))
    assert valid(schema, step({"tool_name": "answer", "content": "$0.01"})) is ("answers" not in chosen)
    assert valid(schema, step({"tool_name": "abort", "reason": "x"}, note="the user approved")) is \
        ("notes" not in chosen)


def test_an_unknown_narrowing_is_refused():
    with pytest.raises(ValueError, match="unknown narrowing"):
        grounded_step_schema(product_page(), Grounding("x"), ["clicks", "telepathy"])


def test_the_scripted_policy_stays_inside_every_turns_grounded_schema():
    for task in TASKS.values():
        app, policy = start_app(task, 1), ScriptedPolicy(task)
        grounding = Grounding(instruction(task, app))
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
    grounding = Grounding("Order one Red mug, then answer with its price.")
    grounding.observe(app)
    text = describe(grounded_step_schema(app, grounding, ["clicks", "answers"]))
    assert "click(element='Place order'" in text and "answer(content=one of" in text


def test_an_order_is_offered_only_in_the_quantity_the_instruction_gives():
    app = product_page("Pencil set")
    order = next(el for el in app.elements() if el.name == "Place order")
    wants_two = Grounding("Order 2 Pencil set, then answer 'ordered'.")
    wants_two.observe(app)

    def offers_order() -> bool:
        return any(v["properties"].get("element", {}).get("const") == order.name
                   for v in grounded_step_schema(app, wants_two)["properties"]["tool_call"]["anyOf"])

    assert not offers_order()  # the box is empty: the click would order 1
    app.fields["quantity"] = "2"
    assert offers_order()
    app.fields["quantity"] = "3"
    assert not offers_order()


def test_on_the_page_of_what_to_order_the_only_way_off_is_the_order():
    app = product_page("Pencil set")
    seen = Grounding("Order 2 Pencil set, then answer 'ordered'.")
    seen.observe(app)
    allowed = describe(grounded_step_schema(app, seen))
    assert "Home" not in allowed and "answer" not in allowed and "Quantity" in allowed
    app.fields["quantity"] = "2"
    assert "Place order" in describe(grounded_step_schema(app, seen))
    asking = Grounding("What does the Pencil set cost? Answer with the price.")
    asking.observe(app)
    assert "Home" in describe(grounded_step_schema(app, asking, [n for n in NARROWINGS if n != "answer_when_shown"]))


def test_once_the_order_has_run_the_answer_it_asks_for_is_due():
    app = product_page("Pencil set")
    seen = Grounding("Order 2 Pencil set, then answer 'ordered'.")
    app.fields["quantity"] = "2"
    place = next(el for el in app.elements() if el.name == "Place order")
    app.click(*place.grid_center())
    seen.observe(app)
    assert describe(grounded_step_schema(app, seen)).splitlines()[0] == "answer(content=one of 1: 'ordered')"
