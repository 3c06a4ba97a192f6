"""Grounded schemas: the `Step` schema narrowed, each turn, to what the context can back up, and no further.

Each narrowing is a plain function from the context (the screen, the user's confirmed goal, the values seen so
far) to a piece of JSON Schema, and `grounded_step_schema` puts the pieces together. With guided decoding the
model cannot leave them. The default narrowings are constraints: each removes what the context cannot back up
(a click on nothing, a phrase nobody asked to type, an answer never seen, an order nobody asked for) and none
chooses among what it can. When to answer, which value is the answer and which way to go are the model's.

| narrowing       | from                  | the model may then only                                               |
|-----------------|-----------------------|-----------------------------------------------------------------------|
| `clicks`        | the screen            | click an element that is there, at its centre                        |
| `typing`        | the goal, the screen  | type into the focused box a value of the goal that fits it (a credential only into its own box) |
| `answers`       | screens seen, the instruction | answer with a value seen, a phrase the user quoted, a product the goal names, or two of the values that answer what was asked |
| `notes`         | screens seen          | note null, or up to four facts seen ("Price: $12.50"), joined by "; " |
| `moves`         | the screen            | scroll only where there is more to see, go back only where there is a page to go back to |
| `named_effects` | the app, the goal     | press a button (or Enter) that cannot be undone only when the goal asks for what the app says it would do |

What a narrowing takes from a page or the instruction (a value, an element's name, a fact) it offers only where
the field it fills accepts it (`helpers.contract.fits`: plain text, short enough): otherwise the server would allow
what the client then refuses. Each turn reads the screen once (`Screen`), and every narrowing reads that reading.

`HANDWRITTEN` is another tier, labelled for what it is: rules that decide for the model (type whenever a box has
the focus, never the same action twice, never straight back, answer as soon as the asked fact shows, leave an
ordered product's page only by ordering, ask or stop only after a refusal). Notebook 06 runs them once, as the
warning they are: the rate they reach is the rules' author's, not the model's.
"""
from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from helpers.contract import ANSWER_MAX_LENGTH, fits
from helpers.goal import Goal
from helpers.instruction import passwords, quoted
from helpers.runtime.schema_tree import resolve
from helpers.runtime.strict_subset import BIG_ENUM
from helpers.screen_schema import clicks, closed_call
from helpers.steps import NOTE_MAX_LENGTH, STEP_SCHEMA, TOOL_MODELS
from helpers.runtime.concealer import conceal, concealing
from helpers.world.store import CampusStore, Element

NARROWINGS = ("clicks", "typing", "answers", "notes", "moves", "named_effects")
HANDWRITTEN = ("focus", "no_repeat", "no_backtrack", "fields", "relevance", "order_first", "answer_when_shown",
               "stuck_intents")
VALUE_MAX_LENGTH = 30  # a price, a count, a SKU, a receipt URL, a product name; not a sentence
# The most values an answer's `enum` lists. The embedded server takes 1,000 in one enum, OpenAI 1,000 across a
# schema and, past BIG_ENUM (250) in one enum, 15,000 characters of them. 250 values of at most 62 characters (two
# values and ", ") keep within all three, and the schema within the server's 32,768 characters.
ANSWER_VALUES = BIG_ENUM
# A count of allowed calls that free text makes too large to list: a value of its own, never confused with None or 0.
MANY: Final = "many"
Count = int | Literal["many"]


@concealing
@dataclass(frozen=True)
class Screen:
    """One reading of the screen: the elements the app shows, asked of the store once, and the app, which says what
    an action would do there. Every narrowing of a turn reads the same reading."""

    app: CampusStore
    elements: list[Element]

    @classmethod
    def read(cls, app: CampusStore) -> Screen:
        return cls(app, app.elements())

    def values(self) -> list[str]:
        """The short values it shows: after 'Label: ', a product link's name and price, a product heading. Only
        plain text (`contract.fits`): what no answer can hold is no value to answer with."""
        values = []
        for el in self.elements:
            if el.role == "link" and " - " in el.name:
                values += el.name.split(" - ", 1)
            elif el.role == "text" and ": " in el.name:
                values.append(el.name.split(": ", 1)[1])
            elif el.role == "heading" and self.app.page == "product":
                values.append(el.name)
        return [v for v in dict.fromkeys(values) if v and fits(v, VALUE_MAX_LENGTH)]

    def facts(self) -> list[str]:
        """The labelled facts it shows, as written there: 'Price: $12.50', 'Receipt: /orders/4821'."""
        return [el.name for el in self.elements
                if el.role == "text" and ": " in el.name and fits(el.name.split(": ", 1)[1], VALUE_MAX_LENGTH)]

    def focused_box(self) -> Element | None:
        return next((el for el in self.elements if el.role == "textbox" and el.target == self.app.focused), None)

    def named(self, name: str) -> Element | None:
        return next((el for el in self.elements if el.name == name), None)


