"""The Holo3 agent step: one JSON object per step, a flat tool call inside, its tools a discriminated union."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Union

from pydantic import BaseModel, Field

from helpers.contract import ANSWER_MAX_LENGTH, PLAIN_TEXT
from helpers.pydantic_contract import CLOSED, plain_text
from helpers.runtime.paths import DATA

# Every free text is plain (printable ASCII without " or \\) and bounded, so that the longest valid step fits
# in STEP_TOKENS (helpers.bounds counts it): a guided step can always close.
ELEMENT_MAX_LENGTH = 60
WRITE_MAX_LENGTH = 60
THOUGHT_MAX_LENGTH = 100
NOTE_MAX_LENGTH = 80
QUESTION_MAX_LENGTH = 100
PLAN_MAX_LENGTH = 100
REASON_MAX_LENGTH = 100
COORDINATE_MAX = 1000
STEP_TOKENS = 384

# What each tool means to the harness: an action on the app, or one of the four intents that end or steer a run.
IntentKind = Literal["tool_request", "final_answer", "clarification", "plan_update", "abort"]

class ClickArgs(BaseModel):
    """Click an element of the screen at (x, y), on a 0-1000 grid over the screenshot, origin top-left. Clicking
    'Place order' places a real order that cannot be undone: the user is asked to approve it first."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "tool_request"

    tool_name: Literal["click"] = Field(description="The tool: click.")
    element: str = plain_text(ELEMENT_MAX_LENGTH, "The element clicked, as named on screen.")
    x: int = Field(ge=0, le=COORDINATE_MAX, description="Horizontal position: 0 is the left edge, 1000 the right edge.")
    y: int = Field(ge=0, le=COORDINATE_MAX, description="Vertical position: 0 is the top edge, 1000 the bottom edge.")


class WriteArgs(BaseModel):
    """Type text into the element that has the focus. Type only what the user's instruction says; a password
    goes only into the password box."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "tool_request"

    tool_name: Literal["write"] = Field(description="The tool: write.")
    content: str = plain_text(WRITE_MAX_LENGTH, "The text to type.")
    press_enter: bool = Field(default=False, description="Press Enter after typing, for example to submit a search.")


class ScrollArgs(BaseModel):
    """Scroll the page one screen up or down."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "tool_request"

    tool_name: Literal["scroll"] = Field(description="The tool: scroll.")
    direction: Literal["up", "down"] = Field(description="Which way to scroll.")


class GoBackArgs(BaseModel):
    """Go back to the previous page."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "tool_request"

    tool_name: Literal["go_back"] = Field(description="The tool: go_back.")


class AnswerArgs(BaseModel):
    """Give the final answer to the task and stop."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "final_answer"

    tool_name: Literal["answer"] = Field(description="The tool: answer.")
    content: str = plain_text(ANSWER_MAX_LENGTH, "The answer, complete and self-contained.")


class AskUserArgs(BaseModel):
    """Ask the user a question when the task is unclear, instead of guessing. Their reply comes back as the
    tool's output."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "clarification"

    tool_name: Literal["ask_user"] = Field(description="The tool: ask_user.")
    question: str = plain_text(QUESTION_MAX_LENGTH, "One short question for the user.")


class UpdatePlanArgs(BaseModel):
    """Write down the plan for the next steps. It changes nothing on the screen and grants no permission."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "plan_update"

    tool_name: Literal["update_plan"] = Field(description="The tool: update_plan.")
    plan: str = plain_text(PLAN_MAX_LENGTH, "The next steps, in a sentence or two.")


