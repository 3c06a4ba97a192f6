"""What a model call returned, kept one way everywhere: its text, the usage and timings the server reported, why it
stopped, and how long it took.

Every lesson that calls a model (the loop's policy, the ladder's repair, the campus assistant) reads the chat
completion with `Reply.of`, and whatever proposes a step without a model (a script, a replay) returns a `Reply`
too. `usage` is None where the server reported none: never a made-up zero.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from helpers.runtime.concealer import concealing


@concealing
@dataclass
class Reply:
    text: str
    usage: dict | None = None
    timings: dict | None = None  # the embedded server's extension: what guidance and decoding cost
    finish_reason: str | None = None
    seconds: float = 0.0  # how long the call took, when whoever made it timed it

    @classmethod
    def of(cls, completion: Any) -> "Reply":
        """The first choice of an `openai` chat completion."""
        choice = completion.choices[0]
        return cls(choice.message.content or "", completion.usage.model_dump() if completion.usage else None,
                   (completion.model_extra or {}).get("timings"), choice.finish_reason)


def total_usage(usages: list[dict | None]) -> dict | None:
    """The usages of several calls added up; None when any call reported none (never a made-up zero)."""
    if any(usage is None for usage in usages):
        return None
    keys = ("prompt_tokens", "completion_tokens", "total_tokens")
    return {key: sum(usage.get(key) or 0 for usage in usages) for key in keys}
