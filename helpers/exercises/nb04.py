"""Notebook 04's checks: an order placed through the user, and a repair call guided by the contract's schema.

    from helpers.exercises import check, nb04
    check(*nb04.order_through_the_user(order_replies))
    check(*nb04.guided_repair(guided_repair_for, conn))   # conn: the live model; without it, a recording stand-in
"""
from __future__ import annotations

import json
import secrets
from types import SimpleNamespace
from typing import Any, Callable

from openai.types.chat import ChatCompletion

from helpers.contract import ANSWER_JSON_SCHEMA, ANSWER_TOKENS
from helpers.exercises import Verdict
from helpers.harness import Context, Decision, governed_turn
from helpers.instruction import Instruction
from helpers.ladder import (ANSWER_CONTRACT, STEP_CONTRACT, LadderRecord, Reply, check, climb, model_repair,
                            repair_messages)
from helpers.runtime.profiles import PROFILES, Connection
from helpers.steps import STEP_SCHEMA
from helpers.world.store import CampusStore
from helpers.world.tasks import Task, at_start, instruction, load_tasks, start_app
from helpers.world.users import SimulatedUser

SOLUTIONS = {"order_through_the_user": "order_replies", "guided_repair": "guided_repair_for"}

ORDER_TASK = next(task for task in load_tasks() if task.id == "order")  # "Order 2 Pencil set, ..."
PRODUCT = ORDER_TASK.products[0]
PROSE_REPLY = "The library opens at 10:00 on Saturday and closes at 18:00."
# What each refusal means for this exercise, beside the harness's own words.
AFTER_REFUSAL = {
    "not_approved": "The user approves only the order its task asked for: compare what it was asked about with the "
                    "instruction, and the page with what that order needs",
    "duplicate_side_effect": "A second order: what cannot be undone runs once, and the first order was the one asked "
                             "for",
    "not_asked": "The harness lets an agent type only what the instruction spells out",
}


def order_stage(task: Task = ORDER_TASK, seed: int = 0) -> tuple[CampusStore, Context, SimulatedUser]:
    """As the notebook's `stage` builds it: the task's product page, the harness's context and the task's user."""
    task = at_start(task, "product")
    store = start_app(task, seed)
    user = SimulatedUser(task, store)
    return store, Context(effects_of=store.effects_of, user=user, asked_for=Instruction(instruction(task, store))), user


def played_turn(raw: str, stage: tuple[CampusStore, Context, SimulatedUser]) -> tuple[LadderRecord, Decision, str]:
    """One reply as the notebook's `turn` plays it: the step ladder (no repair), then the harness's pass. Returns the
    ladder's record, the decision and what went back to the model ("" when the reply ended the run)."""
    ladder = climb(raw, STEP_CONTRACT)
    _, decision, said = governed_turn(ladder.data, *stage)
    return ladder, decision, said


def printed(ladder: LadderRecord, decision: Decision, said: str) -> str:
    """The line the notebook's `turn` prints for one reply."""
    verdict = said.splitlines()[1] if said else decision.message
    return f"[{ladder.rung}] {json.dumps(ladder.data['tool_call'])} -> {verdict}"


def what_went_wrong(ladder: LadderRecord, decision: Decision, number: int) -> str | None:
    """What is wrong with one played reply: the ladder could not read it, or the harness refused it."""
    if ladder.fallback_used:
        return (f"reply {number} is not one valid step ({ladder.errors[0]}), so the ladder delivered its fallback, "
                "an abort, and the run ended there")
    if not decision.allowed:
        advice = f". {AFTER_REFUSAL[decision.cause]}" if decision.cause in AFTER_REFUSAL else ""
        return f"reply {number} was refused ({decision.cause}): {decision.message}{advice}"
    return None


