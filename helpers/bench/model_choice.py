"""Which model to embed, by measurement: `python -m helpers.bench.model_choice [GGUF ...]`.

For each GGUF file (default: the embedded SmolLM2-135M-Instruct), loaded the way the embedded server loads its own
(the same engine, one decode thread), the goal step of notebook 06 on every task of data/tasks.json: the model
reads the instruction into a goal under the grounded goal schema, at temperature 0, once (no user, no second
try), and the reading is right when it is the task's own goal, the simulated user's test. It reports how many it
read right, which ones, and the decode speed over those replies (completion tokens per second of decoding).

A file the engine cannot serve (not a model llama.cpp loads, no chat template in its metadata) is reported as such,
in the words the embedded server would say it in.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from helpers.agent import parse_goal
from helpers.goal import GOAL_TOKENS, goal_messages, goal_schema
from helpers.runtime.dialects import Constraint
from helpers.world.store import CATALOG
from helpers.world.tasks import Task, instruction, load_tasks, same_goal, start_app, task_goal


def read_goals(path: Path | None, tasks: list[Task], seed: int = 0) -> dict:
    """The goal step on `tasks` with the model in `path` (None: the embedded one): right readings, decode speed."""
    from helpers.runtime.embedded import ServerError
    from helpers.server.engine import Engine
    from helpers.server.protocol import ChatRequest

    loaded = time.perf_counter()
    try:
        engine = Engine(path)
    except (ServerError, RuntimeError) as exc:  # no chat model, or a template the engine cannot tell contents in
        return {"model": Path(path).name if path else "embedded", "error": str(exc)}
    load_s = time.perf_counter() - loaded
    readings, completion_tokens, decode_ms = [], 0, 0.0
    for task in tasks:
        app = start_app(task, seed)
        text = instruction(task, app)
        schema = goal_schema(text, CATALOG)
        request = ChatRequest("model", goal_messages(text, schema), Constraint("json_schema", schema, "schema"),
                              temperature=0.0, seed=seed, max_tokens=GOAL_TOKENS)
        completion = engine.run(engine.prepare(request))
        goal = parse_goal(completion.text, schema)
        right = goal is not None and same_goal(goal.model_dump(), task_goal(task, app))
        readings.append({"task": task.id, "right": right, "reply": completion.text})
        completion_tokens += completion.completion_tokens
        decode_ms += completion.timings["decode_ms"]
    return {"model": Path(path).name if path else "embedded", "size_mb": round(Path(
        path or engine.llm.model_path).stat().st_size / 1e6), "load_s": round(load_s, 1),
            "goals_right": sum(r["right"] for r in readings), "tasks": len(readings),
            "tokens_per_s": round(completion_tokens / (decode_ms / 1000), 1) if decode_ms else None,
            "readings": readings}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m helpers.bench.model_choice", description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", type=Path, help="GGUF files (default: the embedded model)")
    parser.add_argument("--json", type=Path, default=None, help="write every reading here")
    args = parser.parse_args(argv)
    tasks = load_tasks()
    results = [read_goals(path, tasks) for path in (args.models or [None])]
    print("| model | size (MB) | goals read right | decode tokens/s (1 thread) |\n|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['model']} | | cannot be served: {r['error'][:80]} | |")
        else:
            print(f"| {r['model']} | {r['size_mb']} | {r['goals_right']} of {r['tasks']} | {r['tokens_per_s']} |")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
