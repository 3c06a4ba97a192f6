"""The user's goal, read by the model and confirmed by the user: what an episode may do, in typed fields.

A regular expression cannot read "Get me two of the USB-C cables" or "Never order the Umbrella"; a model can try.
Before the first step, the model fills a `Goal` under guided decoding, grounded the honest way: a product is one
the store sells that the instruction names, a quantity is a number the instruction contains (or one), a credential
is a span of the instruction. The model decides which of those the user meant. The harness then shows the goal to
the user in the app's words ("order 2 x Pencil set; place no other order"), and the user confirms it or not.

From then on the confirmed goal, not the instruction's wording, says what may be typed into which box and which
irreversible action the user asked for: an order outside it is refused without asking. A negation ("don't order
it") is a goal without an order. Nothing on a screen reaches the goal: it is read from the instruction alone,
before the first screen, and never again.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.contract import PLAIN_TEXT, fits
from helpers.instruction import FROM_INSTRUCTION, credentials, numbers, quoted
from helpers.world.effects import Effect
from helpers.runtime.concealer import concealing

Fact = Literal["price", "stock", "SKU", "receipt URL"]
MAX_QUANTITY = 10
SEARCH_BOX, QUANTITY_BOX, USERNAME_BOX, PASSWORD_BOX = "Search products", "Quantity", "Username", "Password"
GOAL_TOKENS = 160  # the longest grounded goal is about 110 tokens
PRODUCT_MAX_LENGTH, CREDENTIAL_MAX_LENGTH = 30, 40
CLOSED = ConfigDict(extra="forbid")


class Order(BaseModel):
    model_config = CLOSED
    product: str = Field(max_length=PRODUCT_MAX_LENGTH, pattern=PLAIN_TEXT)
    quantity: int = Field(ge=1, le=MAX_QUANTITY)


class Lookup(BaseModel):
    model_config = CLOSED
    product: str = Field(max_length=PRODUCT_MAX_LENGTH, pattern=PLAIN_TEXT)
    fact: Fact


@concealing
class Goal(BaseModel):
    """What the user asked for. `order` None means: place no order."""

    model_config = CLOSED
    sign_in: bool
    username: str | None = Field(max_length=CREDENTIAL_MAX_LENGTH, pattern=PLAIN_TEXT)
    password: str | None = Field(max_length=CREDENTIAL_MAX_LENGTH, pattern=PLAIN_TEXT)
    order: Order | None
    find: list[Lookup] = Field(max_length=2)

    def describe(self) -> str:
        """The goal in the app's words, as the user is asked to confirm it and as messages to the model quote it.
        The password is named, never shown, not even in part: the user's answer, and the sign-in, tell whether the
        model read it right."""
        parts = []
        if self.sign_in:
            shown = FROM_INSTRUCTION if self.password else "no password"
            parts.append(f"sign in as {self.username or '(no username)'} with {shown}")
        if self.order is not None:
            parts.append(f"order {self.order.quantity} x {self.order.product}")
        parts += [f"find the {lookup.fact} of {lookup.product}" for lookup in self.find]
        parts.append("place no order" if self.order is None else "place no other order")
        return "; ".join(parts)

    def products(self) -> list[str]:
        return list(dict.fromkeys([*([self.order.product] if self.order else []), *(l.product for l in self.find)]))

    def values_for(self, box: str) -> list[str]:
        """What the user asked to have typed into the box of this name."""
        if box == USERNAME_BOX:
            return [self.username] if self.sign_in and self.username else []
        if box == PASSWORD_BOX:
            return [self.password] if self.sign_in and self.password else []
        if box == QUANTITY_BOX:
            return [str(self.order.quantity)] if self.order is not None else []
        if box == SEARCH_BOX:
            return self.products()
        return []

    def typing_allowed(self, text: str, box: str) -> tuple[bool, str]:
        """Whether typing `text` into `box` is what the confirmed goal asks for, and if not, why not."""
        for secret, own in ((self.password, PASSWORD_BOX), (self.username, USERNAME_BOX)):
            if secret and text.casefold() == secret.casefold() and box != own:
                return False, f"that is the {own.lower()} from your instruction; it goes only into the {own} box"
        allowed = self.values_for(box)
        if text.casefold() not in {value.casefold() for value in allowed}:
            what = ", ".join(repr(v) for v in allowed) if box != PASSWORD_BOX else FROM_INSTRUCTION
            return False, (f"the confirmed goal ({self.describe()}) puts {what or 'nothing'} "
                           f"into the {box} box")
        return True, ""

    def effect_allowed(self, effect: Effect) -> tuple[bool, str]:
        """Whether the confirmed goal asks for this irreversible effect (then the user is still asked to approve)."""
        if effect.action == "place_order" and self.order is not None \
                and effect.key == ("place_order", self.order.product, self.order.quantity):
            return True, ""
        return False, f"{effect.describe()} is not in the confirmed goal ({self.describe()})"


def mentioned(instruction: str, name: str) -> bool:
    """Whether the instruction names this product, in any case, with or without a plural s."""
    words = r"\s+".join(re.escape(word) for word in name.split())
    return re.search(rf"(?<![\w-]){words}(?:e?s)?(?![\w-])", instruction, re.IGNORECASE) is not None


def spans(instruction: str) -> list[str]:
    """The spans a credential may be: each quoted phrase, each word as written (trailing punctuation off), and what
    follows "password" or "username" as `instruction.credentials` reads it, which keeps a "!" or "?" a password
    may end in (`password hunter2!`); the model chooses among them."""
    words = [word.strip(".,;:!?()\"'") for word in instruction.split()]
    return list(dict.fromkeys([*quoted(instruction), *(w for w in words if w), *credentials(instruction)]))


def unreadable(instruction: str) -> list[str]:
    """Why a credential the instruction gives cannot be read into a `Goal`, one reason each, naming no value: it is
    not plain text, or longer than the field. `goal_schema` leaves such a span out, so no reading holds it; this
    is what the goal step tells the user instead."""
    boxes = dict.fromkeys(box for value, box in credentials(instruction).items()
                          if not fits(value, CREDENTIAL_MAX_LENGTH))
    return [f"the {box.lower()} in your instruction is outside plain text (printable ASCII without quotes or "
            f"backslashes) or longer than {CREDENTIAL_MAX_LENGTH} characters, so this agent cannot type it"
            for box in boxes]


def goal_schema(instruction: str, catalogue: Iterable[str]) -> dict[str, Any]:
    """The `Goal` schema grounded in this instruction: products it names, numbers it contains, spans it holds.

    It removes what the instruction cannot back up; among what it can, the model chooses (to order or not, which
    fact, which span is the password). A product or span that its field cannot hold (outside plain text, or too
    long) is left out too: a goal that held it would be refused (`unreadable` says why)."""
    products = [name for name in catalogue if mentioned(instruction, name) and fits(name, PRODUCT_MAX_LENGTH)]
    quantities = sorted({1, *(n for n in numbers(instruction) if 1 <= n <= MAX_QUANTITY)})
    # Where the instruction backs up nothing, the field is null or the list empty: never an empty enum, which
    # allows nothing and which one engine's converter turns into a grammar it cannot parse. The empty list still
    # types its items: OpenAI's strict mode refuses an array without them.
    words = [span for span in spans(instruction) if fits(span, CREDENTIAL_MAX_LENGTH)]
    credential = {"anyOf": [{"type": "null"}, {"enum": words}]} if words else {"type": "null"}
    if not products:
        order, find = {"type": "null"}, {"type": "array", "items": {"type": "null"}, "maxItems": 0}
    else:
        product = {"enum": products}
        order = {"anyOf": [{"type": "null"}, {
            "type": "object", "additionalProperties": False, "required": ["product", "quantity"],
            "properties": {"product": product, "quantity": {"enum": quantities}}}]}
        lookup = {"type": "object", "additionalProperties": False, "required": ["product", "fact"],
                  "properties": {"product": product, "fact": {"enum": list(Fact.__args__)}}}
        find = {"type": "array", "items": lookup, "maxItems": 2}
    return {"type": "object", "additionalProperties": False,
            "required": ["sign_in", "username", "password", "order", "find"],
            "properties": {"sign_in": {"type": "boolean"}, "username": credential, "password": credential,
                           "order": order, "find": find}}


GOAL_PROMPT = """You read a shopper's instruction for an agent that uses the Northfield Campus Store app.
Reply with one JSON object:
- "sign_in": true only if the user asks to sign in or log in,
- "username" and "password": exactly as the user wrote them, else null,
- "order": the product and quantity the user asks to buy, or null when the user asks for no order,
- "find": what to look up, each a product and a fact (price, stock, SKU or receipt URL).

