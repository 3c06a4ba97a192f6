"""The Holo3 JSON agent loop: one schema-constrained step per turn, as the Holo3 docs run it.

Each turn: an `<observation>` user message (text, PNG screenshot, text; plus the screen
as text), older screenshots evicted; a model that reads text only gets the same wrapper
with the screen text in place of the screenshot, and nothing to evict. The model is asked for one step
(schema in the system prompt *and* in the request's guided-JSON field; no `tools`),
the step validated with `Step`, its canonical JSON stored as the assistant message, and
the tool's result returned as a user `<tool_output>` message. `answer` ends the run.
"""
from __future__ import annotations

import base64
import copy
import html
import json
import time
from dataclasses import dataclass, field
from typing import Callable, Protocol

from pydantic import ValidationError

from helpers.steps import STEP_SCHEMA, STEP_TOKENS, Step, dispatch, render_tool_list
from helpers.world.passwords import concealing
from helpers.world.store import CampusStore
from helpers.world.tasks import Task, instruction, start_app, succeeded

EVICTED = "[screenshot evicted]"
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


@concealing
@dataclass
class Proposal:
    raw: str
    usage: dict | None = None
    timings: dict | None = None
    finish_reason: str | None = None
    seconds: float = 0.0  # how long the policy took to propose it (the loop times it)


class Policy(Protocol):
    name: str
    sees_images: bool  # whether the observations it reads carry the screenshot

    def propose(self, messages: list[dict], app: CampusStore, schema: dict | None = None) -> Proposal:
        """The next step as raw text; `schema`, when given, is this turn's schema (a model is guided by it)."""


class ModelPolicy:
    """Ask a model through a `helpers.runtime.backends.Connection`, the schema enforced in the backend's own dialect."""

    def __init__(self, conn, schema_for: Callable[[CampusStore], dict] = lambda app: STEP_SCHEMA,
                 temperature: float = 0.0, seed: int | None = 0, max_tokens: int = STEP_TOKENS):
        self.conn, self.schema_for = conn, schema_for
        self.temperature, self.seed, self.max_tokens = temperature, seed, max_tokens
        self.name, self.sees_images = conn.model, conn.profile.sees_images

    def propose(self, messages: list[dict], app: CampusStore, schema: dict | None = None,
                max_tokens: int | None = None) -> Proposal:
        reply = self.conn.client.chat.completions.create(
            model=self.conn.model, messages=messages, temperature=self.temperature, seed=self.seed,
            max_tokens=max_tokens or self.max_tokens,
            **self.conn.profile.guided(schema or self.schema_for(app), name="step"))
        return Proposal(reply.choices[0].message.content or "", reply.usage.model_dump() if reply.usage else None,
                        (reply.model_extra or {}).get("timings"), reply.choices[0].finish_reason)


class ScriptedProposer:
    """Wraps the scripted reference policy (no model) so the loop can run it like a model. It reads the app, not
    the messages: `sees_images` only chooses which observations its conversation shows (screenshots by default,
    as a vision model would get them)."""

    def __init__(self, policy, sees_images: bool = True):
        self.policy, self.name, self.sees_images = policy, policy.name, sees_images

    def propose(self, messages: list[dict], app: CampusStore, schema: dict | None = None) -> Proposal:
        return Proposal(self.policy.next_step(app).model_dump_json())


@concealing
@dataclass
class Turn:
    """One turn as a trace keeps it. The loop of this notebook fills the first part; the governed agent
    (notebook 06) also records the repair ladder's rung, the harness's decision and the side effects."""

    screen_text: str
    screenshot_png_b64: str
    raw: str
    step: dict | None
    tool_output: str
    seconds: float
    usage: dict | None
    finish_reason: str | None
    error: str | None = None
    timings: dict | None = None
    images_in_prompt: int | None = None
    prompt_tokens: int | None = None
    rung: str | None = None
    decision: dict | None = None
    side_effects: list[dict] = field(default_factory=list)
    allowed_calls: int | str | None = None  # calls the turn's schema allowed, "many" with free text; None: not counted


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


@concealing
@dataclass
class Acted:
    """What a turn made of the model's proposal: the step (None when it was not one) and what went back to the
    model; under a harness (notebook 06) also the ladder's rung, the decision, the side effects it recorded, and
    how many calls the turn's schema allowed."""

    step: dict | None
    tool_output: str
    error: str | None = None
    rung: str | None = None
    decision: dict | None = None
    side_effects: list[dict] = field(default_factory=list)
    allowed_calls: int | None = None