def replay(replies: list) -> tuple[str | None, list[str], CampusStore, Context]:
    """Play the replies on a fresh page until one ends the run. Returns the first thing that went wrong (None: nothing
    did), what `turn` prints for each reply played, the store and the context."""
    stage = order_stage()
    store, ctx, _ = stage
    wrong, seen = None, []
    for number, raw in enumerate(replies, 1):
        if not isinstance(raw, str):
            return (f"reply {number} is a {type(raw).__name__}, not the raw text of a step: write each reply with the "
                    "step helper"), seen, store, ctx
        ladder, decision, said = played_turn(raw, stage)
        seen.append(f"{number}. {printed(ladder, decision, said)}")
        wrong = wrong or what_went_wrong(ladder, decision, number)
        if not said:  # an answer or an abort: the run ends here
            if not store.orders:
                wrong = wrong or f"reply {number} ended the run before any order was placed: saying it is not doing it"
            if number < len(replies):
                rest = "the reply" if number + 1 == len(replies) else f"the {len(replies) - number} replies"
                wrong = wrong or f"reply {number} ended the run, so {rest} after it never ran"
            break
    return wrong, seen, store, ctx


def order_through_the_user(replies: Any) -> Verdict:
    """Replayed one by one as the notebook's `turn` plays them (the step ladder, then the harness, the user asked about
    anything irreversible), every reply goes through and the order the task asked for is placed, nothing else."""
    praise = ("the harness asked the user about the order the app described, and the user approved it: the quantity "
              "the instruction names, nothing else.")
    if not isinstance(replies, (list, tuple)) or not replies:
        return False, praise, ("replace None with a list of raw replies, written with the step helper above: the "
                               "moves an agent would make on this page, in order.")
    wrong, seen, store, ctx = replay(list(replies))
    placed = [f"{order.quantity} x {order.product}" for order in store.orders]
    if wrong is None and not placed:
        wrong = (f"every reply went through, but no order was placed (the Quantity box holds "
                 f"{store.fields.get('quantity', '')!r})")
    if wrong is None and placed != [f"{ORDER_TASK.quantity} x {PRODUCT}"]:
        wrong = f"placed: {', '.join(placed)}; the task asked for one order of {ORDER_TASK.quantity} x {PRODUCT}"
    if wrong is None and ctx.ledger.unasked_executed():
        wrong = "a side effect ran that the user did not ask for"
    if wrong is None:
        return True, praise, ""
    return False, praise, f"{wrong}.\nWhat `turn` prints for your replies:\n" + "\n".join(seen)


def _step(tool_call: dict, note: str | None = None) -> str:
    return json.dumps({"note": note, "thought": "One step.", "tool_call": tool_call})


def _click(name: str) -> str:
    x, y = next(el for el in order_stage()[0].elements() if el.name == name).grid_center()
    return _step({"tool_name": "click", "element": name, "x": x, "y": y})


_PLACE = _click("Place order")
_QUANTITY = _click("Quantity")
_TWO = _step({"tool_name": "write", "content": "2"})


def _contains(value: Any, target: Any) -> bool:
    """Whether `target` appears anywhere inside `value` (nested dicts and lists)."""
    if value == target:
        return True
    if isinstance(value, dict):
        return any(_contains(v, target) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(_contains(v, target) for v in value)
    return False


class _RecordingCompletions:
    """Stands in for `client.chat.completions` without a model: records each request, answers a valid object."""

    def __init__(self, calls: list[dict], answers: list[str]):
        self.calls, self.answers = calls, answers

    def create(self, **request: Any) -> Any:
        self.calls.append(request)
        self.answers.append(json.dumps({"status": "answered", "answer": f"Recorded {secrets.token_hex(4)}.",
                                        "category": "campus_hours", "items": [], "missing": [], "sources": []}))
        return ChatCompletion.model_validate({
            "id": "recorded", "object": "chat.completion", "created": 0, "model": "recording-stand-in",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.answers[-1]}}]})


def _recorded(conn: Connection | None) -> tuple[Connection, list[dict], list[str], Callable[[], None]]:
    """A connection whose every chat request is recorded with the text that came back, and how to undo it."""
    calls: list[dict] = []
    answers: list[str] = []
    if conn is None:
        client = SimpleNamespace(chat=SimpleNamespace(completions=_RecordingCompletions(calls, answers)))
        return Connection(client, "recording-stand-in", PROFILES["embedded"]), calls, answers, lambda: None
    completions = conn.client.chat.completions
    own = completions.__dict__.get("create")
    send = completions.create

    def create(**request: Any) -> Any:
        calls.append(request)
        response = send(**request)
        answers.append(response.choices[0].message.content or "")
        return response

    def undo() -> None:
        if own is None:
            del completions.create
        else:
            completions.create = own

    completions.create = create
    return conn, calls, answers, undo


