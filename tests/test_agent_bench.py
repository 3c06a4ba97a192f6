"""The agent benchmark's command line, on policies that need no model: its JSON shape, its table, its chart."""
import json

import pytest

from helpers.agent import CONFIGS, run_episode
from helpers.bench.agent import (HORIZON_TASKS, by_horizon, horizon_table, horizon_tasks, main,
                                 scripted_horizon, table, changes)
from helpers.loop import ScriptedProposer
from helpers.runtime.paths import ROOT
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import SIGNING_IN, STARTS, at_start, injected_tasks, load_tasks

EPISODE_KEYS = {"config", "task", "seed", "success", "steps", "side_effects"}
EFFECT_KEYS = {"action", "detail", "executed", "asked"}


def run(tmp_path, *args) -> dict:
    path = tmp_path / "bench.json"
    main(["--policy", "scripted", "--seeds", "2", "--tasks", "order", "injected_order", "--json", str(path), *args])
    return json.loads(path.read_text())


def test_the_json_has_the_documented_shape(tmp_path, capsys):
    result = run(tmp_path, "--chart", str(tmp_path / "chart.png"))
    assert len(result["episodes"]) == 5 * 2 * 2  # configurations x tasks x seeds
    assert all(EPISODE_KEYS <= set(e) for e in result["episodes"])
    effects = [s for e in result["episodes"] for s in e["side_effects"]]
    assert effects and all(EFFECT_KEYS <= set(s) for s in effects)
    assert set(result["summary"]) == {"bare", "per_screen", "grounded", "governed", "handwritten"}
    assert result["meta"]["policy"] == "scripted" and "llguidance" in result["meta"]["versions"]
    assert (tmp_path / "chart.png").stat().st_size > 1000
    out = capsys.readouterr().out
    assert "| success rate | 100% | 100% | 100% | 100% | 100% |" in out
    assert "| goals the user confirmed | - | - | - | 100% | 100% |" in out


def test_only_the_governed_orders_are_asked_for(tmp_path):
    summary = run(tmp_path)["summary"]
    assert [summary[c]["unasked_executed"] for c in summary] == [2, 2, 2, 0, 0]
    assert all(summary[c]["unwanted_executed"] == 0 for c in summary)


def test_a_replay_file_is_played_in_every_configuration(tmp_path):
    replies = tmp_path / "replies.jsonl"
    replies.write_text(json.dumps('{"note": null, "thought": "t", "tool_call": {"tool_name": "go_back"}}') + "\n")
    path = tmp_path / "replay.json"
    main(["--policy", f"replay:{replies}", "--seeds", "1", "--tasks", "price", "--json", str(path)])
    episodes = json.loads(path.read_text())["episodes"]
    assert [e["config"] for e in episodes] == ["bare", "per_screen", "grounded", "governed", "handwritten"]
    assert not any(e["success"] for e in episodes)


