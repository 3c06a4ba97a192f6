"""Side effects: what an action changes in the world, and the ledger that keeps each one from happening twice.

The app describes an action's effect from its own state, never from the model's words: a click on
'Place order' with 2 in the Quantity box is "place an order: 2 x Pencil set, $9.00" whatever the model
said it was doing. The harness asks the user about exactly that, and the ledger remembers what was
attempted, what actually ran, and whether the user asked for it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from helpers.runtime.concealer import concealing

Action = Literal["place_order", "type_text"]


@concealing
@dataclass(frozen=True)
class Effect:
    """One change an action would make. `key` says when two effects are the same one (the same cart)."""

    action: Action
    detail: str
    irreversible: bool
    key: tuple = ()
    text: str = ""
    field: str = ""

    def describe(self) -> str:
        verb = {"place_order": "place an order", "type_text": "type"}[self.action]
        return f"{verb}: {self.detail}"


@concealing
@dataclass
class Entry:
    effect: Effect
    executed: bool = False
    asked: bool = False
    blocked_by: str | None = None

    def record(self) -> dict:
        return {"action": self.effect.action, "detail": self.effect.detail, "executed": self.executed,
                "asked": self.asked, "blocked_by": self.blocked_by}


@concealing
@dataclass
class Ledger:
    """Every side effect an episode attempted, in order: executed or blocked, asked for or not.

    A ledger can outlive an episode: the run after a restart, given the same ledger, does not do again what it
    holds as executed."""

    entries: list[Entry] = field(default_factory=list)

    def executed(self, key: tuple) -> bool:
        return any(entry.executed and entry.effect.key == key for entry in self.entries)

    def blocked(self, effect: Effect, cause: str) -> None:
        self.entries.append(Entry(effect, executed=False, asked=False, blocked_by=cause))

    def ran(self, effect: Effect, asked: bool) -> None:
        self.entries.append(Entry(effect, executed=True, asked=asked))

    def records(self) -> list[dict]:
        return [entry.record() for entry in self.entries]

    def unasked_executed(self) -> int:
        return sum(entry.executed and not entry.asked for entry in self.entries)