@dataclass
class Grounding:
    """What the narrowings read: the instruction, the goal (confirmed, or as the model read it), the values seen on
    every screen so far, the last call."""

    instruction: str
    goal: Goal | None = None
    seen: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    headings: list[str] = field(default_factory=list)
    pages: list[str] = field(default_factory=list)
    last_call: dict | None = None
    stuck: bool = False  # the last step was refused: rejected by the harness, or not a valid step

    def observe(self, app: CampusStore) -> None:
        """Add the values, the labelled facts and the headings of the screen the agent is shown now."""
        screen = Screen.read(app)
        self.seen = list(dict.fromkeys([*self.seen, *screen.values()]))
        self.facts = list(dict.fromkeys([*self.facts, *screen.facts()]))
        self.headings = list(dict.fromkeys([*self.headings, *(el.name for el in screen.elements
                                                                if el.role == "heading")]))
        self.pages.append(app.url)

    def __repr__(self) -> str:
        """Every field but the instruction, with every password concealed: the store's, the goal's and the
        instruction's, which the concealer knows only once a goal with it is confirmed (notebook 06 shows one)."""
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.name != "instruction")
        secrets = [*passwords(self.instruction), *([self.goal.password] if self.goal and self.goal.password else [])]
        return conceal(f"Grounding({shown})", also=secrets)


def screen_values(app: CampusStore) -> list[str]:
    """The short values the screen `app` shows now (`Screen.values`)."""
    return Screen.read(app).values()


def _free_text(tool: str) -> dict[str, Any]:
    """A tool as `Step` declares it, for tools no narrowing touches."""
    return STEP_SCHEMA["$defs"][TOOL_MODELS[tool].__name__]


def box_values(goal: Goal | None, box: Element) -> list[str]:
    """What may be typed into `box` so that it then holds a value of the goal (the app appends what is typed)."""
    wanted = goal.values_for(box.name) if goal is not None else []
    return list(dict.fromkeys(value[len(box.value):] for value in wanted
                              if value.casefold().startswith(box.value.casefold()) and len(value) > len(box.value)))


def typing(screen: Screen, goal: Goal | None) -> list[dict[str, Any]]:
    """`write` into the focused box, of a goal value that fits it; none when no box has the focus. (A `Goal` holds
    only plain text shorter than a `write`: what it gives can be typed.)"""
    box = screen.focused_box()
    allowed = box_values(goal, box) if box is not None else []
    return [closed_call("write", {"content": {"const": value}, "press_enter": {"type": "boolean"}},
                        ["tool_name", "content"]) for value in allowed]


def spelled_out(instruction: str, goal: Goal | None) -> list[str]:
    """What the user spelled out to answer with: the phrases the instruction quotes, the products the goal names."""
    return list(dict.fromkeys([*quoted(instruction), *(goal.products() if goal is not None else [])]))


def answer_values(seen: list[str], instruction: str, goal: Goal | None = None,
                  facts: Iterable[str] = ()) -> list[str]:
    """What an answer may say: a value seen, a phrase the user spelled out, or two values that can answer the
    instruction together ('/orders/4821, $12.50'), each the value of a fact whose label the instruction mentions or
    a product the goal names. Only what an answer can hold (`contract.fits`).

    Pairs of any two values seen would grow with every screen (1,431 after the catalogue's product pages, more than
    servers take in one enum); pairs of values that answer the instruction stay few. Where singles and pairs are
    still more than ANSWER_VALUES, the pairs are left out: every value seen stays an answer, no two together do."""
    singles = [v for v in dict.fromkeys([*seen, *spelled_out(instruction, goal)]) if fits(v, ANSWER_MAX_LENGTH)]
    parts = list(dict.fromkeys([*relevant(facts, instruction), *(goal.products() if goal is not None else [])]))
    pairs = [f"{a}, {b}" for i, a in enumerate(parts) for b in parts[i + 1:]]
    values = list(dict.fromkeys([*singles, *(pair for pair in pairs if fits(pair, ANSWER_MAX_LENGTH))]))
    return values if len(values) <= ANSWER_VALUES else singles


