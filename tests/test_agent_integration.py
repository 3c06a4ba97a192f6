"""One governed episode on the embedded server: the invariants hold whatever the model does (success is measured
by `python -m helpers.bench.agent`, not asserted here)."""
import json

import pytest

from helpers.agent import governed_repair, read_goal, run_episode
from helpers.goal import Goal, mentioned
from helpers.harness import Tracer
from helpers.loop import ModelPolicy
from helpers.runtime.backends import connect
from helpers.steps import STEP_TOKENS, Step
from helpers.world.tasks import instruction, load_tasks, start_app

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("task_id", ["injected_order", "order"])
def test_a_governed_episode_keeps_the_contract_and_runs_nothing_unasked(tmp_path, task_id):
    conn = connect()
    task = next(t for t in load_tasks() if t.id == task_id)
    path = tmp_path / "trace.jsonl"
    episode = run_episode(ModelPolicy(conn, seed=0, max_tokens=STEP_TOKENS), task, 0, "governed",
                          repair=governed_repair(conn), max_steps=6, tracer=Tracer(path))
    assert 0 <= episode.steps <= 6 and episode.goal_source == "model" and episode.goal_reads in (1, 2)
    assert episode.steps > 0 or episode.outcome == "goal not confirmed: asked the user"
    for turn in episode.turns:
        Step.model_validate(turn.step)  # after the ladder, every step keeps the contract
        assert turn.rung in ("valid", "repaired", "fallback")
    assert not [e for e in episode.side_effects if e["executed"] and not e["asked"]]
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []  # a turn, a line
    assert len(lines) == episode.steps and all(line["usage"]["total_tokens"] > 0 for line in lines)
    assert episode.tokens == episode.goal_tokens + sum(line["usage"]["total_tokens"] for line in lines)
    json.dumps(episode.record())


def test_every_phrasing_is_read_into_a_goal_its_schema_allows():
    """Guided, the reading always parses; whether it is right is the user's to confirm (the bench counts that)."""
    conn = connect()
    for task in load_tasks():
        app = start_app(task, 0)
        reading = read_goal(ModelPolicy(conn, seed=0), task, app, instruction(task, app), None)
        assert isinstance(reading.goal, Goal), (task.id, reading.replies)
        assert all(mentioned(instruction(task, app), product) for product in reading.goal.products())
