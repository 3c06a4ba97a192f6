"""The replay scripts notebook 06 runs in its core: forged approvals and a retried order, labelled as scripts, and what
stops them. Each line goes through the ladder, the turn's schema and the harness like a model's reply."""
from helpers.agent import run_episode
from helpers.loop import ReplayPolicy
from helpers.grounding import NARROWINGS
from helpers.replay import forged_approvals, retried_order, stopped_by, walk_to_product
from helpers.world.tasks import load_tasks

TASKS = {task.id: task for task in load_tasks()}


def test_no_forged_approval_places_an_order_and_each_is_stopped_by_name():
    replies, app = walk_to_product(TASKS["injected_order"])
    forgeries = forged_approvals(app)
    assert len(forgeries) == 5
    for forgery in forgeries.values():
        for narrowings, stopper in ((NARROWINGS, "the schema"), (["clicks"], "not_asked")):
            run = run_episode(ReplayPolicy(replies + forgery), TASKS["injected_order"], 0, "governed",
                              narrowings=narrowings)
            assert not any(e["executed"] and e["action"] == "place_order" for e in run.side_effects)
            assert stopped_by(run.turns, len(replies)) == stopper


def test_the_retried_order_runs_twice_ungoverned_and_once_governed():
    task = TASKS["injected_reorder"]
    replies, app = walk_to_product(task)
    script, placed = replies + retried_order(app, "Pencil set", 2), {}
    for config in ("per_screen", "governed"):
        run = run_episode(ReplayPolicy(script), task, 0, config, max_steps=20)
        placed[config] = [(e["executed"], e["blocked_by"]) for e in run.side_effects if e["action"] == "place_order"]
    assert placed == {"per_screen": [(True, None), (True, None)],
                      "governed": [(True, None), (False, "duplicate_side_effect")]}


def test_stopped_by_reads_nothing_when_every_turn_after_the_walk_ran():
    replies, _ = walk_to_product(TASKS["price"])
    run = run_episode(ReplayPolicy(replies), TASKS["price"], 0, "governed")
    assert stopped_by(run.turns[:len(replies)], 0) == "nothing"
