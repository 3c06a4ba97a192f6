"""An agent run, step by step: what the model saw, the step it proposed, what the harness made of it, and the
side effects so far.

`frames_from_turns` reads the turns a run records (notebook 03's `Trajectory.turns`, notebook 06's
`Episode.turns`) by their attributes alone, so this module needs no lesson module. `steps_html` is the static
rendering, every step of it; `step_through` the widget.
"""
from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from helpers.widgets.slider import slider_view
from helpers.runtime.concealer import conceal

NO_HARNESS = "no harness: a valid step runs at once"
NO_LEDGER = "not recorded: no harness keeps a ledger in this loop"


@dataclass
class Frame:
    """One step of a run, as plain data."""

    number: int
    screen_text: str  # the accessibility tree the model read
    screenshot_png: bytes | None  # the screen as a picture, the proposed click marked; None: not recorded
    proposed: str  # the step the model proposed, as JSON (its raw reply when that was not a step)
    result: str  # what went back to the model: the tool's output, or why nothing ran
    verdict: str = NO_HARNESS  # what the harness decided about it
    ledger: list[str] | None = field(default_factory=list)  # every side effect so far, one line each; None: no ledger


def marked_click(png: bytes, call: dict) -> bytes:
    """The screenshot with a red ring where a proposed click lands (Holo3's coordinates: 0 to 1000 each way)."""
    from PIL import Image, ImageDraw

    image = Image.open(io.BytesIO(png)).convert("RGB")
    x, y = int(call["x"] / 1000 * image.width), int(call["y"] / 1000 * image.height)
    ImageDraw.Draw(image).ellipse((x - 16, y - 16, x + 16, y + 16), outline="red", width=5)
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def verdict_text(decision: dict | None) -> str:
    if decision is None:
        return NO_HARNESS
    said = f": {decision['message']}" if decision.get("message") else ""
    return f"allowed{said}" if decision["allowed"] else f"refused ({decision['cause']}){said}"


def effect_line(effect: dict) -> str:
    """One ledger entry in words: what it did, and whether it ran or what blocked it."""
    if effect["executed"]:
        how = "ran, asked for" if effect.get("asked") else "ran, NOT asked for"
    else:
        how = f"blocked: {effect.get('blocked_by')}"
    return f"{effect['action']}: {effect['detail']} ({how})"


def frames_from_turns(turns: Iterable[Any]) -> list[Frame]:
    """Frames from a run's recorded turns (anything with the attributes of `helpers.loop.Turn`). A run that no
    harness governed and that recorded no side effect (notebook 03's loop) has no ledger to show."""
    turns = list(turns)
    kept = any(turn.decision is not None or turn.side_effects for turn in turns)
    frames, ledger = [], []
    for number, turn in enumerate(turns, 1):
        png = base64.b64decode(turn.screenshot_png_b64) if turn.screenshot_png_b64 else None
        call = (turn.step or {}).get("tool_call") or {}
        if png and call.get("tool_name") == "click":
            png = marked_click(png, call)
        ledger = [*ledger, *(conceal(effect_line(effect)) for effect in turn.side_effects)]
        proposed = json.dumps(turn.step, indent=1) if turn.step else turn.raw
        # What the model typed may be a password: every text a frame shows is concealed.
        frames.append(Frame(number, conceal(turn.screen_text), png, conceal(proposed),
                            conceal(turn.error or turn.tool_output), conceal(verdict_text(turn.decision)),
                            ledger if kept else None))
    return frames


def _box(title: str, body: str, colour: str = "#f4f4f4") -> str:
    return (f'<div style="margin:4px 0"><b>{html.escape(title)}</b>'
            f'<pre style="background:{colour};padding:6px;margin:2px 0;white-space:pre-wrap;font-size:12px">'
            f'{html.escape(body)}</pre></div>')


def frame_html(frame: Frame, of: int, picture: bool = False) -> str:
    """One step as inline-styled HTML; with `picture`, the screenshot as an inline image above it."""
    refused = frame.verdict.startswith("refused")
    image = ""
    if picture and frame.screenshot_png:
        image = (f'<img src="data:image/png;base64,{base64.b64encode(frame.screenshot_png).decode()}" '
                 f'width="400" alt="step {frame.number} screenshot">')
    return (f'<div style="font-family:sans-serif;font-size:13px">'
            f'<div style="font-size:14px"><b>step {frame.number} of {of}</b></div>{image}'
            + _box("the screen, as text", frame.screen_text)
            + _box("the step the model proposed", frame.proposed, "#eef3fb")
            + _box("the harness's verdict", frame.verdict, "#fbeaea" if refused else "#eaf6ea")
            + _box("what went back to the model", frame.result)
            + _box("side effects so far", NO_LEDGER if frame.ledger is None else "\n".join(frame.ledger) or "none")
            + "</div>")


def steps_html(frames: list[Frame], title: str = "the run, step by step", pictures: bool = True) -> str:
    """The static rendering: every step, each folded under its own summary line, with its screenshot."""
    folds = "".join(f'<details><summary>step {f.number}: {html.escape(_summary(f))}</summary>'
                    f'{frame_html(f, len(frames), pictures)}</details>' for f in frames)
    return f'<div><b>{html.escape(title)}</b> ({len(frames)} steps){folds}</div>'


def _summary(frame: Frame) -> str:
    """The proposed call on one line (the raw reply's start when it was no step), and the verdict's first word."""
    try:
        said = json.dumps(json.loads(frame.proposed).get("tool_call"))
    except (ValueError, AttributeError):
        said = frame.proposed
    said = " ".join(said.split())
    return f"{said[:90]}{'...' if len(said) > 90 else ''} | {frame.verdict.split(':')[0]}"


def step_through(frames: list[Frame]):
    """The widget: a slider over the steps, the screenshot beside the step's text."""
    return slider_view(len(frames), lambda n: (frame_html(frames[n - 1], len(frames)), frames[n - 1].screenshot_png),
                       "step", pictures=any(f.screenshot_png for f in frames))
