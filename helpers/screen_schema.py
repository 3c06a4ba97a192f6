"""A step schema built from the screen: one closed `click` per element on it, its name and centre fixed.

Notebook 03's going-further run sends it each turn in place of the fixed `Step` schema: the model then chooses
*which* element, and the grammar writes the coordinates. `closed_call` is the brick notebook 06's grounded schemas
(`helpers.grounding`) build with too.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from helpers.contract import fits
from helpers.steps import ELEMENT_MAX_LENGTH, STEP_SCHEMA
from helpers.world.store import CLICKABLE, CampusStore, Element


def closed_call(tool: str, properties: dict[str, Any], required: Iterable[str] | None = None) -> dict[str, Any]:
    """One tool call with nothing left open: these arguments, no others."""
    properties = {"tool_name": {"const": tool}, **properties}
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": list(required if required is not None else properties)}


def clicks(elements: Iterable[Element]) -> list[dict[str, Any]]:
    """One click per element of this screen (`app.elements()`), its name and centre fixed. An element whose name a
    step's `element` cannot hold (page text outside plain text, or too long) gets none: the step would be refused."""
    return [closed_call("click", {"element": {"const": el.name}, "x": {"const": el.grid_center()[0]},
                                  "y": {"const": el.grid_center()[1]}})
            for el in elements if el.role in CLICKABLE and fits(el.name, ELEMENT_MAX_LENGTH)]


def per_screen_schema(app: CampusStore) -> dict[str, Any]:
    """The Step schema with `click` narrowed to the elements on this screen, each with its coordinates fixed."""
    schema = copy.deepcopy(STEP_SCHEMA)
    schema["$defs"]["ClickArgs"] = {"anyOf": clicks(app.elements())}
    return schema