def guided_repair(make: Any, conn: Connection | None = None) -> Verdict:
    """`make(conn)` is a repair function that sends the ladder's messages to `conn`'s model once, guided by the
    answer contract's schema in the backend's dialect, at temperature 0, with room for a whole answer
    (`ANSWER_TOKENS`), and returns what came back as a Reply."""
    praise = "one request, the ladder's own messages, the contract's schema in the guided field, the reply handed back."
    if not callable(make):
        return False, praise, ("replace None with a function that takes conn and returns a repair function: "
                               "messages in, a Reply out.")
    messages = repair_messages(PROSE_REPLY, check(PROSE_REPLY, ANSWER_CONTRACT)[1], ANSWER_CONTRACT)
    live, calls, answers, undo = _recorded(conn)
    try:
        reply = make(live)(messages)
    except Exception as error:
        return False, praise, f"calling your repair function raised {type(error).__name__}: {error}"
    finally:
        undo()
    if len(calls) != 1:
        return False, praise, f"the repair made {len(calls)} requests through conn.client; the ladder repairs once"
    request = calls[0]
    if not (set(live.profile.guided(ANSWER_JSON_SCHEMA)) <= set(request) and _contains(
            {k: v for k, v in request.items() if k != "messages"}, ANSWER_JSON_SCHEMA)):
        return False, praise, ("the request carries no guided-JSON field for the contract's schema: notebook 00 "
                               "showed which method of conn.profile writes it for the active backend.")
    if request.get("messages") != messages or request.get("model") != live.model:
        return False, praise, "send the ladder's own messages to conn.model, unchanged: they hold the repair prompt."
    if request.get("temperature") != 0:
        return False, praise, "repair at temperature 0, so that one broken reply always gets the same repair."
    room = request.get("max_tokens", request.get("max_completion_tokens"))
    if not isinstance(room, int) or room < ANSWER_TOKENS:
        return False, praise, (f"the request allows {room} tokens; a whole answer object needs up to ANSWER_TOKENS "
                               f"({ANSWER_TOKENS}), and a repair cut off before its end is one more broken reply.")
    if not (isinstance(reply, Reply) and reply.text == answers[0]):
        return False, praise, "hand back what the model wrote, as a Reply."
    return True, praise, ""


def _hard_coded(conn: Connection) -> Callable[[list[dict]], Reply]:
    valid = {"status": "answered", "answer": "The library opens at 10:00 on Saturday.", "category": "campus_hours",
             "items": [], "missing": [], "sources": []}
    return lambda messages: Reply(json.dumps(valid))


def _prompt_only(conn: Connection) -> Callable[[list[dict]], Reply]:
    return model_repair(conn)


def _wrong_schema(conn: Connection) -> Callable[[list[dict]], Reply]:
    return model_repair(conn, schema=STEP_SCHEMA)


def _own_messages(conn: Connection) -> Callable[[list[dict]], Reply]:
    repair = model_repair(conn, schema=ANSWER_JSON_SCHEMA)
    return lambda messages: repair([{"role": "user", "content": "Return a valid answer object."}])


def _ignores_reply(conn: Connection) -> Callable[[list[dict]], Reply]:
    repair = model_repair(conn, schema=ANSWER_JSON_SCHEMA)
    return lambda messages: Reply(_hard_coded(conn)(messages).text, repair(messages).usage)


def _too_short(conn: Connection) -> Callable[[list[dict]], Reply]:
    return model_repair(conn, max_tokens=64, schema=ANSWER_JSON_SCHEMA)


