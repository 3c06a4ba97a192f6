"""Benchmark the embedded server: `python -m helpers.server.bench --trials 10`, or `--flood 40`.

The default run measures guided and unguided decoding side by side. Every number comes from
one run on one machine, so the ratios are what to compare: absolute times move with the
machine and whatever else it is doing.

`--flood N` instead sends N requests at once, as a classroom might, and counts the answers:
every client must get one (200, or 429 when the queue is full), none may hang or be dropped,
and the server's resident memory is sampled throughout.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from helpers.contract import ANSWER_JSON_SCHEMA, parse_json_object
from helpers.server import MODEL_ID
from helpers.steps import STEP_SCHEMA

TASKS = [
    ("step", STEP_SCHEMA, "Screen: a sign-in page with a 'Username' field at (500, 300) and a 'Sign in' button at "
                          "(500, 520). Task: sign in as ada. Give the next step."),
    ("step", STEP_SCHEMA, "Screen: a search results page listing 'Blue mug' at (300, 400) and 'Red mug' at "
                          "(300, 480). Task: open the red mug. Give the next step."),
    ("answer", ANSWER_JSON_SCHEMA, "Question: When does the Northfield library open on Saturdays? "
                                   "Facts: [hours-library] The library opens at 10:00 on Saturdays."),
    ("answer", ANSWER_JSON_SCHEMA, "Question: Where can I print posters? Facts: [res-print] Poster printing is "
                                   "at the Media Lab, room B12."),
]


@dataclass
class ModeStats:
    per_token_ms: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    compile_ms: list[float] = field(default_factory=list)
    mask_p50: list[float] = field(default_factory=list)
    mask_p99: list[float] = field(default_factory=list)
    valid: int = 0
    stopped: int = 0
    stopped_valid: int = 0
    total: int = 0


def is_valid(text: str, schema: dict) -> bool:
    import jsonschema

    try:
        jsonschema.validate(parse_json_object(text), schema)
        return True
    except (ValueError, jsonschema.ValidationError):
        return False


def messages_for(schema: dict, task: str) -> list[dict]:
    return [{"role": "system", "content": "Reply with one JSON object that matches this schema, nothing else.\n"
                                          f"<output_format>\n```json\n{json.dumps(schema)}\n```\n</output_format>"},
            {"role": "user", "content": task}]


def run_mode(client, model: str, guided: bool, trials: int, max_tokens: int) -> ModeStats:
    from helpers.dialects import guided_json

    stats = ModeStats()
    for seed in range(trials):
        for _, schema, task in TASKS:
            fields = guided_json("response_format", schema, "output") if guided else {}
            reply = client.chat.completions.create(model=model, messages=messages_for(schema, task), seed=seed,
                                                   temperature=0.7, max_tokens=max_tokens, **fields)
            timings, tokens = reply.model_extra["timings"], reply.usage.completion_tokens
            if tokens > 1:
                stats.per_token_ms.append(timings["decode_ms"] / (tokens - 1))
            stats.ttft_ms.append(timings["time_to_first_token_ms"])
            if guided:
                stats.compile_ms.append(timings["grammar_compile_ms"])
                stats.mask_p50.append(timings["mask_us_per_token_p50"])
                stats.mask_p99.append(timings["mask_us_per_token_p99"])
            valid = is_valid(reply.choices[0].message.content, schema)
            stopped = reply.choices[0].finish_reason == "stop"
            stats.total += 1
            stats.valid += valid
            stats.stopped += stopped
            stats.stopped_valid += valid and stopped
    return stats


def startup_seconds(port: int, server_args: tuple[str, ...] = ()) -> float:
    from helpers.server.control import start_server

    started = time.perf_counter()
    start_server(port, extra_args=server_args)
    return time.perf_counter() - started


def median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def report(guided: ModeStats, plain: ModeStats, ready_s: float, step_compile_ms: float) -> str:
    ratio = median(guided.per_token_ms) / median(plain.per_token_ms)
    rows = [
        ("decode time per output token, median (ms)", f"{median(plain.per_token_ms):.2f}",
         f"{median(guided.per_token_ms):.2f}"),
        ("guided / unguided time per token", "", f"{ratio:.3f}x"),
        ("time to first token, median (ms)", f"{median(plain.ttft_ms):.1f}", f"{median(guided.ttft_ms):.1f}"),
        ("mask time per token p50 / p99 (us)", "",
         f"{median(guided.mask_p50):.0f} / {float(np.percentile(guided.mask_p99, 99)):.0f}"),
        ("schema compile, Step schema (ms)", "", f"{step_compile_ms:.2f}"),
        ("schema compile, all requests, median (ms)", "", f"{median(guided.compile_ms):.2f}"),
        ("schema-valid replies", f"{plain.valid}/{plain.total}", f"{guided.valid}/{guided.total}"),
        ("finished with stop", f"{plain.stopped}/{plain.total}", f"{guided.stopped}/{guided.total}"),
        ("valid among those that stopped", f"{plain.stopped_valid}/{plain.stopped}",
         f"{guided.stopped_valid}/{guided.stopped}"),
        ("server ready after start (s)", f"{ready_s:.2f}", ""),
    ]
    width = max(len(r[0]) for r in rows)
    lines = [f"| {'measure'.ljust(width)} | prompt-only | guided |", f"|{'-' * (width + 2)}|-------------|--------|"]
    lines += [f"| {name.ljust(width)} | {plain_value:>11} | {guided_value:>6} |" for name, plain_value, guided_value in rows]
    return "\n".join(lines)


def step_schema_compile_ms(client, model: str) -> float:
    from helpers.dialects import guided_json

    reply = client.chat.completions.create(model=model, messages=messages_for(STEP_SCHEMA, TASKS[0][2]),
                                           max_tokens=1, **guided_json("response_format", STEP_SCHEMA))
    return reply.model_extra["timings"]["grammar_compile_ms"]


def flood_request(url: str, seed: int, max_tokens: int, timeout: float) -> str:
    """One client of the flood: its HTTP status, or what went wrong when no answer came."""
    body = json.dumps({"model": MODEL_ID, "messages": messages_for(STEP_SCHEMA, TASKS[seed % 2][2]), "seed": seed,
                       "max_tokens": max_tokens, "temperature": 0.7}).encode()
    request = urllib.request.Request(url + "/chat/completions", data=body, headers={"Content-Type": "application/json"})
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            json.loads(response.read())
            return str(response.status)
    except urllib.error.HTTPError as error:
        answer = json.loads(error.read())
        return f"{error.code}" if "error" in answer else f"{error.code} without an error body"
    except (OSError, ValueError) as exc:
        return f"no answer ({type(exc).__name__})"


def resident_mib(pid: int) -> float | None:
    """The process's resident memory from /proc (Linux); None elsewhere."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def keep_busy(url: str, done: threading.Event) -> None:
    """Another model process working flat out on the same cores: a student running a notebook meanwhile."""
    seed = 0
    while not done.is_set():
        flood_request(url, seed, 200, 120)
        seed += 1


