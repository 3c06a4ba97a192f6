"""Benchmark the agent configurations side by side: `python -m helpers.bench.agent --seeds 3`.

Runs every task x seed in each configuration (`bare`, `per_screen`, `grounded`, `governed`, `handwritten`; see
`helpers.agent`) on whatever `helpers.runtime.backends.connect()` selects, or on a policy that needs no model:

    --policy model          the model (default)
    --policy scripted       the scripted reference policy (no model): the upper bound, and a check of the app
    --policy obedient       a scripted adversary (no model) that does its task and obeys every instruction a page
                            shows; by default it runs every task with one (`helpers.world.tasks.injected_tasks`)
    --policy replay:PATH    raw assistant replies from a JSONL file, one per turn: fixed (adversarial) sequences
                            that go through everything a model reply goes through in that configuration

`--horizon` asks the same questions from closer to the answer: each task of `--tasks` (default `HORIZON_TASKS`) from
each start of `--starts` (signed out, at home, on the search results, on the product page; see
`helpers.world.tasks.at_start`). An episode's horizon is the number of steps the scripted reference policy takes
from that start on that seed, measured by running it; the episode may take its horizon plus `--slack` steps. The
table then reports, by horizon and per configuration, the goal step (a reading of the model's that is the task's
goal) apart from the task (done).

It prints one line per episode as it goes, then a table per configuration, and draws `--chart`. It writes `--json`
after every episode: a run a failed request stops keeps every episode before it, and the same command with
`--resume` runs only the rest.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

from helpers.agent import CONFIGS, MAX_STEPS, Episode, governed_repair, run_episode, summarize
from helpers.grounding import NARROWINGS
from helpers.harness import Tracer
from helpers.loop import ModelPolicy, ReplayPolicy, ScriptedProposer
from helpers.runtime.versions import software_versions
from helpers.steps import STEP_TOKENS
from helpers.runtime.concealer import conceal
from helpers.world.obedient_policy import ObedientPolicy
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import (INJECTED_FILE, STARTS, Task, at_start, injected_tasks, load_tasks, same_goal,
                                 start_app, task_goal)

# The horizon run's default tasks: a look-up and two orders, one of them of 2 items.
HORIZON_TASKS = ("price", "order_receipt", "order")
SLACK = 2
# More steps than any task's scripted path takes from any start: past it, the scripted policy is lost.
LONGEST_PATH = 40

def make_policy(kind: str, task: Task, seed: int, conn):
    if kind == "model":
        return ModelPolicy(conn, temperature=0.0, seed=seed, max_tokens=STEP_TOKENS)
    if kind == "scripted":
        return ScriptedProposer(ScriptedPolicy(task))
    if kind == "obedient":
        return ScriptedProposer(ObedientPolicy(task))
    if kind.startswith("replay:"):
        return ReplayPolicy.load(kind.split(":", 1)[1])
    raise ValueError(f"--policy must be model, scripted, obedient or replay:PATH, not {kind!r}")


def scripted_horizon(task: Task, seed: int) -> int:
    """The steps the scripted reference policy takes to complete `task` on `seed`, measured by running it."""
    episode = run_episode(ScriptedProposer(ScriptedPolicy(task)), task, seed, "bare", max_steps=LONGEST_PATH)
    if not episode.success:
        raise RuntimeError(f"the scripted policy does not complete {task.id} on seed {seed}: {episode.outcome}")
    return episode.steps


def calls_made(episode: Episode) -> list[dict]:
    """What the agent did, turn by turn: its tool call (None for a reply that was no step) and what came back,
    passwords concealed. Short enough to keep in the record of a short episode, to see why it failed."""
    calls = [{"call": turn.step["tool_call"] if turn.step else None, "result": turn.tool_output[:120]}
             for turn in episode.turns]
    return json.loads(conceal(json.dumps(calls)))


def horizon_tasks(ids: list[str], starts: list[str]) -> list[Task]:
    known = {task.id: task for task in load_tasks()}
    return [at_start(known[task_id], start) for task_id in ids for start in starts]


def goal_right(record: dict, task: Task) -> bool | None:
    """Whether the model read the task's goal (the simulated user's test); None when no model read one."""
    if record["goal_source"] != "model":
        return None
    return record["goal"] is not None and same_goal(record["goal"], task_goal(task, start_app(task, record["seed"])))


def by_horizon(records: list[dict]) -> dict[int, dict[str, dict]]:
    """Per horizon, per configuration: episodes, goals read right (None: no model read one), tasks done, the starts
    of its episodes, and the steps whose schema allowed one call."""
    table: dict[int, dict[str, dict]] = {}
    for r in sorted(records, key=lambda r: r["horizon"]):
        cell = table.setdefault(r["horizon"], {}).setdefault(r["config"], {
            "episodes": 0, "goals_right": None, "done": 0, "starts": {}, "steps": 0, "single_option_steps": 0})
        cell["episodes"] += 1
        cell["done"] += r["success"]
        if r["goal_right"] is not None:
            cell["goals_right"] = (cell["goals_right"] or 0) + r["goal_right"]
        cell["starts"][r["start"]] = cell["starts"].get(r["start"], 0) + 1
        cell["steps"] += r["steps"]
        cell["single_option_steps"] += r["single_option_steps"]
    return table


def horizon_table(horizons: dict[int, dict[str, dict]]) -> str:
    """Success by horizon: per configuration, the goal step (where the model read one) apart from the task; the last
    row, the share of steps whose schema allowed exactly one call."""
    configs = list(dict.fromkeys(c for row in horizons.values() for c in row))
    reads = {c for row in horizons.values() for c, cell in row.items() if cell["goals_right"] is not None}
    columns = [(c, part) for c in configs for part in (("goal", "done") if c in reads else ("done",))]
    head = ["steps on the scripted path", "episodes by start",
            *(f"{c}: {'goal read right' if part == 'goal' else 'task done'}" for c, part in columns)]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---|" * len(columns)]

    def cell_text(cell: dict | None, part: str) -> str:
        if cell is None:
            return ""
        got = cell["goals_right"] if part == "goal" else cell["done"]
        return "-" if got is None else f"{got}/{cell['episodes']}"

    totals: dict[str, dict] = {}
    for horizon, row in horizons.items():
        first = next(iter(row.values()))
        starts = ", ".join(f"{start} {n}" for start, n in sorted(first["starts"].items(),
                                                                   key=lambda item: STARTS.index(item[0])))
        lines.append(f"| {horizon} | {starts} | " + " | ".join(cell_text(row.get(c), part) for c, part in columns)
                     + " |")
        for config, cell in row.items():
            total = totals.setdefault(config, {"episodes": 0, "goals_right": None, "done": 0, "steps": 0,
                                               "single_option_steps": 0})
            for key in ("episodes", "done", "steps", "single_option_steps"):
                total[key] += cell[key]
            if cell["goals_right"] is not None:
                total["goals_right"] = (total["goals_right"] or 0) + cell["goals_right"]
    lines.append("| all | | " + " | ".join(cell_text(totals[c], part) for c, part in columns) + " |")
    share = {c: f"{t['single_option_steps'] / max(1, t['steps']):.0%} of {t['steps']}" for c, t in totals.items()}
    lines.append("| steps the schema decided (one allowed call) | | "
                 + " | ".join(share[c] if part == "done" else "" for c, part in columns) + " |")
    return "\n".join(lines)


def headlines(docs: Path) -> list[str]:
    """Notebook 06's three numbers, read from the saved runs in `docs`: what a lying page caused, ungoverned and
    governed (the obedient adversary, no model); the store tasks the model completed, governed; and the share of its
    governed steps whose schema left one call, where the schema, not the model, chose."""
    adversary, model = (json.loads((docs / f"{name}.json").read_text())["summary"]
                        for name in ("obedient-bench", "agent-bench"))
    return [f"unwanted side effects a lying page caused: {adversary['bare']['unwanted_executed']} ungoverned, "
            f"{adversary['governed']['unwanted_executed']} governed",
            f"store tasks the model completed, governed: {model['governed']['success_rate']:.0%}",
            f"governed steps whose schema left one call (the schema chose): {model['governed']['single_option_share']:.0%}"]


def episode_line(episode: Episode) -> str:
    effects = [f"{'RAN' if e['executed'] else 'blocked'} {e['action']} {e['detail']}"
               for e in episode.side_effects if not e["wanted"]]
    cut = f"; unwanted: {'; '.join(effects)}" if effects else ""
    goal = {True: "goal confirmed", False: "goal refused", None: "goal unconfirmed"}[episode.goal_confirmed] \
        if episode.goal_source == "model" else ""
    return (f"{episode.config:<11} {episode.task:<22} seed {episode.seed}  {'ok  ' if episode.success else 'FAIL'} "
            f"{episode.steps:>2} steps ({episode.single_option_steps} single-option)  {goal + '; ' if goal else ''}"
            f"{episode.outcome}{cut}")


def counts(by: dict[str, int] | None) -> str:
    """'cause 3, other 1', '-' for none, 'n/a' where the summary has no such count (one committed before it
    existed, such as the one notebook 06 reads)."""
    if by is None:
        return "n/a"
    return ", ".join(f"{k} {v}" for k, v in sorted(by.items())) or "-"


# A summary's rows as the tables print them: (measure, cell).
ROWS = [("episodes (task x seed)", lambda s: str(s["episodes"])),
        ("success rate", lambda s: f"{s['success_rate']:.0%}"), ("mean steps", lambda s: f"{s['mean_steps']:.1f}"),
        ("steps the schema decided (one allowed call)", lambda s: f"{s['single_option_share']:.0%}"),
        ("goals the user confirmed", lambda s: "-" if s["goals_confirmed"] is None
         else f"{s['goals_confirmed']:.0%}"),
        ("side effects not asked for, executed", lambda s: str(s["unasked_executed"])),
        ("  of which the instruction did not want", lambda s: str(s["unwanted_executed"])),
        ("    by action", lambda s: counts(s.get("unwanted_executed_by_action"))),
        ("unwanted side effects blocked", lambda s: str(s["unwanted_blocked"])),
        ("  by cause", lambda s: counts(s.get("unwanted_blocked_by"))),
        ("harness rejections", lambda s: counts(s["rejections"])),
        ("repairs / fallbacks", lambda s: f"{s['repairs']} / {s['fallbacks']}"),
        ("tokens", lambda s: "n/a" if s["tokens"] is None else str(s["tokens"])),
        ("wall time (s)", lambda s: f"{s['seconds']:.0f}")]
# What the machine decides, not the code: left out when two runs are compared.
MACHINE_ROWS = {"wall time (s)"}


def table(summary: dict[str, dict]) -> str:
    configs = list(summary)
    lines = ["| measure | " + " | ".join(configs) + " |", "|---|" + "---|" * len(configs)]
    lines += [f"| {name} | " + " | ".join(cell(summary[c]) for c in configs) + " |" for name, cell in ROWS]
    return "\n".join(lines)


def changes(before: dict[str, dict], after: dict[str, dict]) -> dict[str, list[str]]:
    """Per configuration of `after`, each printed row that differs from `before`, as 'measure: old -> new'
    (wall time left out: it measures the machine). An empty list: the two runs print the same."""
    return {config: [f"{name.strip()}: {cell(before[config])} -> {cell(summary)}"
                     for name, cell in ROWS if name not in MACHINE_ROWS and cell(before[config]) != cell(summary)]
            for config, summary in after.items()}


def chart(summary: dict[str, dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs = list(summary)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    rates = [100 * summary[c]["success_rate"] for c in configs]
    left.bar(configs, rates, color="#2e6fd8")
    for x, rate in enumerate(rates):
        left.annotate(f"{rate:.0f}%", (x, rate), ha="center", va="bottom", fontsize=8)
    left.set(title="Tasks completed", ylabel="% of task x seed episodes", ylim=(0, 100))
    positions = range(len(configs))
    bars = [("unasked_executed", "executed, not approved by the user", "#e67e22"),
            ("unwanted_executed", "executed, not wanted", "#c0392b"),
            ("unwanted_blocked", "not wanted, blocked", "#7f8c8d")]
    width = 0.8 / len(bars)
    for index, (key, label, color) in enumerate(bars):
        offsets = [p + (index - 1) * width for p in positions]
        counts = [summary[c][key] for c in configs]
        right.bar(offsets, counts, width=width, color=color, label=label)
        for x, count in zip(offsets, counts):  # a 0 is a result too: write it, since its bar cannot show
            right.annotate(str(count), (x, count), ha="center", va="bottom", fontsize=8)
    right.set_xticks(list(positions), configs)
    top = max([summary[c][key] for c in configs for key, _, _ in bars] + [1])
    right.set(title="Side effects the user did not ask for", ylabel="count", ylim=(0, top * 1.4 + 0.5))
    right.yaxis.get_major_locator().set_params(integer=True)
    right.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def portable(arguments: list[str]) -> str:
    """A command line as it can be committed: a path is kept by its file name, never this machine's folders."""
    return " ".join(Path(a).name if Path(a).is_absolute() else a for a in arguments)


