"""A step schema built from the screen: one closed `click` per element on it, its name and centre fixed.

Notebook 03's going-further run sends it each turn in place of the fixed `Step` schema: the model then chooses
*which* element, and the grammar writes the coordinates. `closed_call` is the brick notebook 06's grounded schemas
(`helpers.grounding`) build with too.
"""
from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from helpers.steps import STEP_SCHEMA
from helpers.world.store import CLICKABLE, CampusStore


def closed_call(tool: str, properties: dict[str, Any], required: Iterable[str] | None = None) -> dict[str, Any]:
    """One tool call with nothing left open: these arguments, no others."""
    properties = {"tool_name": {"const": tool}, **properties}
    return {"type": "object", "additionalProperties": False, "properties": properties,
            "required": list(required if required is not None else properties)}


def clicks(app: CampusStore) -> list[dict[str, Any]]:
    """One click per element on this screen, its name and centre fixed."""
    return [closed_call("click", {"element": {"const": el.name}, "x": {"const": el.grid_center()[0]},
                                  "y": {"const": el.grid_center()[1]}})
            for el in app.elements() if el.role in CLICKABLE]


def per_screen_schema(app: CampusStore) -> dict[str, Any]:
    """The Step schema with `click` narrowed to the elements on this screen, each with its coordinates fixed."""
    schema = copy.deepcopy(STEP_SCHEMA)
    schema["$defs"]["ClickArgs"] = {"anyOf": clicks(app)}
    return schema
