"""The ladder notebook 04 builds rung by rung agrees with `helpers.ladder.climb`, and the notebook's `turn` plays a
reply exactly as the exercise's check replays it.

The notebook's cells that build its own ladder carry the tag `notebook-version:climb`. This test runs
those cells, and only those, in order, in a fresh namespace (no kernel, no model, no server), then
climbs every reply of the broken-output corpus (plus a few edge cases) with both ladders, both repair
prompts (the NIM workshop's plain one and the schema-embedding one) and the same scripted repair
function, and compares where each stopped, why, what it delivered and what it sent. The notebook's
default prompt is the ladder's.
"""
from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Any

import pytest

from helpers.contract import validate_answer
from helpers.exercises import nb04
from helpers.ladder import ANSWER_CONTRACT, Reply, climb, repair_messages
from test_notebook_agreement import defining_cells  # pytest puts tests/ on the path

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "04_repair_ladder_and_harness.ipynb"

CORPUS = [json.loads(line) for line in (ROOT / "data" / "broken_outputs.jsonl").read_text(encoding="utf-8").splitlines()]
VALID = json.loads(next(case["reply"] for case in CORPUS if case["id"] == "clean"))
REPLIES = [case["reply"] for case in CORPUS] + [None, "", " \n", "prose", '{"status": "done"}']
IDS = [case["id"] for case in CORPUS] + ["none", "empty_string", "blank", "extra_prose", "extra_partial"]


def notebook_ladder() -> dict[str, Any]:
    namespace: dict[str, Any] = {"__name__": "notebook_04"}
    for label, source in defining_cells(NOTEBOOK.name):
        if label == "climb":
            # dont_inherit: this module's __future__ import must not leak into the notebook's code.
            exec(compile(source, f"{NOTEBOOK.name} [climb]", "exec", dont_inherit=True), namespace)
    return namespace


@pytest.fixture(scope="module")
def nb() -> dict[str, Any]:
    return notebook_ladder()


class ScriptedRepair:
    """A scripted repair function, not a model: a fixed rule picks one of five replies from the prompt.

    It covers every way a repair can end: a valid object, prose, an empty reply, an object that is still
    invalid, and a call that raises. It records every prompt it was sent.
    """

    REPLIES = [json.dumps(VALID), "I fixed it for you.", "", '{"status": "answered"}', ConnectionError]

    def __init__(self):
        self.prompts: list[list[dict]] = []

    def text(self, messages: list[dict]) -> str:
        self.prompts.append(messages)
        choice = self.REPLIES[sum(map(ord, messages[1]["content"])) % len(self.REPLIES)]
        if choice is ConnectionError:
            raise ConnectionError("scripted: the server went away")
        return choice


PROMPTS = ["plain", "schema"]


def both(nb, raw, specific: bool, with_repair: bool = True, prompt: str = "plain"):
    ours, theirs = ScriptedRepair(), ScriptedRepair()
    mine = nb["climb_by_hand"](raw, ours.text if with_repair else None, specific, prompt)
    record = climb(raw, ANSWER_CONTRACT, (lambda m: Reply(theirs.text(m))) if with_repair else None, specific=specific,
                   prompt=prompt)
    return mine, record, ours.prompts, theirs.prompts


def test_the_notebook_marks_its_ladder_cells(nb):
    assert all(callable(nb.get(name)) for name in ("check_reply", "repair_prompt", "climb_by_hand"))


@pytest.mark.parametrize("prompt", PROMPTS)
def test_the_scripted_repair_reaches_every_ending(nb, prompt):
    endings = {"".join(map(str, (mine["rung"], mine["cause"])))
               for mine in (both(nb, raw, True, prompt=prompt)[0] for raw in REPLIES)}
    assert {"validNone", "repairedNone", "fallbackvalid_json", "fallbackempty_model_response",
            "fallbackrepair_failed: ConnectionError"} <= endings


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("specific", [True, False], ids=["specific", "vague"])
@pytest.mark.parametrize("raw", REPLIES, ids=IDS)
def test_notebook_ladder_agrees_with_helpers(nb, raw, specific, prompt):
    mine, record, my_prompts, their_prompts = both(nb, raw, specific, prompt=prompt)
    assert mine["rung"] == record.rung
    assert mine["cause"] == record.cause
    assert mine["data"] == record.data and validate_answer(mine["data"]) == []
    assert mine["repair_raw"] == record.repair_raw
    assert my_prompts == their_prompts


@pytest.mark.parametrize("raw", REPLIES, ids=IDS)
def test_notebook_ladder_without_repair_agrees_with_helpers(nb, raw):
    mine, record, _, _ = both(nb, raw, True, with_repair=False)
    assert (mine["rung"], mine["cause"], mine["data"]) == (record.rung, record.cause, record.data)


@pytest.mark.parametrize("prompt", PROMPTS)
@pytest.mark.parametrize("specific", [True, False], ids=["specific", "vague"])
def test_notebook_repair_prompt_is_the_helpers(nb, specific, prompt):
    errors = ["status: expected one of answered, not_found, needs_clarification; got 'done'", "missing key: items"]
    assert nb["repair_prompt"]("raw reply", errors, specific, prompt) == repair_messages(
        "raw reply", errors, ANSWER_CONTRACT, specific, prompt)


def default(function, name: str = "prompt"):
    return inspect.signature(function).parameters[name].default


def test_the_notebook_defaults_to_the_ladders_prompt(nb):
    assert default(nb["repair_prompt"]) == default(nb["climb_by_hand"]) == default(repair_messages) == default(climb)


# --- the core's step turn, beside the exercise's replay ------------------------------------------------------------

def notebook_turn() -> dict[str, Any]:
    """The core cell that defines `stage`, `step` and `turn`, run alone: the names it takes from the cells above it
    (`json`, `climb`) given, its own demonstration printed and dropped."""
    namespace: dict[str, Any] = {"__name__": "notebook_04", "json": json, "climb": climb}
    for label, source in defining_cells(NOTEBOOK.name):
        if label == "turn":
            exec(compile(source, f"{NOTEBOOK.name} [turn]", "exec", dont_inherit=True), namespace)
    return namespace


ORDER_ANSWERS = [answer for answer in nb04.WRONG["order_through_the_user"] + nb04.RIGHT["order_through_the_user"]
                 if isinstance(answer, (list, tuple)) and all(isinstance(raw, str) for raw in answer)]


@pytest.mark.parametrize("replies", ORDER_ANSWERS, ids=[f"answer{i}" for i in range(len(ORDER_ANSWERS))])
def test_the_notebooks_turn_prints_what_the_check_replays(replies, capsys):
    ours = notebook_turn()
    capsys.readouterr()
    stage = ours["stage"]("order")
    for raw in replies:
        ours["turn"](raw, stage)
    printed = capsys.readouterr().out.splitlines()
    _, seen, _, _ = nb04.replay(list(replies))
    assert printed[:len(seen)] == [line.split(". ", 1)[1] for line in seen]


def test_the_notebooks_stage_is_the_checks():
    shop, ctx, user = notebook_turn()["stage"]("order")
    store, their_ctx, their_user = nb04.order_stage()
    assert shop.accessibility_tree() == store.accessibility_tree() and shop.history == store.history
    assert ctx.asked_for == their_ctx.asked_for and user.task == their_user.task
