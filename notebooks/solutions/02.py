"""Worked solutions for notebook 02's exercises. In the notebook, `%load solutions/02.py` puts this file into a
cell; run it, then run the check cells again."""
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from helpers.steps import IntentKind

CLOSED = ConfigDict(extra="forbid", strict=True)  # as in the notebook: no extra keys, no conversions


# Your turn 1: the same shape as ScrollArgs, with bounds on the integer. Because it is a model like the others,
# it renders into the prompt's tool list and joins the union as it is. The docstring says what the tool does and
# what it leaves alone, since the model chooses tools by their descriptions.
class WaitArgs(BaseModel):
    """Wait for the page to finish loading. It changes nothing on the page."""

    model_config = CLOSED
    intent: ClassVar[IntentKind] = "tool_request"

    tool_name: Literal["wait"] = Field(description="The tool: wait.")
    seconds: int = Field(ge=1, le=10, description="How long to wait, in seconds.")


# Your turn 2: a closed object whose tool_name is a constant. JSON Schema's `integer` already rejects 2.5, "3"
# and true; `minimum` and `maximum` do the rest.
wait_schema = {
    "type": "object",
    "properties": {
        "tool_name": {"const": "wait"},
        "seconds": {"type": "integer", "minimum": 1, "maximum": 10},
    },
    "required": ["tool_name", "seconds"],
    "additionalProperties": False,
}
