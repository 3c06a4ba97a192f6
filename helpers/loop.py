"""The Holo3 JSON agent loop: one schema-constrained step per turn, as the Holo3 docs run it.

Each turn: an `<observation>` user message (for a vision model text, PNG screenshot, text with the screen
text; for a text-only model one string, the screen text in the screenshot's place), the three newest screens kept
(older screenshots evicted, and the screen text that stands in for them for a model that reads text only). The
model is asked for one step (schema in the system prompt *and* in the request's guided-JSON field; no `tools`), the
step validated with `Step` and against the schema the turn sent, its canonical JSON stored as the assistant message,
and the tool's result returned as a user `<tool_output>` message. `answer` ends the run. Notebook 06 runs its
governed agent through this same loop (`run_turns`).
"""
from __future__ import annotations

import base64
import copy
import html
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from pydantic import ValidationError

from helpers.runtime.replies import Reply
from helpers.runtime.strict_subset import read_back
from helpers.steps import STEP_SCHEMA, STEP_TOKENS, Step, dispatch, render_tool_list
from helpers.runtime.concealer import concealing
from helpers.world.store import CampusStore
from helpers.world.tasks import Task, instruction, start_app, succeeded

EVICTED = "[screenshot evicted]"
SCREEN_TEXT = re.compile(r"\n<screen_text>\n.*?\n</screen_text>", re.DOTALL)
BUDGET_EXHAUSTED = "step budget exhausted"
SYSTEM_PROMPT = """You operate the Northfield Campus Store app for a user, one action per turn.
Each turn you see the screen. Reply with one JSON object: "note" (new facts to remember for later steps, \
or null), "thought" (one short sentence), and "tool_call" (one action). Click with x, y on a 0-1000 grid, \
origin top-left: use an element's center. When the task is done, call answer with the result.

Tools:
{tools}

<output_format>
```json
{schema}
```
</output_format>"""


def system_prompt(schema: dict = STEP_SCHEMA) -> str:
    return SYSTEM_PROMPT.format(tools=render_tool_list(), schema=json.dumps(schema, separators=(",", ":")))


def observation_message(app: CampusStore, screen_text: bool = True, image: bool = True) -> dict:
    """The observation: a text wrapper, the PNG screenshot as a data URL, the closing wrapper (the workshop's
    reconstruction of the Holo3 one). Without `image`, for a model that reads text only, one plain string: the same
    wrapper with the screen text in place of the screenshot, whatever `screen_text` says (a text-only server refuses
    image parts, and llama-cpp-python's refuses any list of parts)."""
    screen = f"\n<screen_text>\n{framed(app.accessibility_tree())}\n</screen_text>"
    if not image:
        return {"role": "user", "content": f"<observation>{screen}\n</observation>"}
    data_url = "data:image/png;base64," + base64.b64encode(app.png()).decode()
    closing = f"{screen if screen_text else ''}\n</observation>"
    return {"role": "user", "content": [{"type": "text", "text": "<observation>\n"},
                                        {"type": "image_url", "image_url": {"url": data_url}},
                                        {"type": "text", "text": closing}]}


def framed(text: str) -> str:
    """Text from a page, a tool or a person, made safe to place inside the observation's tags: it can neither close
    `</screen_text>` nor open a `<tool_output>` of its own (pages are untrusted input; a notice may try)."""
    return html.escape(text, quote=False)


def tool_output_message(tool_name: str, result: str) -> dict:
    return {"role": "user", "content": f'<tool_output tool="{framed(tool_name)}">\n{framed(result)}\n</tool_output>'}


def trim_to_last_n_images(messages: list[dict], n: int = 3) -> list[dict]:
    """Keep the n newest screenshots; older image parts become the text part `[screenshot evicted]`."""
    trimmed, seen = copy.deepcopy(messages), 0
    for message in reversed(trimmed):
        if not isinstance(message.get("content"), list):
            continue
        for i in reversed(range(len(message["content"]))):
            if message["content"][i].get("type") == "image_url":
                seen += 1
                if seen > n:
                    message["content"][i] = {"type": "text", "text": EVICTED}
    return trimmed


def evict_screen_text(messages: list[dict], keep: int) -> list[dict]:
    """Drop the screen text of every observation but the `keep` newest, as their screenshots are: for a text-only
    model the screen text is the screenshot, and it goes as one would (with a screenshot, the change lands where the
    eviction already broke the cache)."""
    trimmed, seen = [], 0
    for message in reversed(messages):
        content = message.get("content")
        texts = [content] if isinstance(content, str) else [p.get("text") or "" for p in content or []]
        if message.get("role") == "user" and any(SCREEN_TEXT.search(text) for text in texts):
            seen += 1
            if seen > keep:
                content = SCREEN_TEXT.sub("", content) if isinstance(content, str) else [
                    {**part, "text": SCREEN_TEXT.sub("", part["text"])} if part.get("type") == "text" else part
                    for part in content]
                message = {**message, "content": content}
        trimmed.append(message)
    return trimmed[::-1]