def answers(values: list[str]) -> list[dict[str, Any]]:
    """`answer` with one of `values` an answer can hold; none when there is none. More than ANSWER_VALUES of them (a
    catalogue far larger than this store's) would be more than servers take: the content is then left as free as
    `Step` leaves it, never cut to a list someone chose."""
    values = [v for v in values if fits(v, ANSWER_MAX_LENGTH)]
    if len(values) > ANSWER_VALUES:
        return [_free_text("answer")]
    return [closed_call("answer", {"content": {"enum": values}})] if values else []


def relevant(facts: list[str], instruction: str) -> list[str]:
    """The values of the facts whose label the instruction mentions: 'Price: $12.50' for 'Answer with the price'."""
    return [fact.split(": ", 1)[1] for fact in facts if _words(_label(fact)) & _words(instruction)]


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)}


def _label(fact: str) -> str:
    return fact.split(": ", 1)[0]


NOTE_FACTS = 4
# What a regular expression gives a meaning to, in ECMA-262 (which JSON Schema's `pattern` follows): escaped, these
# stand for themselves in Python's `re` and in ECMA-262's Unicode mode alike. `re.escape` escapes more (" ", "-",
# "#"), and Unicode mode refuses those escapes.
SYNTAX_CHARACTERS = re.compile(r"[\^$\\.*+?()\[\]{}|/]")


def literal(text: str) -> str:
    """A pattern that matches `text`, as every engine that reads JSON Schema's `pattern` reads it."""
    return SYNTAX_CHARACTERS.sub(r"\\\g<0>", text)


def notes(facts: list[str]) -> dict[str, Any]:
    """`note` is null, or facts seen on screens, as written there, joined by '; ' and no longer than a `Step`'s
    note: a note can only carry forward what a screen showed. A fact no note can hold (outside plain text, or
    longer than a note) is left out."""
    facts = [f for f in facts if fits(f, NOTE_MAX_LENGTH)]
    if not facts:
        return {"type": "null"}
    fact = "(?:" + "|".join(map(literal, facts)) + ")"
    return {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": NOTE_MAX_LENGTH,
                                         "pattern": f"^{fact}(?:; {fact}){{0,{NOTE_FACTS - 1}}}$"}]}


