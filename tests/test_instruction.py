"""Reading the user's instruction: phrases, names, numbers and credentials, by rules that name no task."""
import pytest

from helpers.instruction import FROM_INSTRUCTION, credentials, names, numbers, phrases, quoted, typing_asked_for
from helpers.world.store import CampusStore

STORE = CampusStore(0)
STORE.password = "lovelace42"  # the store knows its password: from here on it is concealed wherever shown
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


@pytest.mark.parametrize("text, expected", [
    ("Sign in with username ada and password 'open sesame', then answer 'signed in'.",
     {"ada": "Username", "open sesame": "Password"}),
    ("Log in as ada (the password is lovelace42) and answer 'signed in'.", {"ada": "Username", "lovelace42": "Password"}),
    ("Use password: hunter2 to sign in.", {"hunter2": "Password"}),
    ("What does the Red mug cost?", {}),
])
def test_credentials_as_people_write_them(text, expected):
    assert credentials(text) == expected


def test_a_quoted_credential_with_a_space_goes_only_into_its_own_box():
    text = "Sign in with username ada and password 'open sesame', then answer 'signed in'."
    assert typing_asked_for(text, "open sesame", "Password")[0]
    assert not typing_asked_for(text, "open sesame", "Search products")[0]
    assert not typing_asked_for(text, "'open", "Search products")[0]


def test_an_apostrophe_inside_a_word_opens_no_quote():
    assert quoted("Don't order it, just answer 'done'. It's late.") == ["done"]


@pytest.mark.parametrize("text, expected", [
    ("Order 2 Pencil set.", [2]), ("Get me three graph paper pads.", [3]), ("Order one Umbrella.", [1]),
    ("What does the Red mug cost? It was $12.50.", []), ("Sign in with password lovelace42.", []),
])
def test_numbers_in_digits_and_words(text, expected):
    assert numbers(text) == expected


@pytest.mark.parametrize("text,field", [("lovelace42", "Search products"), ("lovelace42", "Username"),
                                        ("hello", "Search products"), ("lovelace42 now", "Search products"),
                                        ("ada", "Password")])
def test_a_refusal_names_the_password_only_as_the_one_from_the_instruction(text, field):
    """The reason goes back to the model and into traces and records: it never carries the password."""
    verdict, why = typing_asked_for(SIGN_IN, text, field)
    assert not verdict and "lovelace42" not in why
    assert FROM_INSTRUCTION in why or "username from your instruction" in why
