"""Notebook 06's exercises: a narrowing of your own, and a user who approves exactly what they asked for."""
from __future__ import annotations

from jsonschema import Draft202012Validator

from helpers.exercises import Verdict
from helpers.harness import Context, governed_turn
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
        if any(validator.is_valid(partial) for partial in ({}, {"tool_name": "answer"}, {"content": min(prices)})):
            return False, "", "an answer with a key left out passes: list tool_name and content in `required`"
    return True, "the answer can only say a price the screen shows.", hint


class _Watched:
    """The reader's user as the harness meets it, with what each `approve` returned kept for the hint."""

    def __init__(self, user):
        self.user, self.returned = user, []

    def approve(self, effect: Effect):
        self.returned.append(self.user.approve(effect))
        return self.returned[-1]

    def reply(self, question: str):
        return self.user.reply(question)


def _order_through_the_harness(user: _Watched, product: str, quantity: int) -> bool:
    """Whether clicking Place order for `quantity` x `product` ran, governed by a harness that asks `user`. Each
    try gets a new ledger, as after a restart that lost it: only the user's memory stands between it and a repeat."""
    app = CampusStore(SEED)
    app.signed_in, app.page, app.subject = True, "product", product
    app.fields["quantity"] = str(quantity)
    x, y = next(el for el in app.elements() if el.name == "Place order").grid_center()
    step = {"note": None, "thought": "Placing the order.",
            "tool_call": {"tool_name": "click", "element": "Place order", "x": x, "y": y}}
    governed_turn(step, app, Context(effects_of=app.effects_of, user=user), user)
    return bool(app.orders)


WANTED = ("place_order", "Blue mug", 1)
SEED = 5  # a store with 14 Blue mugs: an order of 11 is one the app would place, so the user is asked about it
# Asked in this order, each order with what a careful user answers: another product, another quantity (11, which
# "1 x Blue mug" is part of), the one wanted, then the same again.
ORDERS = [("Blue mug", 2, False), ("Red mug", 1, False), ("Blue mug", 11, False), ("Blue mug", 1, True),
          ("Blue mug", 1, False)]


def careful_user(user_class) -> Verdict:
    """`user_class()`, asked by the harness, lets one order of exactly 1 x Blue mug run, once, and nothing else; it
    never approves from what it is told, only from the effect it is shown. Two users, made one after the other, each
    remember their own approval: a second user approves its own first order (state kept in the class or the notebook
    would carry one user's approval over to the next, or to a re-run of this check)."""
    hint = f"approve only an effect whose key is {WANTED}, and only the first time that user is asked"
    if not isinstance(user_class, type):
        return False, "", hint
    runs = []
    try:
        for _ in range(2):
            user = _Watched(user_class())
            runs.append([_order_through_the_harness(user, product, quantity) for product, quantity, _ in ORDERS])
        reply_ok = isinstance(user_class().reply("May I place the order?"), str)
    except Exception as error:
        return False, "", f"it raised {type(error).__name__}: {error}"
    if odd := [value for value in user.returned if not isinstance(value, bool)]:
        return False, "", f"approve must return True or False; yours returned {odd[0]!r}"
    expected = [went for *_, went in ORDERS]
    for number, ran in enumerate(runs, 1):
        if ran != expected:
            said = ", ".join(f"{quantity} x {product}: {'ran' if went else 'refused'}"
                             for (product, quantity, _), went in zip(ORDERS, ran))
            which = "a first user" if number == 1 else "a second user, made after the first"
            why = " (compare the effect's key, not its words: '1 x Blue mug' is part of '11 x Blue mug')" \
                if ran[2] else " (keep the memory in the instance: self.approved, set in __init__)" \
                if number == 2 else ""
            return False, "", f"{hint}{why}. Through the harness, {which}: {said}"
    if not reply_ok:
        return False, "", "reply(question) must return a string"
    return True, "one order of 1 x Blue mug, once, per user: nothing else gets through.", hint


SOLUTIONS = {"price_answers": "price_answers", "careful_user": "CarefulUser"}


class _AlwaysYes:
    def approve(self, effect):
        return True

    def reply(self, question):
        return "yes"


class _NameOnly(_AlwaysYes):
    def approve(self, effect):
        return "Blue mug" in effect.detail


class _Substring(_AlwaysYes):
    """Reads the effect's words: '1 x Blue mug' is part of '11 x Blue mug'."""

    def __init__(self):
        self.approved = False

    def approve(self, effect):
        if "1 x Blue mug" in effect.detail and not self.approved:
            self.approved = True
            return True
        return False


class _NoMemory(_AlwaysYes):
    def approve(self, effect):
        return effect.key == WANTED


class _SharedMemory(_AlwaysYes):
    """Remembers in the class: the second user, or a re-run, finds the first user's approval."""

    approved = False

    def approve(self, effect):
        if effect.key == WANTED and not _SharedMemory.approved:
            _SharedMemory.approved = True
            return True
        return False


class _OneZero(_AlwaysYes):
    """Right in spirit, but 1 and 0 are not True and False."""

    def __init__(self):
        self.approved = False

    def approve(self, effect):
        if effect.key == WANTED and not self.approved:
            self.approved = True
            return 1
        return 0


WRONG = {
    "price_answers": [lambda app: [], lambda app: [{"type": "object"}],
                      lambda app: [{"type": "object", "properties": {"tool_name": {"const": "answer"},
                                                                     "content": {"type": "string"}}}],
                      lambda app: [{"type": "object", "properties": {"tool_name": {"const": "answer"},
                                                                     "content": {"enum": ["$9.50"]}}}],
                      lambda app: [{"type": "object", "additionalProperties": False, "properties": {
                          "tool_name": {"const": "answer"}, "content": {"enum": sorted(_prices(app))}}}]
                      if _prices(app) else []],  # nothing required: {} passes
    "careful_user": [_AlwaysYes, _NameOnly, _Substring, _NoMemory, _SharedMemory, _OneZero, "CarefulUser"],
}