def moves(screen: Screen, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Scroll only where there is more to see; go back only where there is a page to go back to."""
    app = screen.app
    scrollable = any(el.name.endswith("scroll down") for el in screen.elements) or app.offset > 0
    return [v for v in variants if (_tool(v) != "scroll" or scrollable) and (_tool(v) != "go_back" or app.history)]


def _clicked(screen: Screen, variant: dict[str, Any]) -> Element | None:
    name = variant["properties"].get("element", {}).get("const")
    return screen.named(name) if name else None


def irreversible_effects(screen: Screen, variant: dict[str, Any], enter: bool = False) -> list:
    """The effects that cannot be undone which this call would have now, as the app describes them."""
    tool = _tool(variant)
    if tool == "click":
        target = _clicked(screen, variant)
        if target is None:
            return []
        x, y = target.grid_center()
        return [e for e in screen.app.effects_of("click", {"x": x, "y": y}) if e.irreversible]
    if tool == "write" and "const" in variant["properties"].get("content", {}):
        content = variant["properties"]["content"]["const"]
        return [e for e in screen.app.effects_of("write", {"content": content, "press_enter": enter})
                if e.irreversible]
    return []


def named_effects(screen: Screen, goal: Goal | None, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A call whose effect cannot be undone stays only when the goal asks for exactly that effect (an order of its
    product, in its quantity, as the app says the call would place it); Enter in a box, likewise."""
    def asked(effects: list) -> bool:  # without a goal, nothing irreversible was asked for, and nothing else is weighed
        return all(goal is not None and goal.effect_allowed(e)[0] for e in effects)

    kept = []
    for variant in variants:
        if not asked(irreversible_effects(screen, variant)):
            continue
        if _tool(variant) == "write" and not asked(irreversible_effects(screen, variant, enter=True)):
            variant = copy.deepcopy(variant)
            variant["properties"]["press_enter"] = {"const": False}
        kept.append(variant)
    return kept


# --- the hand-written tier: rules that decide for the model ---------------------------------------------------

def fields_rule(screen: Screen, goal: Goal | None, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Click a text box only when the goal has something for it that it lacks."""
    def useful(variant: dict[str, Any]) -> bool:
        target = _clicked(screen, variant) if _tool(variant) == "click" else None
        return target is None or target.role != "textbox" or bool(box_values(goal, target))

    return [v for v in variants if useful(v)]


def focus_rules(screen: Screen, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A focused, empty text box is there to be typed into: nothing else but asking or stopping."""
    box = screen.focused_box()
    if box is not None and not box.value:
        return [v for v in variants if _tool(v) in ("write", "ask_user", "abort")]
    return variants


def order_first(screen: Screen, goal: Goal | None, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """On the page of the product the goal orders, until that order has run, no way off the page but the order
    itself, and no answer yet."""
    app = screen.app
    if goal is None or goal.order is None or app.page != "product" or app.subject != goal.order.product:
        return variants
    if any(e.action == "place_order" and e.key[1] == app.subject for e in app.effects):
        return variants

    def leaves(variant: dict[str, Any]) -> bool:
        if _tool(variant) == "answer":
            return True
        return not irreversible_effects(screen, variant) and destination(screen, variant) is not None

    return [v for v in variants if not leaves(v)] or variants


def shown(screen: Screen, grounding: Grounding) -> list[str]:
    """What this screen shows of what was asked ([] when not everything): a phrase the user quoted, that phrase once
    the goal's order has run, or, once every product of the goal has headed a page seen, a fact here for every
    fact label the instruction mentions (their values)."""
    instruction, goal = grounding.instruction, grounding.goal
    app = screen.app
    texts = [el.name.lower() for el in screen.elements if el.role in ("text", "heading")]
    said = [q for q in quoted(instruction) if any(q.lower() in t for t in texts)]
    if said:
        return said
    ordered = goal is not None and goal.order is not None and any(
        e.key[1:] == (goal.order.product, goal.order.quantity) for e in app.effects if e.action == "place_order")
    if ordered and quoted(instruction):
        return quoted(instruction)
    asked = {_label(f) for f in grounding.facts if _words(_label(f)) & _words(instruction)}
    here = screen.facts()
    all_seen = goal is not None and set(goal.products()) <= set(grounding.headings)
    if asked and asked <= {_label(f) for f in here} and all_seen:
        return relevant(here, instruction)
    return []


def answer_when_shown(screen: Screen, grounding: Grounding, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Once the screen shows what was asked about, answer with it (or ask, or stop)."""
    values = shown(screen, grounding)
    if not values:
        return variants
    return answers(values) + [v for v in variants if _tool(v) in ("ask_user", "abort")]


def no_repeat(last_call: dict | None, variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Not the identical action twice in a row: a click on the same element, or the same argument-less tool."""
    if not last_call:
        return variants
    if last_call.get("tool_name") == "click":
        return [v for v in variants if v["properties"].get("element", {}).get("const") != last_call.get("element")]
    if last_call.get("tool_name") in ("scroll", "go_back"):
        return [v for v in variants if _tool(v) != last_call["tool_name"]]
    return variants


def destination(screen: Screen, variant: dict[str, Any]) -> str | None:
    """Where a click or go_back would lead, read off a copy of the app the way a browser shows a link's address;
    None when the page would not change, or when the call is not one place (a click the `clicks` constraint left
    free may land anywhere, so no one destination is its)."""
    tool = _tool(variant)
    if tool not in ("click", "go_back"):
        return None
    if tool == "click" and not all("const" in variant["properties"].get(axis, {}) for axis in ("x", "y")):
        return None
    app, trial = screen.app, copy.deepcopy(screen.app)
    if tool == "go_back":
        trial.go_back()
    else:
        trial.click(variant["properties"]["x"]["const"], variant["properties"]["y"]["const"])
    return trial.url if trial.url != app.url else None


def no_backtrack(screen: Screen, pages: list[str], variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Not straight back to the page just left, while another way on remains (no ping-pong between two pages)."""
    if len(pages) < 2:
        return variants
    kept = [v for v in variants if destination(screen, v) != pages[-2]]
    moves_left = any(destination(screen, v) for v in kept)
    return kept if moves_left else variants


def _tool(variant: dict[str, Any]) -> str:
    return variant["properties"]["tool_name"]["const"]


def grounded_step_schema(app: CampusStore, grounding: Grounding,
                         narrowings: Iterable[str] = NARROWINGS) -> dict[str, Any]:
    """The `Step` schema for this turn, with the chosen narrowings applied (the constraints by default), each built
    from one reading of the screen."""
    chosen = set(narrowings)
    if unknown := chosen - {*NARROWINGS, *HANDWRITTEN}:
        raise ValueError(f"unknown narrowing {sorted(unknown)}; choose from {', '.join([*NARROWINGS, *HANDWRITTEN])}")
    goal, instruction, screen = grounding.goal, grounding.instruction, Screen.read(app)
    variants = clicks(screen.elements) if "clicks" in chosen else [_free_text("click")]
    variants += typing(screen, goal) if "typing" in chosen else [_free_text("write")]
    variants += [_free_text("scroll"), _free_text("go_back")]
    if "answers" in chosen:
        seen = relevant(grounding.facts, instruction) if "relevance" in chosen else grounding.seen
        variants += answers(answer_values(seen, instruction, goal, grounding.facts))
    else:
        variants.append(_free_text("answer"))
    variants += [_free_text(tool) for tool in ("ask_user", "update_plan", "abort")]
    if "moves" in chosen:
        variants = moves(screen, variants)
    if "named_effects" in chosen:
        variants = named_effects(screen, goal, variants)
    if "fields" in chosen:
        variants = fields_rule(screen, goal, variants)
    if "focus" in chosen:
        variants = focus_rules(screen, variants)
    if "order_first" in chosen:
        variants = order_first(screen, goal, variants)
    if "answer_when_shown" in chosen:
        variants = answer_when_shown(screen, grounding, variants)
    if "stuck_intents" in chosen and not grounding.stuck:
        variants = [v for v in variants if _tool(v) not in ("ask_user", "update_plan", "abort")] or variants
    if "no_repeat" in chosen:
        variants = no_repeat(grounding.last_call, variants)
    if "no_backtrack" in chosen and "clicks" in chosen:
        variants = no_backtrack(screen, grounding.pages, variants)
    # An empty anyOf allows nothing, and engines fail on it (llama.cpp's converter crashed its server); should the
    # narrowings ever leave nothing, stopping is still possible.
    variants = variants or [_free_text("abort")]
    note = notes(grounding.facts) if "notes" in chosen else STEP_SCHEMA["properties"]["note"]
    return {"type": "object", "additionalProperties": False, "required": ["note", "thought", "tool_call"],
            "properties": {"note": note, "thought": STEP_SCHEMA["properties"]["thought"],
                           "tool_call": {"anyOf": variants}}}


def allowed_calls(schema: dict[str, Any]) -> Count:
    """How many distinct tool calls (tool and arguments) a step schema allows; `MANY` when free text or a free
    number is among them, 0 when it allows none. One means the schema, not the model, chose the call."""
    tool_call = schema["properties"]["tool_call"]
    variants = next((tool_call[key] for key in ("anyOf", "oneOf") if key in tool_call), None)
    if variants is None:
        return MANY
    total = 0
    for variant in variants:
        variant = resolve(schema, variant)
        count = 1
        required = set(variant.get("required", []))
        for name, spec in variant.get("properties", {}).items():
            options = _options(resolve(schema, spec))
            if options is MANY:
                return MANY
            count *= options if name in required else options + 1
        total += count
    return total


def _options(spec: dict[str, Any]) -> Count:
    if "const" in spec:
        return 1
    if "enum" in spec:
        return len(spec["enum"])
    if spec.get("type") == "boolean":
        return 2
    if "anyOf" in spec:
        counts = [_options(s) for s in spec["anyOf"]]
        return MANY if MANY in counts else sum(counts)
    if spec.get("type") == "null":
        return 1
    return MANY


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

