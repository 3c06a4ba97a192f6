"""Grounded schemas: the `Step` schema narrowed, each turn, to what the context can back up.

Each narrowing is a plain function from the context (the screen, the user's instruction, the values seen
so far, the last action) to a piece of JSON Schema, and `grounded_step_schema` puts the pieces together.
With guided decoding the model cannot leave them: it clicks only what is on the screen, types only what
the user asked for, and answers (or notes) only values it has seen or phrases the instruction spells out.
None of the rules names a task or an answer; the tighter the schema, the less the model has to know.

| narrowing   | from                   | the model may then only                                        |
|-------------|------------------------|----------------------------------------------------------------|
| `clicks`    | the screen             | click an element that is there, at its centre                  |
| `typing`    | the instruction        | type a phrase of the instruction                               |
| `answers`   | screens seen, instruction | answer with a value seen, a phrase of the instruction, or two seen values together |
| `notes`     | screens seen           | note null, or up to four facts seen ("Price: $12.50"), joined by "; " |
| `focus`     | the screen             | type, when a text box has the focus and is empty; scroll only where there is more to see |
| `no_repeat` | the last action        | do something other than exactly what it just did               |
| `no_backtrack` | the pages seen | not return to the page it has just left, while there is anywhere else to go |
| `fields`    | the screen, the instruction | type into a box only what fits it (a number into a number box, a credential into its own box), and click a box only when something fits it |
| `relevance` | the screen, the instruction | answer with facts whose label the instruction mentions ("the price" -> "Price: $12.50") |
| `named_effects` | the app, the instruction | press a button that cannot be undone only when the instruction names its action and the app says it would do what the instruction spells out ("Order 2 Pencil set" -> "Place order" with 2 in the box) |
| `order_first` | the app, the instruction | on the page of a product the instruction says to order, leave (or answer) only by placing that order |
| `answer_when_shown` | the screen, the instruction | answer (or ask, or stop) once the screen shows what the instruction asks about: a fact it mentions, or its quoted phrase |
| `stuck_intents` | the last turn | ask the user, plan or stop only when the last step was refused (by the harness, or as invalid) |
"""
from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from helpers.instruction import answer_phrases, credentials, names, phrases, orders, quoted
from helpers.loop import clicks, closed_call
from helpers.steps import STEP_SCHEMA, TOOL_MODELS
from helpers.world.effects import Effect
from helpers.world.screen import CampusStore, Element

NARROWINGS = ("clicks", "typing", "answers", "notes", "focus", "no_repeat", "no_backtrack", "fields", "relevance",
              "named_effects", "order_first", "answer_when_shown", "stuck_intents")
VALUE_MAX_LENGTH = 30  # a price, a count, a SKU, a receipt URL, a product name; not a sentence


@dataclass
class Grounding:
    """What the narrowings read: the user's instruction, the values seen on every screen so far, the last call."""

    instruction: str
    seen: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    last_call: dict | None = None
    stuck: bool = False  # the last step was refused: rejected by the harness, or not a valid step

    def observe(self, app: CampusStore) -> None:
        """Add the values, the labelled facts and the headings of the screen the agent is shown now."""
        self.seen = list(dict.fromkeys([*self.seen, *screen_values(app)]))
        self.facts = list(dict.fromkeys([*self.facts, *screen_facts(app)]))
        self.headings = list(dict.fromkeys([*self.headings, *(el.name for el in app.elements()
                                                                if el.role == "heading")]))
        self.pages.append(app.url)


def screen_values(app: CampusStore) -> list[str]:
    """The short values a screen shows: after 'Label: ', a product link's name and price, a product heading."""
    values = []
    for el in app.elements():
        if el.role == "link" and " - " in el.name:
            values += el.name.split(" - ", 1)
        elif el.role == "text" and ": " in el.name:
            values.append(el.name.split(": ", 1)[1])
        elif el.role == "heading" and app.page == "product":
            values.append(el.name)
    return [v for v in dict.fromkeys(values) if v and len(v) <= VALUE_MAX_LENGTH]


