"""Each narrowing is a function from the context to JSON Schema; jsonschema rejects every value not in the context."""
import json

import pytest
from jsonschema import Draft202012Validator

from helpers.agent import turn_contract
from helpers.goal import Goal
from helpers.grounding import (ANSWER_VALUES, HANDWRITTEN, MANY, NARROWINGS, Grounding, Screen, allowed_calls,
                               answer_values, answers, clicks, describe, focus_rules, grounded_step_schema, no_repeat,
                               notes, screen_values, typing)
from helpers.loop import execute
from helpers.runtime.dialects import guided_json
from helpers.runtime.strict_subset import subset_problems, to_strict_subset
from helpers.steps import STEP_SCHEMA, Step
from helpers.runtime.concealer import isolated
from helpers.world.store import CATALOG, CampusStore, Product
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
    options = {"anyOf": clicks(app.elements())}
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
    assert typing(Screen.read(app), goal) == []  # no box has the focus: typing would go nowhere
    focus(app, "Password")
    [write] = typing(Screen.read(app), goal)
    assert valid(write, {"tool_name": "write", "content": app.password})
    for other in (app.username, "Red mug", ""):
        assert not valid(write, {"tool_name": "write", "content": other})
    focus(app, "Username")
    [write] = typing(Screen.read(app), goal)
    assert valid(write, {"tool_name": "write", "content": app.username})
    assert not valid(write, {"tool_name": "write", "content": app.password})  # a credential only into its own box


def test_a_box_is_completed_never_typed_into_twice():
    app = product_page("Pencil set")
    focus(app, "Quantity")
    assert [v["properties"]["content"]["const"] for v in typing(Screen.read(app), PENCILS)] == ["2"]
    app.fields["quantity"] = "2"
    assert typing(Screen.read(app), PENCILS) == []  # "22" is no value of the goal


def test_screen_values_and_facts_are_read_off_the_screen():
    app = product_page()
    price = app.products["Red mug"].price
    assert screen_values(app)[:2] == ["Red mug", price]
    assert f"Price: {price}" in Screen.read(app).facts()


def test_answers_allow_seen_values_quoted_phrases_goal_products_and_pairs_of_what_was_asked():
    facts = ["Price: $12.50", "Receipt: /orders/4821", "SKU: NF-1234"]
    seen = ["$12.50", "/orders/4821", "NF-1234"]
    blue = Goal.model_validate({"sign_in": False, "username": None, "password": None,
                                "order": {"product": "Blue mug", "quantity": 1}, "find": []})
    text = "Order one blue mug and answer with the receipt and its price, or 'done'."
    [answer] = answers(answer_values(seen, text, blue, facts))
    for ok in ("$12.50", "/orders/4821", "NF-1234", "done", "Blue mug", "$12.50, /orders/4821", "$12.50, Blue mug"):
        assert valid(answer, {"tool_name": "answer", "content": ok}), ok
    # A pair holds two values that answer what was asked: the SKU, which nobody asked for, is an answer alone.
    for made_up in ("$13.00", "/orders/1111", "/orders/4821, $12.50", "The price is $12.50", "", "$12.50, NF-1234"):
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
    ruled = focus_rules(Screen.read(app), calls(grounded_step_schema(app, grounding)))
    assert {v["properties"]["tool_name"]["const"] for v in ruled} == {"write", "ask_user", "abort"}