class Policy(Protocol):
    name: str
    sees_images: bool  # whether the observations it reads carry the screenshot

    def propose(self, messages: list[dict], app: CampusStore, schema: dict) -> Reply:
        """The next step as raw text; `schema` is this turn's schema (a model is guided by it)."""


class ModelPolicy:
    """Ask a model through a `helpers.runtime.profiles.Connection`, the turn's schema enforced in the backend's own
    dialect."""

    def __init__(self, conn, temperature: float = 0.0, seed: int | None = 0, max_tokens: int = STEP_TOKENS):
        self.conn, self.temperature, self.seed, self.max_tokens = conn, temperature, seed, max_tokens
        self.name, self.sees_images = conn.model, conn.profile.sees_images

    def propose(self, messages: list[dict], app: CampusStore, schema: dict, max_tokens: int | None = None) -> Reply:
        return Reply.of(self.conn.client.chat.completions.create(
            model=self.conn.model, messages=messages, temperature=self.temperature, seed=self.seed,
            max_tokens=max_tokens or self.max_tokens, **self.conn.profile.guided(schema, name="step")))


class ScriptedProposer:
    """Wraps the scripted reference policy (no model) so the loop can run it like a model. It reads the app, not
    the messages: `sees_images` only chooses which observations its conversation shows (screenshots by default,
    as a vision model would get them)."""

    def __init__(self, policy, sees_images: bool = True):
        self.policy, self.name, self.sees_images = policy, policy.name, sees_images

    def propose(self, messages: list[dict], app: CampusStore, schema: dict | None = None) -> Reply:
        return Reply(self.policy.next_step(app).model_dump_json())


class ReplayPolicy:
    """Plays back raw assistant replies from a JSONL file, one per turn, in order, whatever the screen shows.

    Labelled as what it is: a fixed sequence (for example an adversarial one) to test the harness with.
    Each line is a JSON string holding the raw reply. When the lines run out, the reply is empty.
    """

    name = "replay"
    sees_images = True  # it reads nothing; its conversation shows the screenshots, as a vision model's would

    def __init__(self, replies: list[str]):
        self.replies, self.turn = list(replies), 0

    @classmethod
    def load(cls, path: Path | str) -> "ReplayPolicy":
        lines = Path(path).read_text(encoding="utf-8").splitlines()
        return cls([json.loads(line) for line in lines if line.strip()])

    def propose(self, messages: list[dict], app: CampusStore, schema: dict | None = None) -> Reply:
        text = self.replies[self.turn] if self.turn < len(self.replies) else ""
        self.turn += 1
        return Reply(text)


@concealing
@dataclass
class Turn:
    """One turn as a trace keeps it. What the turn made of the reply comes first (the step, None when the reply was
    not one, and what went back to the model; under notebook 06's harness also the ladder's rung, the decision, the
    side effects and how many calls the turn's schema allowed); the loop adds what was seen and what it cost."""

    step: dict | None
    tool_output: str
    error: str | None = None
    rung: str | None = None
    decision: dict | None = None
    side_effects: list[dict] = field(default_factory=list)
    allowed_calls: int | str | None = None  # calls the turn's schema allowed, "many" with free text; None: not counted
    screen_text: str = ""
    screenshot_png_b64: str = ""
    raw: str = ""
    seconds: float = 0.0
    usage: dict | None = None
    finish_reason: str | None = None
    timings: dict | None = None
    images_in_prompt: int | None = None
    prompt_tokens: int | None = None


@concealing
@dataclass
class Trajectory:
    task_id: str
    seed: int
    policy: str
    instruction: str
    turns: list[Turn] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    answer: str | None = None
    outcome: str = ""
    success: bool = False


def app_handlers(app: CampusStore) -> dict[str, Callable[..., str]]:
    """The code form of each tool: what `dispatch` calls on the app. Only click and write change it; with no
    user in this loop, `ask_user` gets no answer, and `answer` and `abort` end the run."""
    return {"click": lambda element, x, y: app.click(x, y), "write": app.write, "scroll": app.scroll,
            "go_back": app.go_back, "answer": lambda content: "answer recorded",
            "ask_user": lambda question: "no user is listening in this loop",
            "update_plan": lambda plan: "plan noted", "abort": lambda reason: "run aborted"}


def execute(step: Step, app: CampusStore) -> str:
    return dispatch(step, app_handlers(app))


def count_images(messages: list[dict]) -> int:
    return sum(part.get("type") == "image_url" for m in messages if isinstance(m.get("content"), list)
               for part in m["content"])


def ending(turn: Turn) -> str | None:
    """How a turn ends the run: an answer or an abort that was carried out; None when the run goes on."""
    if turn.step is None or (turn.decision is not None and not turn.decision["allowed"]):
        return None
    return {"answer": "answered", "abort": "aborted"}.get(turn.step["tool_call"]["tool_name"])