def screen_facts(app: CampusStore) -> list[str]:
    """The labelled facts a screen shows, as written there: 'Price: $12.50', 'Receipt: /orders/4821'."""
    return [el.name for el in app.elements()
            if el.role == "text" and ": " in el.name and len(el.name.split(": ", 1)[1]) <= VALUE_MAX_LENGTH]


def _free_text(tool: str) -> dict[str, Any]:
    """A tool as `Step` declares it, for tools no narrowing touches."""
    return STEP_SCHEMA["$defs"][TOOL_MODELS[tool].__name__]


def typing(instruction: str, box: Element | None = None) -> list[dict[str, Any]]:
    """`write` whose content is a phrase of the instruction, or, when `box` is given, only one that fits it,
    with Enter pressed exactly when it is a search box (none when nothing fits)."""
    allowed = fitting(instruction, box) if box is not None else phrases(instruction)
    # A search box is submitted with Enter; in any other box Enter would submit a form half filled in.
    enter = {"const": box.input_type == "search"} if box is not None else {"type": "boolean"}
    return [closed_call("write", {"content": {"enum": allowed}, "press_enter": enter},
                    ["tool_name", "content"])] if allowed else []


def fitting(instruction: str, box: Element) -> list[str]:
    """The phrases of the instruction that fit a text box: the credential meant for it, else a number for a
    number box, else any phrase that is neither a number nor someone else's credential."""
    given = credentials(instruction)
    meant = [value for value, field in given.items() if field.lower() == box.name.lower()]
    if meant or box.input_type == "password":
        return meant
    others = [p for p in phrases(instruction) if p not in given and p not in answer_phrases(instruction)]
    return [p for p in others if p.isdigit() == (box.input_type == "number")]


def focused_box(app: CampusStore) -> Element | None:
    return next((el for el in app.elements() if el.role == "textbox" and el.target == app.focused), None)


def fields_rule(app: CampusStore, instruction: str, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Type only into a focused, empty box, only what fits it; click a box only when something fits it that it
    lacks."""
    box = focused_box(app)
    kept = []
    for variant in variants:
        tool = _tool(variant)
        if tool == "write":  # the app appends what is typed: only an empty box is worth typing into
            kept += typing(instruction, box) if box is not None and not box.value else []
            continue
        target = _clicked(app, variant)
        if tool == "click" and target is not None and target.role == "textbox":
            if not set(fitting(instruction, target)) - {target.value}:
                continue
        kept.append(variant)
    return kept


def _clicked(app: CampusStore, variant: dict[str, Any]) -> Element | None:
    name = variant["properties"].get("element", {}).get("const")
    return next((el for el in app.elements() if el.name == name), None) if name else None


def answer_values(seen: list[str], instruction: str) -> list[str]:
    """What an answer may say: a value seen, a phrase of the instruction, or two seen values together."""
    pairs = [f"{a}, {b}" for i, a in enumerate(seen) for b in seen[i + 1:]]
    return list(dict.fromkeys([*seen, *phrases(instruction), *pairs]))


def answers(seen: list[str], instruction: str) -> list[dict[str, Any]]:
    allowed = answer_values(seen, instruction)
    return [closed_call("answer", {"content": {"enum": allowed}})] if allowed else []


def relevant(facts: list[str], instruction: str) -> list[str]:
    """The values of the facts whose label the instruction mentions: 'Price: $12.50' for 'Answer with the price'."""
    return [fact.split(": ", 1)[1] for fact in facts if _words(_label(fact)) & _words(instruction)]


NOTE_FACTS = 4


def notes(facts: list[str]) -> dict[str, Any]:
    """`note` is null, or facts seen on screens, as written there, joined by '; ': a note can only carry forward
    what a screen showed."""
    if not facts:
        return {"type": "null"}
    fact = "(?:" + "|".join(re.escape(f) for f in facts) + ")"
    return {"anyOf": [{"type": "null"},
                      {"type": "string", "pattern": f"^{fact}(?:; {fact}){{0,{NOTE_FACTS - 1}}}$"}]}


def focus_rules(app: CampusStore, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A focused, empty text box is there to be typed into; scrolling only where there is more to see."""
    focused = next((el for el in app.elements() if el.role == "textbox" and el.target == app.focused), None)
    if focused is not None and not focused.value:
        return [v for v in variants if _tool(v) in ("write", "ask_user", "abort")]
    scrollable = any(el.name.endswith("scroll down") for el in app.elements()) or app.offset > 0
    return [v for v in variants if (_tool(v) != "scroll" or scrollable) and (_tool(v) != "go_back" or app.history)]


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)}


