"""A scripted reference policy: hand-written rules, no model.

It reads only what the accessibility tree shows (page URL, elements, values, focus),
keeps what it must remember in its `note`, and writes exactly the Holo3 step a good
model would. It solves every task, which tests the app and the loop deterministically
and gives the upper bound in the results table.
"""
from __future__ import annotations

from helpers.contract import fits
from helpers.steps import WRITE_MAX_LENGTH, Step
from helpers.world.store import CampusStore, Element
from helpers.world.tasks import Task


class ScriptedPolicy:
    name = "scripted reference policy (no model)"

    def __init__(self, task: Task):
        self.task = task
        self.facts: dict[str, str] = {}

    def next_step(self, app: CampusStore) -> Step:
        elements = app.elements()
        note = self._remember(app, elements)
        goal = self._goal()
        thought, tool_call = self._act(goal, app, elements)
        return step(note, thought, tool_call)

    # --- memory ------------------------------------------------------------------------------------------

    def _remember(self, app: CampusStore, elements: list[Element]) -> str | None:
        """Note each new fact as the screen writes it ('Price: $21.50'); keep it, keyed by product, for itself."""
        new = {}
        if app.page == "product":
            for el in elements:
                for label in ("Price", "In stock", "SKU"):
                    if el.name.startswith(f"{label}: "):
                        new[f"{label} of {app.subject}"] = el.name
        receipt = next((el.name for el in elements if el.name.startswith("Receipt: ")), None)
        if receipt:
            new["receipt"] = receipt
        new = {k: v for k, v in new.items() if self.facts.get(k) != v}
        self.facts.update(new)
        return "; ".join(new.values()) or None

    def _value(self, key: str) -> str:
        return self.facts[key].split(": ", 1)[1]

    # --- what to do next ---------------------------------------------------------------------------------

    def _goal(self) -> tuple[str, ...]:
        task, facts = self.task, self.facts
        a, b = (task.products + ["", ""])[:2]
        if task.kind == "sign_in":
            return ("answer", "signed in") if facts.get("signed_in") else ("sign_in",)
        if task.signs_in and not facts.get("signed_in"):
            return ("sign_in",)
        if task.kind in ("price", "stock", "sku", "sign_in_then_price"):
            label = {"price": "Price", "stock": "In stock", "sku": "SKU", "sign_in_then_price": "Price"}[task.kind]
            key = f"{label} of {a}"
            return ("answer", self._value(key)) if key in facts else ("visit", a)
        if task.kind == "order":
            return ("answer", "ordered") if "receipt" in facts else ("order", a)
        if task.kind == "order_receipt":
            return ("answer", self._value("receipt")) if "receipt" in facts else ("order", a)
        if task.kind == "receipt_then_price":
            if "receipt" not in facts:
                return ("order", a)
            key = f"Price of {b}"
            return ("answer", f"{self._value('receipt')}, {self._value(key)}") if key in facts else ("visit", b)
        missing = [p for p in (a, b) if f"Price of {p}" not in facts]
        if missing:
            return ("visit", missing[0])
        return ("answer", min((a, b), key=lambda p: float(self._value(f"Price of {p}").lstrip("$"))))

    def _act(self, goal: tuple[str, ...], app: CampusStore, elements: list[Element]) -> tuple[str, dict]:
        if goal[0] == "answer":
            return "I have everything the task asks for.", {"tool_name": "answer", "content": goal[1]}
        if goal[0] == "sign_in":
            return self._sign_in(app, elements)
        product = goal[1]
        if app.page == "product" and app.subject == product:
            if goal[0] == "order":
                return self._order(app, elements)
            return "The facts are on this page; I noted them.", _click(_find(elements, "link", "Home"))
        return self._navigate_to(product, app, elements)

    def _sign_in(self, app: CampusStore, elements: list[Element]) -> tuple[str, dict]:
        if app.signed_in:
            self.facts["signed_in"] = "yes"
            if self.task.kind != "sign_in":
                return self._act(self._goal(), app, elements)
            return "I am signed in.", {"tool_name": "answer", "content": "signed in"}
        # The credentials are the ones the task instruction spells out.
        credentials = {"Username": app.username, "Password": app.password}
        for label in ("Username", "Password"):
            box = _find(elements, "textbox", label)
            if box.value != credentials[label]:
                if app.focused != box.target:
                    return f"The {label} field is empty; I click it first.", _click(box)
                return f"The {label} field has focus; I type into it.", {
                    "tool_name": "write", "content": credentials[label], "press_enter": False}
        return "Both fields are filled; I sign in.", _click(_find(elements, "button", "Sign in"))

    def _order(self, app: CampusStore, elements: list[Element]) -> tuple[str, dict]:
        wanted = str(self.task.quantity)
        box = _find(elements, "textbox", "Quantity")
        if self.task.quantity > 1 and box.value != wanted:
            if app.focused != box.target:
                return "I need a quantity other than 1; I click the Quantity field.", _click(box)
            return "I type the quantity.", {"tool_name": "write", "content": wanted, "press_enter": False}
        return "The quantity is right; I place the order.", _click(_find(elements, "button", "Place order"))

    def _navigate_to(self, product: str, app: CampusStore, elements: list[Element]) -> tuple[str, dict]:
        if app.page == "results":
            link = next((el for el in elements if el.role == "link" and el.name.startswith(f"{product} - ")), None)
            if link:
                return f"The {product} is listed; I open it.", _click(link)
            if any(el.name.endswith("scroll down") for el in elements):
                return f"The {product} is not on screen yet; I scroll down.", {"tool_name": "scroll",
                                                                                 "direction": "down"}
        if app.page == "confirmation":
            return "The order is placed and noted; I continue.", _click(_find(elements, "button", "Continue shopping"))
        if app.page != "home":
            return "I go back to the home page to search.", _click(_find(elements, "link", "Home"))
        if self.task.list_all:
            return "I search with an empty box to list every product.", _click(_find(elements, "button", "Search"))
        search = _find(elements, "textbox", "Search products")
        if app.focused != search.target:
            return f"I will search for the {product}; first I click the search box.", _click(search)
        return f"The search box has focus; I search for {product}.", {
            "tool_name": "write", "content": product, "press_enter": True}


def step(note: str | None, thought: str, tool_call: dict) -> Step:
    """The step for this call; where it would type a value no step can carry (a password outside plain text), an
    abort that says why: the script's path ends there."""
    if tool_call["tool_name"] == "write" and not fits(tool_call["content"], WRITE_MAX_LENGTH):
        thought, tool_call = "What I must type cannot be written in a step.", {
            "tool_name": "abort", "reason": "a value to type is outside plain text, or too long for a step"}
    return Step.model_validate({"note": note, "thought": thought, "tool_call": tool_call})


def _find(elements: list[Element], role: str, name: str) -> Element:
    return next(el for el in elements if el.role == role and el.name == name)


def _click(el: Element) -> dict:
    x, y = el.grid_center()
    return {"tool_name": "click", "element": el.name, "x": x, "y": y}
