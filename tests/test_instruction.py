"""Reading the user's instruction: phrases, names, numbers and credentials, by rules that name no task."""
import pytest

from helpers.instruction import credentials, names, orders, phrases, typing_asked_for
from helpers.world.tasks import instruction, load_tasks, start_app

SIGN_IN = "Sign in with username ada and password lovelace42, then answer 'signed in'."


@pytest.mark.parametrize("text,expected", [
    ("What does the Red mug cost? Answer with the price.", ["Red mug"]),
    ("Order 2 Pencil set, then answer 'ordered'.", ["ordered", "Pencil set", "2"]),
    ("Order one Umbrella. Then find the price of the Water bottle.", ["Umbrella", "Water bottle"]),
    ("Which costs less, the Red mug or the Travel mug? Answer with its name.", ["Red mug", "Travel mug"]),
    ("What is the SKU of the Tote bag? Answer with the SKU.", ["Tote bag"]),
    (SIGN_IN, ["signed in", "ada", "lovelace42"]),
    ("answer", []),
])
def test_phrases_are_quotes_names_numbers_and_credentials(text, expected):
    assert phrases(text) == expected


def test_a_name_is_a_capitalised_word_inside_a_sentence_never_the_first_word_or_an_acronym():
    assert names("Click Search with the box empty. Then open the Desk lamp page, see its SKU.") == ["Search",
                                                                                                   "Desk lamp"]


def test_credentials_belong_to_the_box_they_are_named_after():
    assert credentials(SIGN_IN) == {"ada": "Username", "lovelace42": "Password"}


@pytest.mark.parametrize("text,field,asked", [
    ("lovelace42", "Password", True), ("lovelace42", "Search products", False), ("lovelace42", "Username", False),
    ("ada", "Username", True), ("signed in", "Search products", True), ("hello", "Search products", False),
])
def test_typing_is_asked_for_only_from_the_instruction_and_a_credential_only_into_its_box(text, field, asked):
    verdict, why = typing_asked_for(SIGN_IN, text, field)
    assert verdict is asked and (why == "") is asked


def test_every_task_spells_out_what_its_agent_must_type():
    for task in load_tasks():
        app = start_app(task, 0)
        found = phrases(instruction(task, app))
        for product in task.products:
            assert product in found, (task.id, found)
        if "password" in task.instruction:
            assert app.password in found


@pytest.mark.parametrize("instruction, expected", [
    ("Order 2 Pencil set, then answer 'ordered'.", {"Pencil set": 2}),
    ("Order one Umbrella and answer with the receipt URL.", {"Umbrella": 1}),
    ("Order one Blue mug. Then find the price of the Red mug. Answer with the receipt URL and that price.",
     {"Blue mug": 1}),
    ("Order 12 Red mug.", {"Red mug": 12}),
    ("Order the Red mug.", {"Red mug": 1}),
    ("What does the Red mug cost?", {}),
    ("Check my order history for the Red mug.", {}),
])
def test_what_the_instruction_orders_and_how_many(instruction, expected):
    assert orders(instruction) == expected