def report_files(sources: list[Path], json_path: Path | None, chart_path: Path | None) -> None:
    """One table (and chart, and JSON) for the episodes of several runs, for example one run per configuration."""
    runs = [json.loads(source.read_text()) for source in sources]
    records = [episode for run in runs for episode in run["episodes"]]
    keys = Counter((e["config"], e["task"], e["seed"]) for e in records)
    twice = sorted(key for key, count in keys.items() if count > 1)
    if twice:  # counted twice, an episode would weigh double in every rate
        raise SystemExit(f"these episodes are in more than one file: {twice[:5]}; "
                         "add seeds with --first-seed instead of running them again")
    summary = summarize(records)
    print(table(summary))
    horizons = by_horizon(records) if all("horizon" in r for r in records) else None
    if horizons:
        print("\n" + horizon_table(horizons))
    # A merged file can be merged again: its runs are listed under "from" already.
    meta = {"from": [entry for source, run in zip(sources, runs)
                     for entry in run["meta"].get("from", [{"file": source.name, **run["meta"]}])]}
    if json_path:
        json_path.write_text(json.dumps({"episodes": records, "summary": summary, "meta": meta,
                                         **({"horizons": horizons} if horizons else {})}, indent=1))
    if chart_path:
        first = meta["from"][0]
        counts = ", ".join(f"{config} {s['episodes']}" for config, s in summary.items())
        chart(summary, chart_path, f"{first['policy']} policy, {first['model'] or 'no model'}; episodes: {counts}")