<output_format>
```json
{schema}
```
</output_format>"""


# Two worked readings: a small model imitates far better than it follows instructions (notebook 01). They name
# products and credentials no task uses, and between them every field is both used and left empty. A third, with a
# negation, made the embedded model copy it for every instruction (docs/results.md).
EXAMPLES = [("What is the SKU of the Garden chair? Answer with the SKU.",
             {"sign_in": False, "username": None, "password": None, "order": None,
              "find": [{"product": "Garden chair", "fact": "SKU"}]}),
            ("Sign in as grace with password hopper7, then buy 3 Wall clock.",
             {"sign_in": True, "username": "grace", "password": "hopper7",
              "order": {"product": "Wall clock", "quantity": 3}, "find": []})]


def goal_messages(instruction: str, schema: dict[str, Any]) -> list[dict]:
    examples = [message for text, goal in EXAMPLES for message in (
        {"role": "user", "content": f"Instruction: {text}"}, {"role": "assistant", "content": json.dumps(goal)})]
    return [{"role": "system", "content": GOAL_PROMPT.format(schema=json.dumps(schema, separators=(",", ":")))},
            *examples, {"role": "user", "content": f"Instruction: {instruction}"}]


def refusal_message(instruction: str) -> dict:
    """What goes back to the model when the user does not confirm its goal."""
    return {"role": "user", "content": f"The user did not confirm that goal. Read the instruction again: {instruction}"}