def run_turns(policy: Policy, app: CampusStore, messages: list[dict], act: Callable[[Reply, dict], Turn],
              max_steps: int, keep_images: int = 3, screen_text: bool = True,
              schema_for: Callable[[CampusStore], dict] = lambda app: STEP_SCHEMA,
              halt: Callable[[], str | None] = lambda: None) -> tuple[list[Turn], str]:
    """The loop every episode runs, notebook 03's and each of notebook 06's: observe, propose, act, until a step
    ends the run or the budget does.

    Each turn the conversation keeps the `keep_images` newest screens (screenshots, and the screen text that stands
    in for them); `schema_for(app)` is the schema the turn sends; `act(reply, schema)` checks the reply against it,
    runs it (or not), extends `messages` and returns the turn; `halt()` says why no further step may be asked for (a
    harness's budget). Returns the turns and the outcome: answered, aborted, or why the budget stopped the run."""
    turns: list[Turn] = []
    for _ in range(max_steps):
        if why := halt():
            return turns, why
        screenshot, screen = base64.b64encode(app.png()).decode(), app.accessibility_tree()
        # a text-only policy gets the screen as text, and its conversation has no image to trim
        observation = observation_message(app, screen_text, policy.sees_images)
        messages[:] = evict_screen_text(trim_to_last_n_images([*messages, observation], keep_images), keep_images)
        schema, images = schema_for(app), count_images(messages)
        started = time.perf_counter()
        reply = policy.propose(messages, app, schema)
        reply.seconds = time.perf_counter() - started
        turn = act(reply, schema)
        turn.screen_text, turn.screenshot_png_b64, turn.raw = screen, screenshot, reply.text
        turn.seconds, turn.usage, turn.finish_reason = round(time.perf_counter() - started, 3), reply.usage, \
            reply.finish_reason
        turn.timings, turn.images_in_prompt = reply.timings, images
        turn.prompt_tokens = (reply.usage or {}).get("prompt_tokens")
        turns.append(turn)
        if ended := ending(turn):
            return turns, ended
    return turns, BUDGET_EXHAUSTED


def run_trajectory(policy: Policy, task: Task, seed: int = 0, max_steps: int = 12, keep_images: int = 3,
                   screen_text: bool = True,
                   schema_for: Callable[[CampusStore], dict] = lambda app: STEP_SCHEMA) -> Trajectory:
    """Run `policy` on `task` until it answers or the step budget runs out; `schema_for(app)` is the schema each
    turn sends (the system prompt keeps the fixed `Step` schema, so its cached prefix stays the same)."""
    app = start_app(task, seed)
    text = instruction(task, app)
    record = Trajectory(task.id, seed, policy.name, text)
    record.messages = [{"role": "system", "content": system_prompt()}, {"role": "user", "content": f"Task: {text}"}]

    def act(reply: Reply, schema: dict) -> Turn:
        step, error, result = apply_step(reply, app, record.messages, schema)
        return Turn(step, result, error)

    record.turns, record.outcome = run_turns(policy, app, record.messages, act, max_steps, keep_images, screen_text,
                                             schema_for)
    if record.outcome == "answered":
        record.answer = record.turns[-1].step["tool_call"]["content"]
    record.success = succeeded(task, app, record.answer)
    return record


def schema_problems(raw: str, schema: dict) -> list[str]:
    """Why `raw` is not a reply `schema` allows ([] when it is): the check guided decoding makes on the server,
    made again on the client, which checks what it asked the server to enforce (a reply that did not come through
    a guided server, a script's or a replay's, meets it here first)."""
    try:
        data = json.loads(read_back(schema, raw))
    except (ValueError, RecursionError) as exc:
        return [f"not JSON: {exc}"]
    error = best_match(Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return []
    where = "/".join(str(part) for part in error.absolute_path) or "the step"
    return [f"{where}: not allowed on this turn ({error.message[:160]})"]


def invalid_step(error: ValidationError) -> str:
    """What goes back to the model for a reply that is not a `Step`: Pydantic's first problem and where it is."""
    first = error.errors()[0]
    return f"invalid step: {first['msg']} at {'.'.join(map(str, first['loc'])) or 'the top level'}"


def apply_step(reply: Reply, app: CampusStore, messages: list[dict],
               schema: dict = STEP_SCHEMA) -> tuple[dict | None, str | None, str]:
    """Validate the reply (a `Step`, and one the turn's `schema` allows), run it, and extend the conversation the way
    the Holo3 docs do: the canonical step as the assistant's message, the tool's result as a user message."""
    try:
        step = Step.model_validate_json(read_back(schema, reply.text))
    except ValidationError as exc:
        error = invalid_step(exc)
    else:
        problems = schema_problems(reply.text, schema)
        error = f"invalid step: {problems[0]}" if problems else None
    if error is not None:
        messages.append({"role": "assistant", "content": reply.text})
        messages.append(tool_output_message("error", error))
        return None, error, error
    result = execute(step, app)
    messages.append({"role": "assistant", "content": step.model_dump_json()})
    if step.tool_call.tool_name not in ("answer", "abort"):
        messages.append(tool_output_message(step.tool_call.tool_name, result))
    return step.model_dump(), None, result