def test_no_repeat_drops_the_identical_last_action_only():
    app = product_page()
    variants = clicks(app.elements()) + [{"properties": {"tool_name": {"const": "go_back"}}}]
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
    assert typing(Screen.read(app), three) and not any(
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
    only_clicks = {"properties": {"tool_call": {"anyOf": clicks(app.elements())}}}
    assert allowed_calls(only_clicks) == len(clicks(app.elements()))
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


# --- what a schema built from page or instruction text offers, the client accepts (issue 47) -------------------

TODAYS_CODE = 'Today\u2019s code: caf\u00e9 "42"'


@pytest.mark.parametrize("notice", [TODAYS_CODE, "Code: back\\slash", "Code: new\nline", "Tab\there: 42",
                                    f"{'Long label ' * 7}: 42"])
def test_a_schema_built_from_page_text_offers_only_what_the_turn_accepts(notice):
    """A notice reading `Today's code: cafe "42"` (curly apostrophe, accent, quotes) made the answer enum and the note
    pattern allow what the turn's contract refuses; the governed turn then fell back and aborted."""
    app = product_page()
    app.notices = {("product", "Red mug"): notice}
    grounding = Grounding("What does the Red mug cost? Answer with the price.", PRICE)
    grounding.observe(app)
    schema = grounded_step_schema(app, grounding)
    contract = turn_contract(schema)
    [answer] = [v for v in calls(schema) if v["properties"]["tool_name"]["const"] == "answer"]
    assert app.products["Red mug"].price in answer["properties"]["content"]["enum"]
    for value in answer["properties"]["content"]["enum"]:
        assert contract.validate(step({"tool_name": "answer", "content": value})) == [], value
    for note in [notice, *grounding.facts, *(f"{fact}; {notice}" for fact in grounding.facts)]:
        written = step({"tool_name": "abort", "reason": "x"}, note=note)
        assert not valid(schema, written) or contract.validate(written) == [], note


def test_a_click_is_offered_only_on_an_element_a_step_can_name():
    app = CampusStore(0)
    app.signed_in, app.page = True, "results"
    odd = ["Caf\u00e9 cr\u00e8me", 'Mug "XL"', "Back\\slash mug", "A mug " * 9]
    app.products = {**{name: Product(name, "$3.00", 4, "NF-1000") for name in odd}, **app.products}
    offered = [v["properties"]["element"]["const"] for v in clicks(app.elements())]
    assert "Home" in offered and not any(name in element for name in odd for element in offered)
    for variant in clicks(app.elements()):
        Step.model_validate(step({name: spec["const"] for name, spec in variant["properties"].items()}))


def after_every_product_page(task_id: str) -> tuple[CampusStore, Grounding]:
    """A task's app and grounding once every product of the catalogue has been shown, and the list of them all: as
    many values as this store can show."""
    task = TASKS[task_id]
    app = start_app(task, 0)
    grounding = Grounding(instruction(task, app), goal_of(task, app))
    app.page, app.subject = "results", ""
    for offset in range(0, len(CATALOG), 7):
        app.offset = offset
        grounding.observe(app)
    app.offset = 0
    for name in CATALOG:
        app.page, app.subject = "product", name
        grounding.observe(app)
    return app, grounding


def answer_enum(schema: dict) -> list[str]:
    return next(v["properties"]["content"]["enum"] for v in calls(schema)
                if v["properties"]["tool_name"]["const"] == "answer")


@pytest.mark.parametrize("task_id", ["price", "receipt_then_price", "cheaper", "sku"])
def test_the_answer_enum_stays_within_every_servers_limits_after_every_product_page(task_id):
    """Pairs of every two values seen made 1,431 answers (31 KB of schema) after the catalogue's product pages: the
    embedded server refused the enum with a 400 and OpenAI's strict rewrite fell back to strict: false."""
    from helpers.runtime.dialects import Constraint
    from helpers.server.guidance import MAX_ENUM_VALUES, check_limits

    app, grounding = after_every_product_page(task_id)
    schema = grounded_step_schema(app, grounding)
    values = answer_enum(schema)
    assert len(values) <= min(ANSWER_VALUES, MAX_ENUM_VALUES)
    check_limits(Constraint("json_schema", schema, "schema"))
    assert subset_problems(to_strict_subset(schema)) == []
    assert guided_json("response_format", schema)["response_format"]["json_schema"]["strict"] is True
    prices = {app.products[name].price for name in CATALOG}
    assert prices <= set(values)  # every value seen is still an answer


def test_past_the_limit_pairs_are_left_out_and_then_the_answer_is_left_free():
    prices = [f"${i}.50" for i in range(200)]
    values = answer_values(prices, "Answer with each price.", None, [f"Price: {p}" for p in prices])
    assert values == prices  # 19,900 pairs: none of them, every price
    assert answer_values(prices[:20], "Answer with each price.", None, [f"Price: {p}" for p in prices[:20]]) \
        == [*prices[:20], *(f"{a}, {b}" for i, a in enumerate(prices[:20]) for b in prices[i + 1:20])]
    many = [f"${i}.00" for i in range(ANSWER_VALUES + 1)]
    assert answers(many) == [STEP_SCHEMA["$defs"]["AnswerArgs"]]  # no enum longer than servers take: free text


def test_a_groundings_repr_shows_no_password_not_even_one_no_goal_has_confirmed():
    instruction_ = "Sign in with username ada and password zebra-quartz-77, then answer 'done'."
    goal = Goal.model_validate({"sign_in": True, "username": "ada", "password": "Unregistered-9",
                                "order": None, "find": []})
    grounding = Grounding(instruction_, goal, last_call={"tool_name": "write", "content": "zebra-quartz-77"})
    with isolated():  # hidden by the repr itself, not because a test registered either password earlier
        shown = repr(grounding)
    assert "zebra-quartz-77" not in shown and "Unregistered-9" not in shown
    assert shown.startswith("Grounding(goal=") and "username='ada'" in shown


# A fact for each character a note may hold that is not a letter or a digit.
PUNCTUATION_FACTS = [f"Fact{char}: x{char}1" for char in " !#$%&'()*+,-./:;<=>?@[]^_`{|}~"]


def test_a_note_pattern_matches_its_facts_as_written_in_python_and_in_llguidance():
    note = notes(PUNCTUATION_FACTS)
    for fact in PUNCTUATION_FACTS:
        assert valid(note, fact) and llguidance_accepts(note, fact), fact
    assert not valid(note, "Fact!: x?1") and not llguidance_accepts(note, "Fact!: x?1")
