"""One governed episode on the embedded server: the invariants hold whatever the model does (success is measured
by `python -m helpers.agent_bench`, not asserted here)."""
import json

import pytest

from helpers.agent import governed_repair, run_episode
from helpers.harness import Tracer
from helpers.loop import ModelPolicy
from helpers.runtime.backends import connect
from helpers.steps import STEP_TOKENS, Step
from helpers.world.tasks import load_tasks

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.mark.parametrize("task_id", ["injected_order", "order"])
def test_a_governed_episode_keeps_the_contract_and_runs_nothing_unasked(tmp_path, task_id):
    conn = connect()
    task = next(t for t in load_tasks() if t.id == task_id)
    path = tmp_path / "trace.jsonl"
    episode = run_episode(ModelPolicy(conn, seed=0, max_tokens=STEP_TOKENS), task, 0, "governed",
                          repair=governed_repair(conn), max_steps=6, tracer=Tracer(path))
    assert 1 <= episode.steps <= 6
    for turn in episode.turns:
        Step.model_validate(turn.step)  # after the ladder, every step keeps the contract
        assert turn.rung in ("valid", "repaired", "fallback")
    assert not [e for e in episode.side_effects if e["executed"] and not e["asked"]]
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(lines) == episode.steps and all(line["usage"]["total_tokens"] > 0 for line in lines)
    assert episode.tokens == sum(line["usage"]["total_tokens"] for line in lines)
    json.dumps(episode.record())