def named_effects(app: CampusStore, instruction: str, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A click whose effect cannot be undone stays only when the instruction names it (shares a word with it)
    and the effect, as the app describes it, is what the instruction spells out: an order of the product it
    names, in the quantity it gives ("Order 2 Pencil set" -> not with 1 in the Quantity box)."""
    def named(variant: dict[str, Any]) -> bool:
        target = _clicked(app, variant)
        if _tool(variant) != "click" or target is None:
            return True
        x, y = target.grid_center()
        irreversible = [e for e in app.effects_of("click", {"x": x, "y": y}) if e.irreversible]
        if not irreversible:
            return True
        return bool(_words(target.name) & _words(instruction)) and all(spelled_out(e, instruction) for e in irreversible)

    return [v for v in variants if named(v)]


def order_first(app: CampusStore, instruction: str, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """On the page of a product the instruction says to order, until that order has run, no way off the page
    but the order itself, and no answer yet: an agent that wanders off has to find its way back."""
    if app.page != "product" or app.subject not in orders(instruction):
        return variants
    if any(e.action == "place_order" and e.key[1] == app.subject for e in app.effects):
        return variants

    def leaves(variant: dict[str, Any]) -> bool:
        if _tool(variant) == "answer":
            return True
        target = _clicked(app, variant) if _tool(variant) == "click" else None
        if target is not None:
            x, y = target.grid_center()
            if any(e.irreversible for e in app.effects_of("click", {"x": x, "y": y})):
                return False
        return destination(app, variant) is not None

    return [v for v in variants if not leaves(v)] or variants


def ordered_all(app: CampusStore, instruction: str) -> bool:
    """Every order the instruction gives has run, as it spells it out (none given: False)."""
    wanted = orders(instruction)
    placed = {e.key[1:] for e in app.effects if e.action == "place_order"}
    return bool(wanted) and set(wanted.items()) <= placed


def spelled_out(effect: Effect, instruction: str) -> bool:
    """An order is spelled out when the instruction names its product and asks for exactly its quantity."""
    if effect.action != "place_order":
        return True
    _, product, quantity = effect.key
    return orders(instruction).get(product) == quantity


def shown(app: CampusStore, grounding: Grounding) -> list[str]:
    """What this screen shows of what the instruction asks about ([] when not everything): a phrase it quotes
    ('signed in'), the phrase to answer with once every order it gives has run ('ordered'), or, once every name
    it gives has headed a page seen, a fact here for every fact label it mentions (their values)."""
    instruction = grounding.instruction
    texts = [el.name.lower() for el in app.elements() if el.role in ("text", "heading")]
    said = [q for q in quoted(instruction) if any(q.lower() in t for t in texts)]
    if said:
        return said
    if ordered_all(app, instruction) and answer_phrases(instruction):
        return answer_phrases(instruction)  # "Order 2 ..., then answer 'ordered'": the order ran, the answer is due
    asked = {_label(f) for f in grounding.facts if _words(_label(f)) & _words(instruction)}
    here = screen_facts(app)
    all_named_seen = set(names(instruction)) <= set(grounding.headings)
    if asked and asked <= {_label(f) for f in here} and all_named_seen:
        return relevant(here, instruction)
    return []


def _label(fact: str) -> str:
    return fact.split(": ", 1)[0]


def answer_when_shown(app: CampusStore, grounding: Grounding, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Once the screen shows what the instruction asks about, answer with it (or ask, or stop)."""
    values = shown(app, grounding)
    if not values:
        return variants
    kept = [v for v in variants if _tool(v) in ("ask_user", "abort")]
    return answers(values, "") + kept


def no_repeat(last_call: dict | None, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Not the identical action twice in a row: a click on the same element, or the same argument-less tool."""
    if not last_call:
        return variants
    if last_call.get("tool_name") == "click":
        return [v for v in variants if v["properties"].get("element", {}).get("const") != last_call.get("element")]
    if last_call.get("tool_name") in ("scroll", "go_back"):
        return [v for v in variants if _tool(v) != last_call["tool_name"]]
    return variants


def destination(app: CampusStore, variant: dict[str, Any]) -> str | None:
    """Where a click or go_back would lead, read off a copy of the app the way a browser shows a link's address;
    None when the page would not change."""
    tool = _tool(variant)
    if tool not in ("click", "go_back"):
        return None
    trial = copy.deepcopy(app)
    if tool == "go_back":
        trial.go_back()
    else:
        trial.click(variant["properties"]["x"]["const"], variant["properties"]["y"]["const"])
    return trial.url if trial.url != app.url else None


def no_backtrack(app: CampusStore, pages: list[str], variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Not straight back to the page just left, while another way on remains (no ping-pong between two pages)."""
    if len(pages) < 2:
        return variants
    kept = [v for v in variants if destination(app, v) != pages[-2]]
    moves_left = any(destination(app, v) for v in kept)
    return kept if moves_left else variants


def _tool(variant: dict[str, Any]) -> str:
    return variant["properties"]["tool_name"]["const"]


def grounded_step_schema(app: CampusStore, grounding: Grounding,
                         narrowings: Iterable[str] = NARROWINGS) -> dict[str, Any]:
    """The `Step` schema for this turn, with the chosen narrowings applied (all of them by default)."""
    chosen = set(narrowings)
    if unknown := chosen - set(NARROWINGS):
        raise ValueError(f"unknown narrowing {sorted(unknown)}; choose from {', '.join(NARROWINGS)}")
    variants = clicks(app) if "clicks" in chosen else [_free_text("click")]
    variants += typing(grounding.instruction) if "typing" in chosen else [_free_text("write")]
    variants += [_free_text("scroll"), _free_text("go_back")]
    if "answers" in chosen:
        values = relevant(grounding.facts, grounding.instruction) if "relevance" in chosen else grounding.seen
        variants += answers(values, grounding.instruction)
    else:
        variants.append(_free_text("answer"))
    variants += [_free_text(tool) for tool in ("ask_user", "update_plan", "abort")]
    if "fields" in chosen:
        variants = fields_rule(app, grounding.instruction, variants)
    if "focus" in chosen:
        variants = focus_rules(app, variants)
    if "named_effects" in chosen:
        variants = named_effects(app, grounding.instruction, variants)
    if "order_first" in chosen:
        variants = order_first(app, grounding.instruction, variants)
    if "answer_when_shown" in chosen:
        variants = answer_when_shown(app, grounding, variants)
    if "stuck_intents" in chosen and not grounding.stuck:
        variants = [v for v in variants if _tool(v) not in ("ask_user", "update_plan", "abort")] or variants
    if "no_repeat" in chosen:
        variants = no_repeat(grounding.last_call, variants)
    if "no_backtrack" in chosen and "clicks" in chosen:
        variants = no_backtrack(app, grounding.pages, variants)
    note = notes(grounding.facts) if "notes" in chosen else STEP_SCHEMA["properties"]["note"]
    return {"type": "object", "additionalProperties": False, "required": ["note", "thought", "tool_call"],
            "properties": {"note": note, "thought": STEP_SCHEMA["properties"]["thought"],
                           "tool_call": {"anyOf": variants}}}


def describe(schema: dict[str, Any]) -> str:
    """The tool calls a schema allows, one line each: what a reader looks at to see a narrowing's effect."""
    lines = []
    for variant in schema["properties"]["tool_call"]["anyOf"]:
        props = variant.get("properties", {})
        args = ", ".join(f"{name}={_allowed(spec)}" for name, spec in props.items() if name != "tool_name")
        lines.append(f"{props.get('tool_name', {}).get('const', '?')}({args})")
    return "\n".join(lines)


def _allowed(spec: dict[str, Any]) -> str:
    if "const" in spec:
        return repr(spec["const"])
    if "enum" in spec:
        shown = ", ".join(repr(v) for v in spec["enum"][:3])
        return f"one of {len(spec['enum'])}: {shown}{', ...' if len(spec['enum']) > 3 else ''}"
    return f"any {spec.get('type', 'value')}"