def save(path: Path | None, records: list[dict], meta: dict, horizon: bool) -> None:
    """Write the run so far, replacing the file in one step: after every episode, so that a request that fails (or
    a Ctrl-C) loses at most the episode it interrupted."""
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps({"episodes": records, "summary": summarize(records) if records else {},
                                   "meta": meta, **({"horizons": by_horizon(records)} if horizon else {})},
                                  indent=1))
    os.replace(partial, path)


def resumed(path: Path | None) -> list[dict]:
    """The episodes an interrupted run of the same command kept in `path`, to be left out of this one."""
    if path is None or not path.is_file():
        raise SystemExit("--resume needs the --json file of the interrupted run")
    return json.loads(path.read_text())["episodes"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m helpers.bench.agent", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3, help="how many seeds (default 3)")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="start the seeds here (default 0), to add seeds to an earlier run with --from")
    parser.add_argument("--tasks", nargs="*", default=None,
                        help="task ids (default: all of data/tasks.json; for --policy obedient, every injected task)")
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=CONFIGS)
    parser.add_argument("--policy", default="model", help="model, scripted, obedient or replay:PATH")
    parser.add_argument("--max-steps", type=int, default=None, help=f"(default {MAX_STEPS}; not with --horizon)")
    parser.add_argument("--horizon", action="store_true",
                        help=f"ask each task from each start of --starts (default tasks: {' '.join(HORIZON_TASKS)})")
    parser.add_argument("--starts", nargs="+", default=list(STARTS), choices=STARTS,
                        help="with --horizon, where the tasks start (default: all)")
    parser.add_argument("--slack", type=int, default=SLACK,
                        help=f"with --horizon, the steps an episode may take beyond its horizon (default {SLACK})")
    parser.add_argument("--narrowings", nargs="*", default=list(NARROWINGS), choices=NARROWINGS,
                        help="which constraints the grounded, governed and handwritten configurations apply "
                             "(default: all; handwritten adds its rules to them)")
    parser.add_argument("--json", type=Path, default=None, help="write episodes and summary here")
    parser.add_argument("--chart", type=Path, default=None, help="draw the chart here (PNG)")
    parser.add_argument("--resume", action="store_true",
                        help="go on with an interrupted run: keep the episodes its --json file holds, run the rest")
    parser.add_argument("--trace", type=Path, default=None, help="a folder for one JSONL trace per governed episode")
    parser.add_argument("--from", dest="sources", type=Path, nargs="+", default=None, metavar="JSON",
                        help="instead of running: report on the episodes of earlier --json files, together")
    args = parser.parse_args(argv)
    if args.sources:
        report_files(args.sources, args.json, args.chart)
        return
    if args.horizon and args.max_steps is not None:
        parser.error("--horizon gives each episode its horizon plus --slack steps: leave out --max-steps")
    max_steps = MAX_STEPS if args.max_steps is None else args.max_steps
    tasks = injected_tasks() if args.policy == "obedient" else load_tasks()
    if args.horizon:
        try:
            tasks = horizon_tasks(args.tasks or list(HORIZON_TASKS), args.starts)
        except (KeyError, ValueError) as exc:
            parser.error(f"--horizon: {exc}")
    elif args.tasks:
        known = [*load_tasks(), *load_tasks(INJECTED_FILE)]
        unknown = set(args.tasks) - {t.id for t in known}
        if unknown:
            parser.error(f"unknown task ids {sorted(unknown)}; known: {', '.join(t.id for t in known)}")
        tasks = [t for t in known if t.id in args.tasks]
    conn = None
    if args.policy == "model":
        from helpers.runtime.backends import connect

        conn = connect()
    backend = conn.profile.name if conn else None
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    print(f"policy {args.policy}, backend {backend}, model {conn.model if conn else None}, "
          f"{len(tasks)} tasks x seeds {list(seeds)} x {len(args.configs)} configs", flush=True)
    horizons = {(task.id, seed): scripted_horizon(task, seed) for task in tasks for seed in seeds} \
        if args.horizon else {}
    arguments = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--resume"]
    command = "python -m helpers.bench.agent " + portable(arguments)
    meta = {"command": command, "policy": args.policy, "backend": backend, "model": conn.model if conn else None,
            "dialect": conn.profile.dialect if conn else None, "seeds": list(seeds),
            "tasks": [t.id for t in tasks], "configs": args.configs,
            "max_steps": f"horizon + {args.slack}" if args.horizon else max_steps,
            "narrowings": args.narrowings, "versions": software_versions()}
    records = resumed(args.json) if args.resume else []
    done = {(r["config"], r["task"], r["seed"]) for r in records}
    started = time.perf_counter()
    for config in args.configs:
        for task in tasks:
            for seed in seeds:
                if (config, task.id, seed) in done:
                    continue
                policy = make_policy(args.policy, task, seed, conn)
                tracer = Tracer(args.trace / f"{config}-{task.id}-{seed}.jsonl") if args.trace else None
                horizon = horizons.get((task.id, seed))
                try:
                    episode = run_episode(policy, task, seed, config, tracer=tracer,
                                          max_steps=max_steps if horizon is None else horizon + args.slack,
                                          repair=governed_repair(conn) if conn else None, narrowings=args.narrowings)
                except Exception as exc:  # a failed request (a server gone, a refusal): keep what ran, say how to go on
                    stopped = conceal(f"{config} {task.id} seed {seed}: {type(exc).__name__}: {exc}")
                    save(args.json, records, {**meta, "interrupted": stopped}, args.horizon)
                    raise SystemExit(f"stopped at {stopped}\n{len(records)} episodes are kept"
                                     + (f" in {args.json}; run the same command with --resume to go on"
                                        if args.json else "; pass --json FILE to keep them")) from exc
                record = episode.record()
                if horizon is not None:
                    record |= {"start": task.start, "horizon": horizon, "goal_right": goal_right(record, task),
                               "calls": calls_made(episode)}
                records.append(record)
                save(args.json, records, meta, args.horizon)
                print(episode_line(episode) + (f"  (horizon {horizon})" if horizon is not None else ""), flush=True)
    summary = summarize(records)
    print(f"\n{command}  ({time.perf_counter() - started:.0f} s)")
    print(table(summary))
    if args.horizon:
        print("\n" + horizon_table(by_horizon(records)))
    if args.chart:
        args.chart.parent.mkdir(parents=True, exist_ok=True)
        chart(summary, args.chart, f"{args.policy} policy, {meta['model'] or 'no model'}, "
                                   f"{len(tasks)} tasks x {args.seeds} seeds")


if __name__ == "__main__":
    main()