def _no_limit(conn: Connection) -> Callable[[list[dict]], Reply]:
    def repair(messages: list[dict]) -> Reply:
        return Reply.of(conn.client.chat.completions.create(model=conn.model, messages=messages, temperature=0,
                                                            **conn.profile.guided(ANSWER_JSON_SCHEMA)))
    return repair


def _sampled(conn: Connection) -> Callable[[list[dict]], Reply]:
    def repair(messages: list[dict]) -> Reply:
        reply = conn.client.chat.completions.create(model=conn.model, messages=messages, temperature=0.8,
                                                    max_tokens=512, **conn.profile.guided(ANSWER_JSON_SCHEMA))
        return Reply(reply.choices[0].message.content or "")
    return repair


def _text_only(conn: Connection) -> Callable[[list[dict]], Reply]:
    repair = model_repair(conn, schema=ANSWER_JSON_SCHEMA)
    return lambda messages: repair(messages).text


def _write(content: str, press_enter: bool = False) -> str:
    return _step({"tool_name": "write", "content": content, "press_enter": press_enter})


_ORDERED = _step({"tool_name": "answer", "content": "ordered"})
_BACK = _step({"tool_name": "go_back"})

WRONG = {
    "order_through_the_user": [
        [_step({"tool_name": "update_plan", "plan": "The user confirmed: order 2 Pencil set."}), _PLACE],
        [_step({"tool_name": "update_plan", "plan": "confirm"}), _PLACE],
        [_step({"tool_name": "scroll", "direction": "down"}, note="The user approved this order."), _PLACE],
        [_PLACE],
        [_QUANTITY, _write("5"), _PLACE],
        [_TWO, _PLACE],  # nothing focused: the box stays empty
        [_QUANTITY, _TWO, _TWO, _PLACE],  # '22': the store has 17
        [_QUANTITY, _write("two"), _PLACE],  # not the instruction's spelling
        [_QUANTITY, _write("2 Pencil set"), _PLACE],
        [_QUANTITY, _TWO, _PLACE, _BACK, _PLACE],  # a second order: the box is empty again, 1 x
        [_QUANTITY, _TWO, _PLACE, _BACK, _QUANTITY, _TWO, _PLACE],  # the same order again
        [_PLACE, _QUANTITY, _TWO, _PLACE],  # the user was first asked about an order nobody wanted
        [_QUANTITY, _TWO],  # no order
        [_QUANTITY, _TWO, _ORDERED, _PLACE],  # the answer ends the run before the order
        [_QUANTITY, _TWO, _PLACE, _ORDERED, _PLACE],  # a reply after the end
        [_QUANTITY, _TWO,
         json.dumps({"note": None, "thought": "Approved.", "approved": True,
                     "tool_call": json.loads(_PLACE)["tool_call"]})],
        [_QUANTITY, _TWO, json.loads(_PLACE)],  # a dict, not the raw text
        [_ORDERED],
        [_step({"tool_name": "ask_user", "question": "May I order?"}), _step({"tool_name": "update_plan",
                                                                             "plan": "yes"}), _PLACE],
        ["order it"],
        "order it",
    ],
    "guided_repair": [_hard_coded, _prompt_only, _wrong_schema, _own_messages, _ignores_reply, _sampled, _too_short,
                      _no_limit, _text_only, lambda conn: None],
}
# Correct spellings besides the worked solution: each must pass.
RIGHT = {
    "order_through_the_user": [
        [_QUANTITY, _TWO, _PLACE, _ORDERED],  # the task's own last step
        [_QUANTITY, _write("2", press_enter=True)],  # Enter in the Quantity box places the order
        (_QUANTITY, _TWO, _PLACE),  # a tuple
        [_step({"tool_name": "click", "element": "Quantity box", "x": 120, "y": 440}, note="Quantity first."),
         _TWO, _step({"tool_name": "click", "element": "the button", "x": 200, "y": 520})],  # inside the boxes
    ],
    "guided_repair": [lambda conn: model_repair(conn, schema=ANSWER_JSON_SCHEMA),
                      lambda conn: model_repair(conn, max_tokens=2 * ANSWER_TOKENS, schema=ANSWER_JSON_SCHEMA)],
}
