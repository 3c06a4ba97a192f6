"""Notebook 06's exercises: a narrowing of your own, and a user who approves exactly what they asked for."""
from __future__ import annotations

from jsonschema import Draft202012Validator

from helpers.exercises import Verdict
from helpers.world.effects import Effect
from helpers.world.store import CampusStore


def _screens() -> list[CampusStore]:
    home, product = CampusStore(3), CampusStore(3)
    home.signed_in, home.page = True, "home"
    product.signed_in, product.page, product.subject = True, "product", "Red mug"
    results = CampusStore(5)
    results.signed_in, results.page, results.subject = True, "results", ""  # every product, with its price
    return [home, product, results]


def _prices(app: CampusStore) -> set[str]:
    return {word for el in app.elements() for word in el.name.replace(":", " ").split() if word.startswith("$")}


def price_answers(narrowing) -> Verdict:
    """`narrowing(app)` returns the `answer` variants a price task may use on this screen: one closed object whose
    content is exactly the prices the screen shows, or no variant at all when it shows none."""
    hint = ("return a list with one closed answer object whose content is an enum of exactly the prices "
            "this screen shows (words starting with '$'), or [] when it shows none")
    if not callable(narrowing):
        return False, "", hint
    for app in _screens():
        try:
            variants = narrowing(app)
        except Exception as error:  # a reader's bug is a hint, not a crash
            return False, "", f"it raised {type(error).__name__}: {error}"
        prices = _prices(app)
        if not prices:
            if variants != []:
                return False, "", "on a screen without prices, return [] (no answer is grounded there)"
            continue
        if not isinstance(variants, list) or len(variants) != 1 or not isinstance(variants[0], dict):
            return False, "", hint
        validator = Draft202012Validator(variants[0])
        allowed = {p for p in prices if validator.is_valid({"tool_name": "answer", "content": p})}
        made_up = ["$0.00", "$1,000.00", "free", f"{min(prices)} each", ""]
        if allowed != prices or any(validator.is_valid({"tool_name": "answer", "content": v}) for v in made_up):
            return False, "", "every price on the screen must be allowed, and nothing else"
        if validator.is_valid({"tool_name": "answer", "content": min(prices), "extra": 1}):
            return False, "", "close the object: additionalProperties false"
    return True, "the answer can only say a price the screen shows.", hint


def _order(product: str, quantity: int) -> Effect:
    return Effect("place_order", f"{quantity} x {product}", True, ("place_order", product, quantity))


def careful_user(user_class) -> Verdict:
    """`user_class()` approves one order of exactly 1 x Red mug, once, and nothing else; it never approves from
    what it is told, only from the effect it is shown."""
    hint = "approve only an effect whose key is ('place_order', 'Red mug', 1), and only the first time"
    if not isinstance(user_class, type):
        return False, "", hint
    try:
        cases = [(_order("Red mug", 2), False), (_order("Blue mug", 1), False),
                 (Effect("type_text", "'Red mug' into Search products", False, ("type_text", "Search", "Red mug")),
                  False), (_order("Red mug", 1), True), (_order("Red mug", 1), False)]
        user = user_class()
        verdicts = [user.approve(effect) is True for effect, _ in cases]
        reply_ok = isinstance(user_class().reply("May I place the order?"), str)
    except Exception as error:
        return False, "", f"it raised {type(error).__name__}: {error}"
    if verdicts != [expected for _, expected in cases]:
        return False, "", f"{hint}; yours answered {verdicts} to 2 x Red mug, 1 x Blue mug, typing, 1 x Red mug, again"
    if not reply_ok:
        return False, "", "reply(question) must return a string"
    return True, "one order of 1 x Red mug, once: nothing else gets through.", hint


SOLUTIONS = {"price_answers": "price_answers", "careful_user": "CarefulUser"}


class _AlwaysYes:
    def approve(self, effect):
        return True

    def reply(self, question):
        return "yes"


class _NameOnly(_AlwaysYes):
    def approve(self, effect):
        return "Red mug" in effect.detail


class _NoMemory(_AlwaysYes):
    def approve(self, effect):
        return effect.key == ("place_order", "Red mug", 1)


WRONG = {
    "price_answers": [lambda app: [], lambda app: [{"type": "object"}],
                      lambda app: [{"type": "object", "properties": {"tool_name": {"const": "answer"},
                                                                     "content": {"type": "string"}}}],
                      lambda app: [{"type": "object", "properties": {"tool_name": {"const": "answer"},
                                                                     "content": {"enum": ["$9.50"]}}}]],
    "careful_user": [_AlwaysYes, _NameOnly, _NoMemory, "CarefulUser"],
}