def test_earlier_runs_are_reported_together(tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    main(["--policy", "scripted", "--seeds", "1", "--tasks", "price", "--configs", "bare", "--json", str(first)])
    main(["--policy", "scripted", "--seeds", "1", "--tasks", "price", "--configs", "governed", "--json", str(second)])
    capsys.readouterr()
    main(["--from", str(first), str(second), "--json", str(tmp_path / "both.json")])
    assert "| measure | bare | governed |" in capsys.readouterr().out
    both = json.loads((tmp_path / "both.json").read_text())
    assert len(both["episodes"]) == 2
    assert str(tmp_path) not in json.dumps(both["meta"])  # committed results name no folder of this machine
    assert [run["file"] for run in both["meta"]["from"]] == ["a.json", "b.json"]


def test_more_seeds_join_an_earlier_run_but_the_same_episode_twice_does_not(tmp_path, capsys):
    first, more = tmp_path / "a.json", tmp_path / "b.json"
    main(["--policy", "scripted", "--seeds", "1", "--tasks", "price", "--configs", "bare", "--json", str(first)])
    main(["--policy", "scripted", "--seeds", "2", "--first-seed", "1", "--tasks", "price", "--configs", "bare",
          "--json", str(more)])
    assert [e["seed"] for e in json.loads(more.read_text())["episodes"]] == [1, 2]
    main(["--from", str(first), str(more), "--json", str(tmp_path / "all.json")])
    assert [e["seed"] for e in json.loads((tmp_path / "all.json").read_text())["episodes"]] == [0, 1, 2]
    with pytest.raises(SystemExit, match="more than one file"):
        main(["--from", str(first), str(first)])


def test_a_failed_request_keeps_the_episodes_before_it_and_the_run_resumes(tmp_path, monkeypatch):
    """A second. Before, the JSON was written only after the last episode: one failed request lost the run."""
    from helpers.bench import agent as bench

    path, calls = tmp_path / "bench.json", []
    arguments = ["--policy", "scripted", "--seeds", "2", "--tasks", "price", "--configs", "bare", "governed",
                 "--json", str(path)]

    def fails_third(*args, **kwargs):
        calls.append(args[1:4])
        if len(calls) == 3:
            raise ConnectionError("the server went away")
        return run_episode(*args, **kwargs)

    monkeypatch.setattr(bench, "run_episode", fails_third)
    with pytest.raises(SystemExit, match="governed price seed 0: ConnectionError: the server went away"):
        main(arguments)
    kept = json.loads(path.read_text())
    assert [(e["config"], e["seed"]) for e in kept["episodes"]] == [("bare", 0), ("bare", 1)]
    assert kept["meta"]["interrupted"].startswith("governed price seed 0")
    main([*arguments, "--resume"])
    assert len(calls) == 5  # the two kept episodes are not run again
    done = json.loads(path.read_text())
    assert [(e["config"], e["seed"]) for e in done["episodes"]] == [("bare", 0), ("bare", 1), ("governed", 0),
                                                                       ("governed", 1)]
    assert "interrupted" not in done["meta"] and "--resume" not in done["meta"]["command"]


def test_an_unknown_task_is_refused():
    with pytest.raises(SystemExit):
        main(["--policy", "scripted", "--tasks", "teleport"])


def test_the_obedient_adversary_needs_no_model_and_the_table_says_what_stopped_it(tmp_path, capsys):
    path = tmp_path / "obedient.json"
    main(["--policy", "obedient", "--seeds", "1", "--tasks", "injected_order", "results_sponsored", "confirm_retry",
          "signin_password_in_username", "home_session_check", "--json", str(path)])
    result = json.loads(path.read_text())
    summary, out = result["summary"], capsys.readouterr().out
    assert result["meta"]["model"] is None and result["meta"]["policy"] == "obedient"
    assert all(summary[c]["unwanted_executed"] > 0 for c in ("bare", "per_screen"))
    assert summary["bare"]["unwanted_executed_by_action"].keys() == {"place_order", "type_text"}
    for config in ("governed", "handwritten"):
        assert summary[config]["unwanted_executed"] == summary[config]["unasked_executed"] == 0
    assert summary["governed"]["unwanted_blocked_by"] == {"outside_schema": 4, "duplicate_side_effect": 1}
    assert "| unwanted side effects blocked | 0 | 0 |" in out
    assert "duplicate_side_effect 1, outside_schema 4 |" in out.split("|   by cause |")[1].splitlines()[0]


def test_the_obedient_adversary_runs_every_injected_task_by_default(tmp_path):
    path = tmp_path / "obedient.json"
    main(["--policy", "obedient", "--seeds", "1", "--configs", "governed", "--narrowings", "--json", str(path)])
    result = json.loads(path.read_text())
    assert result["meta"]["tasks"] == [task.id for task in injected_tasks()] and len(result["episodes"]) >= 16
    governed = result["summary"]["governed"]
    assert governed["unwanted_executed"] == governed["unasked_executed"] == 0
    assert governed["unwanted_blocked"] >= len(result["episodes"])
    assert set(governed["unwanted_blocked_by"]) == {"not_asked", "duplicate_side_effect"}


def test_a_summary_saved_before_the_counts_by_cause_still_renders():
    """A summary written before these counts existed renders them as n/a, never as a made-up zero; the committed one
    carries them."""
    committed = json.loads((ROOT / "docs" / "agent-bench.json").read_text())["summary"]
    assert all("unwanted_blocked_by" in s and "unwanted_executed_by_action" in s for s in committed.values())
    older = {config: {k: v for k, v in s.items() if k not in ("unwanted_blocked_by", "unwanted_executed_by_action")}
             for config, s in committed.items()}
    rendered = table(older)
    assert "|     by action | n/a | n/a | n/a | n/a | n/a |" in rendered
    assert "|   by cause | n/a | n/a | n/a | n/a | n/a |" in rendered


def test_before_and_after_lists_every_changed_row_but_wall_time():
    """Notebook 06 prints these lines: a row that moved is named with both values, wall time never is, and an
    unchanged run is an empty list."""
    after = json.loads((ROOT / "docs" / "agent-bench.json").read_text())["summary"]
    before = {config: dict(s) for config, s in after.items()}
    assert changes(before, after) == {config: [] for config in after}
    before["governed"].update(mean_steps=after["governed"]["mean_steps"] + 0.7, seconds=1.0, repairs=3)
    changed = changes(before, after)
    assert changed["governed"] == [f"mean steps: {after['governed']['mean_steps'] + 0.7:.1f} -> "
                                   f"{after['governed']['mean_steps']:.1f}",
                                   f"repairs / fallbacks: 3 / {after['governed']['fallbacks']} -> "
                                   f"{after['governed']['repairs']} / {after['governed']['fallbacks']}"]
    assert all(lines == [] for config, lines in changed.items() if config != "governed")


def test_the_handwritten_configuration_runs_with_no_narrowing(tmp_path):
    """`--narrowings` given with no name used to crash `handwritten` (its rules read a click's fixed coordinates)."""
    path = tmp_path / "none.json"
    main(["--policy", "scripted", "--seeds", "1", "--tasks", "order", "--configs", "handwritten", "--narrowings",
          "--json", str(path)])
    result = json.loads(path.read_text())
    assert result["meta"]["narrowings"] == [] and len(result["episodes"]) == 1


HORIZON_BASES = [task for task in load_tasks() if task.kind not in SIGNING_IN]


@pytest.mark.parametrize("config", CONFIGS)
def test_the_scripted_policy_completes_the_horizon_tasks_from_every_start_in_every_configuration(config):
    for task in horizon_tasks(list(HORIZON_TASKS), list(STARTS)):
        episode = run_episode(ScriptedProposer(ScriptedPolicy(task)), task, 0, config, max_steps=40)
        assert episode.success, (task.id, episode.outcome)


def test_the_scripted_policy_completes_every_task_from_every_start_it_can_have():
    for base in HORIZON_BASES:
        for start in STARTS:
            assert scripted_horizon(at_start(base, start), 0) >= 1  # it raises when the path does not complete


def test_the_horizon_is_the_steps_the_scripted_path_takes():
    expected = {"price": [9, 4, 2, 1], "order_receipt": [10, 5, 3, 2], "order": [12, 7, 5, 4]}  # signin .. product
    for task_id, steps in expected.items():
        base = next(t for t in HORIZON_BASES if t.id == task_id)
        assert [scripted_horizon(at_start(base, start), 0) for start in STARTS] == steps


def test_the_horizon_run_records_each_episodes_horizon_and_gives_it_two_more_steps(tmp_path, capsys):
    path = tmp_path / "horizon.json"
    main(["--policy", "scripted", "--seeds", "1", "--horizon", "--configs", "bare", "governed", "--json", str(path)])
    result = json.loads(path.read_text())
    assert result["meta"]["tasks"] == [f"{t}@{s}" for t in HORIZON_TASKS for s in STARTS]
    assert result["meta"]["max_steps"] == "horizon + 2"
    for record in result["episodes"]:
        assert record["success"] and record["steps"] == record["horizon"]  # the scripted policy is the path itself
        assert record["start"] == record["task"].split("@")[1] and record["goal_right"] is None  # no model read one
    out = capsys.readouterr().out
    assert "| steps on the scripted path | episodes by start | bare: task done | governed: task done |" in out
    assert "| 1 | product 1 | 1/1 | 1/1 |" in out and "| all | | 12/12 | 12/12 |" in out
    assert set(result["horizons"]) == {"1", "2", "3", "4", "5", "7", "9", "10", "12"}


def test_the_horizon_table_puts_the_goal_step_apart_from_the_task():
    def record(config, horizon, start, success, goal_right, single=0):
        return {"config": config, "horizon": horizon, "start": start, "success": success, "goal_right": goal_right,
                "steps": horizon, "single_option_steps": single}

    records = [record("bare", 1, "product", True, None), record("bare", 4, "home", False, None),
               record("governed", 1, "product", False, True), record("governed", 4, "home", False, False, single=2)]
    rendered = horizon_table(by_horizon(records))
    lines = rendered.splitlines()
    assert lines[0] == ("| steps on the scripted path | episodes by start | bare: task done | "
                        "governed: goal read right | governed: task done |")
    assert "| 1 | product 1 | 1/1 | 1/1 | 0/1 |" in lines and "| 4 | home 1 | 0/1 | 0/1 | 0/1 |" in lines
    assert "| all | | 1/2 | 1/2 | 0/2 |" in lines
    assert lines[-1] == "| steps the schema decided (one allowed call) | | 0% of 5 |  | 40% of 5 |"


def test_the_horizon_run_merges_from_its_files_and_refuses_max_steps(tmp_path, capsys):
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    main(["--policy", "scripted", "--seeds", "1", "--horizon", "--tasks", "price", "--starts", "product",
          "--configs", "bare", "--json", str(first)])
    main(["--policy", "scripted", "--seeds", "1", "--horizon", "--tasks", "price", "--starts", "signin",
          "--configs", "bare", "--json", str(second)])
    capsys.readouterr()
    main(["--from", str(first), str(second), "--json", str(tmp_path / "both.json")])
    assert "| 9 | signin 1 | 1/1 |" in capsys.readouterr().out
    assert set(json.loads((tmp_path / "both.json").read_text())["horizons"]) == {"1", "9"}
    with pytest.raises(SystemExit):
        main(["--policy", "scripted", "--horizon", "--max-steps", "5"])


@pytest.mark.parametrize("policy", ["scripted", "obedient"])
def test_a_task_with_a_notice_and_a_password_outside_plain_text_runs_to_its_end(tmp_path, monkeypatch, policy):
    """A few seconds. The issue's end-to-end case, no model: every configuration runs, the JSON is written, and
    neither it nor what the run printed holds the password; the step-through views (notebook 06's) render it too."""
    from helpers.bench import agent as bench
    from helpers.runtime.concealer import isolated
    from helpers.widgets.step_through import frames_from_turns, steps_html
    from test_goal import ODD_PASSWORD, odd_task  # pytest puts tests/ on the path

    task = odd_task(ODD_PASSWORD)
    monkeypatch.setattr(bench, "load_tasks", lambda *args: [task])
    monkeypatch.setattr(bench, "injected_tasks", lambda: [task])
    path = tmp_path / "odd.json"
    with isolated():
        main(["--policy", policy, "--seeds", "1", "--json", str(path)])
        episode = run_episode(ScriptedProposer(ScriptedPolicy(task)), task, 0, "bare")
        shown = {"html": steps_html(frames_from_turns(episode.turns), pictures=False), "repr": repr(episode),
                 "json": path.read_text(encoding="utf-8")}
    assert [e["config"] for e in json.loads(shown["json"])["episodes"]] == list(CONFIGS)
    assert [where for where, text in shown.items() if "lovelace59" in text] == []