class AbortArgs(BaseModel):
    """Stop without finishing, saying why, when the task cannot or must not be done."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "abort"

    tool_name: Literal["abort"] = Field(description="The tool: abort.")
    reason: str = plain_text(REASON_MAX_LENGTH, "Why the task stops here.")


TOOLS: tuple[type[BaseModel], ...] = (ClickArgs, WriteArgs, ScrollArgs, GoBackArgs, AnswerArgs, AskUserArgs,
                                      UpdatePlanArgs, AbortArgs)

ToolCall = Annotated[
    Union[ClickArgs, WriteArgs, ScrollArgs, GoBackArgs, AnswerArgs, AskUserArgs, UpdatePlanArgs, AbortArgs],
    Field(discriminator="tool_name"),
]


def tool_name(tool: type[BaseModel]) -> str:
    """The name a tool model answers to: the `const` of its `tool_name` field."""
    return tool.model_json_schema()["properties"]["tool_name"]["const"]


TOOL_MODELS: dict[str, type[BaseModel]] = {tool_name(tool): tool for tool in TOOLS}


class Step(BaseModel):
    """One agent step: what to remember, why, and the one tool to call."""

    model_config = CLOSED

    note: str | None = plain_text(
        NOTE_MAX_LENGTH, "Facts later steps need (URLs, IDs, partial answers); null when nothing is new."
    )
    thought: str = plain_text(THOUGHT_MAX_LENGTH, "Why this action, in a sentence or two.")
    tool_call: ToolCall = Field(description="The tool to call, its tool_name next to its arguments.")


STEP_SCHEMA: dict[str, Any] = Step.model_json_schema()

_COORDINATE = {"type": "integer", "minimum": 0, "maximum": COORDINATE_MAX}

HAND_WRITTEN_STEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "note": {"type": ["string", "null"], "maxLength": NOTE_MAX_LENGTH, "pattern": PLAIN_TEXT},
        "thought": {"type": "string", "maxLength": THOUGHT_MAX_LENGTH, "pattern": PLAIN_TEXT},
        "tool_call": {
            "oneOf": [
                {
                    "type": "object",
                    "properties": {
                        "tool_name": {"const": "click"},
                        "element": {"type": "string", "maxLength": ELEMENT_MAX_LENGTH, "pattern": PLAIN_TEXT},
                        "x": _COORDINATE,
                        "y": _COORDINATE,
                    },
                    "required": ["tool_name", "element", "x", "y"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "tool_name": {"const": "write"},
                        "content": {"type": "string", "maxLength": WRITE_MAX_LENGTH, "pattern": PLAIN_TEXT},
                        "press_enter": {"type": "boolean", "default": False},
                    },
                    "required": ["tool_name", "content"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "tool_name": {"const": "scroll"},
                        "direction": {"enum": ["up", "down"]},
                    },
                    "required": ["tool_name", "direction"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {"tool_name": {"const": "go_back"}},
                    "required": ["tool_name"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "tool_name": {"const": "answer"},
                        "content": {"type": "string", "maxLength": ANSWER_MAX_LENGTH, "pattern": PLAIN_TEXT},
                    },
                    "required": ["tool_name", "content"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "tool_name": {"const": "ask_user"},
                        "question": {"type": "string", "maxLength": QUESTION_MAX_LENGTH, "pattern": PLAIN_TEXT},
                    },
                    "required": ["tool_name", "question"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "tool_name": {"const": "update_plan"},
                        "plan": {"type": "string", "maxLength": PLAN_MAX_LENGTH, "pattern": PLAIN_TEXT},
                    },
                    "required": ["tool_name", "plan"],
                    "additionalProperties": False,
                },
                {
                    "type": "object",
                    "properties": {
                        "tool_name": {"const": "abort"},
                        "reason": {"type": "string", "maxLength": REASON_MAX_LENGTH, "pattern": PLAIN_TEXT},
                    },
                    "required": ["tool_name", "reason"],
                    "additionalProperties": False,
                },
            ]
        },
    },
    "required": ["note", "thought", "tool_call"],
    "additionalProperties": False,
}

def _describe(prop: dict[str, Any]) -> str:
    parts = [f"one of {', '.join(prop['enum'])}" if "enum" in prop else prop["type"]]
    if "maxLength" in prop:
        parts.append(f"at most {prop['maxLength']} characters")
    if "minimum" in prop:
        parts.append(f"{prop['minimum']} to {prop['maximum']}")
    if "default" in prop:
        parts.append(f"default {json.dumps(prop['default'])}")
    return ", ".join(parts)


def _render_tool(tool: type[BaseModel]) -> str:
    # Rendered from the JSON schema: the model sees the serialized form, the harness runs the code form.
    schema = tool.model_json_schema()
    props = schema["properties"]
    args = [name for name in props if name != "tool_name"]
    signature = ", ".join(
        name if name in schema.get("required", []) else f"{name}={json.dumps(props[name]['default'])}" for name in args
    )
    lines = [f"- {props['tool_name']['const']}({signature}): {' '.join(schema['description'].split())}"]
    lines += [f"    {name} ({_describe(props[name])}): {props[name]['description']}" for name in args]
    return "\n".join(lines)


def render_tool_list() -> str:
    """The tool list for the system prompt, from the models' docstrings and field descriptions."""
    return "\n".join(_render_tool(tool) for tool in TOOLS)


def dispatch(step: Step, handlers: Mapping[str, Callable[..., str]]) -> str:
    """Run a validated step's tool: the handler named by tool_name gets the other fields as keyword arguments."""
    call = step.tool_call
    if call.tool_name not in handlers:
        raise ValueError(f"unknown tool {call.tool_name!r}: no handler (known: {', '.join(sorted(handlers))})")
    return handlers[call.tool_name](**call.model_dump(exclude={"tool_name"}))


def load_example_steps(path: Path = DATA / "example_steps.jsonl") -> list[dict[str, Any]]:
    """The example steps, each {"id", "step", "valid", "why"}: valid and broken, for the notebook and the tests."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# H Company's example step, word for word from their "Structured outputs" page: notebook 02 shows it to the model.
DOCS_EXAMPLE = {"note": "Submit succeeded; receipt URL is /orders/8421.",
                "thought": "Recording the receipt URL before navigating away.",
                "tool_call": {"tool_name": "click", "element": "Continue button at the bottom right",
                              "x": 932, "y": 880}}
# Notebook 02's one screen: (kind, name, x, y) of each element, on the 0-1000 grid.
LIBRARY_SCREEN = (("link", "Opening hours", 150, 300), ("link", "Study rooms", 150, 360),
                  ("textbox", "Search", 800, 60))


def one_step_prompt(task: str, elements: tuple[tuple[str, str, int, int], ...]) -> tuple[str, str]:
    """The system prompt (the tool list and the documentation's example step) and the user message (the task, then
    the screen, one line per element) of notebook 02's single step."""
    system = ("You are a web agent. Each turn, reply with one step: a note (or null), a thought, and one tool_call.\n"
              f"Tools:\n{render_tool_list()}\n\nExample step:\n{json.dumps(DOCS_EXAMPLE)}")
    screen = [f"[{kind}] {name} (x={x}, y={y})" for kind, name, x, y in elements]
    return system, "\n".join([f"Task: {task}", "<observation>", "Northfield Institute - Library", *screen,
                              "</observation>"])