def ending(acted: Acted) -> str | None:
    """How a turn ends the run: an answer or an abort that was carried out; None when the run goes on."""
    if acted.step is None or (acted.decision is not None and not acted.decision["allowed"]):
        return None
    return {"answer": "answered", "abort": "aborted"}.get(acted.step["tool_call"]["tool_name"])


def run_turns(policy: Policy, app: CampusStore, messages: list[dict], act: Callable[[Proposal, dict | None], Acted],
              max_steps: int, keep_images: int = 3, screen_text: bool = True,
              schema_for: Callable[[CampusStore], dict | None] = lambda app: None,
              forget: Callable[[list[dict]], list[dict]] = lambda messages: messages,
              halt: Callable[[], str | None] = lambda: None) -> tuple[list[Turn], str]:
    """The loop every episode runs: observe, propose, act, until a step ends the run or the budget does.

    `act(proposal, schema)` validates the proposal, runs it (or not) and extends `messages`; `schema_for(app)` is
    the turn's schema (None: the policy's own); `forget` drops what an older turn's observation no longer needs;
    `halt()` says why no further step may be asked for (a harness's budget). Returns the turns and the outcome:
    answered, aborted, or why the budget stopped the run."""
    turns: list[Turn] = []
    for _ in range(max_steps):
        if why := halt():
            return turns, why
        screenshot, screen = base64.b64encode(app.png()).decode(), app.accessibility_tree()
        # a text-only policy gets the screen as text, and its conversation has no image to trim
        observation = observation_message(app, screen_text, policy.sees_images)
        messages[:] = forget(trim_to_last_n_images([*messages, observation], keep_images))
        schema, images = schema_for(app), count_images(messages)
        started = time.perf_counter()
        proposal = policy.propose(messages, app, schema)
        proposal.seconds = time.perf_counter() - started
        acted = act(proposal, schema)
        turns.append(Turn(screen, screenshot, proposal.raw, acted.step, acted.tool_output,
                          round(time.perf_counter() - started, 3), proposal.usage, proposal.finish_reason,
                          error=acted.error, timings=proposal.timings, images_in_prompt=images,
                          prompt_tokens=(proposal.usage or {}).get("prompt_tokens"), rung=acted.rung,
                          decision=acted.decision, side_effects=acted.side_effects,
                          allowed_calls=acted.allowed_calls))
        if ended := ending(acted):
            return turns, ended
    return turns, BUDGET_EXHAUSTED


def run_episode(policy: Policy, task: Task, seed: int = 0, max_steps: int = 12, keep_images: int = 3,
                screen_text: bool = True, schema: dict = STEP_SCHEMA) -> Trajectory:
    """Run `policy` on `task` until it answers or the step budget runs out."""
    app = start_app(task, seed)
    text = instruction(task, app)
    record = Trajectory(task.id, seed, policy.name, text)
    record.messages = [{"role": "system", "content": system_prompt(schema)}, {"role": "user", "content": f"Task: {text}"}]

    def act(proposal: Proposal, turn_schema: dict | None) -> Acted:
        step, error, result = apply_step(proposal, app, record.messages)
        return Acted(step, result, error)

    record.turns, record.outcome = run_turns(policy, app, record.messages, act, max_steps, keep_images, screen_text)
    if record.outcome == "answered":
        record.answer = record.turns[-1].step["tool_call"]["content"]
    record.success = succeeded(task, app, record.answer)
    return record


def apply_step(proposal: Proposal, app: CampusStore, messages: list[dict]) -> tuple[dict | None, str | None, str]:
    """Validate the proposal, run it, and extend the conversation the way the Holo3 docs do."""
    try:
        step = Step.model_validate_json(proposal.raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        error = f"invalid step: {first['msg']} at {'.'.join(map(str, first['loc'])) or 'the top level'}"
        messages.append({"role": "assistant", "content": proposal.raw})
        messages.append(tool_output_message("error", error))
        return None, error, error
    result = execute(step, app)
    messages.append({"role": "assistant", "content": step.model_dump_json()})
    if step.tool_call.tool_name not in ("answer", "abort"):
        messages.append(tool_output_message(step.tool_call.tool_name, result))
    return step.model_dump(), None, result