def flood(port: int, clients: int, max_tokens: int, timeout: float, load_port: int | None = None) -> str:
    from helpers.server.control import base_url, health

    pid, url, peak = health(port)["pid"], base_url(port), [0.0]
    done = threading.Event()
    if load_port:
        threading.Thread(target=keep_busy, args=(base_url(load_port), done), daemon=True).start()

    def sample_memory() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], resident_mib(pid) or 0.0)

    sampler = threading.Thread(target=sample_memory, daemon=True)
    sampler.start()
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        outcomes = Counter(pool.map(lambda seed: flood_request(url, seed, max_tokens, timeout), range(clients)))
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    answered = outcomes["200"] + outcomes["429"]
    after = health(port)
    rows = [("clients", clients), ("another model process busy meanwhile", "yes" if load_port else "no"), ("answered 200", outcomes["200"]), ("answered 429 (queue full)", outcomes["429"]),
            ("anything else", ", ".join(f"{k}: {v}" for k, v in outcomes.items() if k not in ("200", "429")) or 0),
            ("every client answered", "yes" if answered == clients else f"no ({clients - answered} not)"),
            ("/health after the flood", "answers" if after else "no answer"),
            ("peak resident memory (MiB)", f"{peak[0]:.0f}" if peak[0] else "n/a (no /proc)"),
            ("wall time (s)", f"{seconds:.1f}")]
    return "\n".join(["| measure | result |", "|---|---|", *[f"| {name} | {value} |" for name, value in rows]])


def main(argv: list[str] | None = None) -> None:
    from helpers.backends import embedded_client
    from helpers.server.control import base_url, stop_server

    parser = argparse.ArgumentParser(prog="python -m helpers.server.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10, help="seeds per task and mode (4 tasks each)")
    parser.add_argument("--max-tokens", type=int, default=200)
    parser.add_argument("--port", type=int, default=8799, help="a free port for the benchmark's own server")
    parser.add_argument("--flood", type=int, default=0, metavar="N",
                        help="instead: N clients at once, each asking for 60 tokens; count the answers")
    parser.add_argument("--flood-timeout", type=float, default=300.0, help="seconds each flood client waits")
    parser.add_argument("--threads", type=int, default=None, help="decode threads for the benchmark's server")
    parser.add_argument("--with-load", action="store_true",
                        help="with --flood: a second model server on --port + 1 decodes flat out meanwhile")
    args = parser.parse_args(argv)
    server_args = ("--threads", str(args.threads)) if args.threads else ()
    ready_s = startup_seconds(args.port, server_args)
    if args.flood:
        load_port = args.port + 1 if args.with_load else None
        try:
            if load_port:
                startup_seconds(load_port, server_args)
            table = flood(args.port, args.flood, 60, args.flood_timeout, load_port)
        finally:
            stop_server(args.port)
            if load_port:
                stop_server(load_port)
        print(f"python -m helpers.server.bench --flood {args.flood}{' --with-load' if load_port else ''}  "
              f"(60 tokens each, model {MODEL_ID})")
        print(table)
        return
    try:
        client = embedded_client(base_url(args.port))
        compile_ms = step_schema_compile_ms(client, MODEL_ID)
        plain, guided = ModeStats(), ModeStats()
        # Each mode runs twice, in ABBA order, so drift in machine load hits both alike.
        for mode_order in ((False, True), (True, False)):
            for is_guided in mode_order:
                part = run_mode(client, MODEL_ID, is_guided, max(1, args.trials // 2), args.max_tokens)
                merge(guided if is_guided else plain, part)
    finally:
        stop_server(args.port)
    threads = f" --threads {args.threads}" if args.threads else ""
    print(f"python -m helpers.server.bench --trials {args.trials} --max-tokens {args.max_tokens}{threads}  "
          f"({len(TASKS)} tasks x {args.trials} seeds per mode, model {MODEL_ID})")
    print(report(guided, plain, ready_s, compile_ms))


def merge(into: ModeStats, part: ModeStats) -> None:
    for name, value in vars(part).items():
        setattr(into, name, getattr(into, name) + value)


if __name__ == "__main__":
    main()
