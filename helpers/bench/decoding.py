"""Benchmark the embedded server: `python -m helpers.bench.decoding --schema step`, `--termination` or `--flood 40`.

The default run measures guided and unguided decoding side by side, for one kind of schema
(`--schema step|answer|per-screen`). Every number comes from one run on one machine, so the
ratios are what to compare: absolute times move with the machine and whatever else it is doing.

`--termination` asks for guided replies on schemas whose free-text strings are unbounded, without
and with a penalty, and counts the replies that finish with `stop` before `max_tokens`.

`--flood N` instead sends N requests at once, as a classroom might, and counts the answers:
every client must get one (200, or 429 when the queue is full), none may hang or be dropped,
and the server's resident memory is sampled throughout.

`--settings` and `--batch-cost` time llama.cpp itself, no server: its settings side by side, and what a
fast-forward batch saves against evaluating its tokens one by one, by context length.
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
from helpers.runtime.paths import DATA
from helpers.runtime.embedded import model_id
from helpers.steps import STEP_SCHEMA

STEP_TASKS = [
    "Screen: a sign-in page with a 'Username' field at (500, 300) and a 'Sign in' button at (500, 520). "
    "Task: sign in as ada. Give the next step.",
    "Screen: a search results page listing 'Blue mug' at (300, 400) and 'Red mug' at (300, 480). "
    "Task: open the red mug. Give the next step.",
    "Screen: a product page for 'Travel mug' showing 'Price: $12.50' at (500, 260) and an 'Add to cart' button at "
    "(500, 600). Task: what does the travel mug cost? Give the next step.",
    "Screen: an empty search box 'Search products' at (500, 200), focused, and a 'Search' button at (800, 200). "
    "Task: find the campus hoodie. Give the next step.",
]
ANSWER_TASKS = [
    "Question: When does the Northfield library open on Saturdays? "
    "Facts: [hours-library] The library opens at 10:00 on Saturdays.",
    "Question: Where can I print posters? Facts: [res-print] Poster printing is at the Media Lab, room B12.",
    "Question: Is the pool open on Mondays? Facts: [hours-pool] The pool is closed on Mondays for cleaning.",
    "Question: Who won the 1962 chess championship? Facts: none found.",
]
# The first step of these store tasks, each with the Step schema narrowed to the screen it starts on.
PER_SCREEN_TASKS = ("sign_in", "price", "stock", "cheaper")
SCHEMAS = ("step", "answer", "per-screen")
# The start of a Step reply: the tokens the llama.cpp measurements evaluate one by one and in a batch.
BATCH_PROBE = b'{"note": null, "thought": "Type the user name first.", "tool_call": {'
UNBOUNDED_CASES = DATA / "bench" / "unbounded_strings.jsonl"
# A moderate penalty of each kind, beside none at all; each is a separate run over every case.
PENALTIES: dict[str, dict] = {
    "no penalty": {},
    "frequency_penalty 0.5": {"frequency_penalty": 0.5},
    "presence_penalty 0.5": {"presence_penalty": 0.5},
    "repetition_penalty 1.2": {"extra_body": {"repetition_penalty": 1.2}},
}


@dataclass
class Case:
    """One benchmark request: the schema it is guided by and the conversation it continues."""

    schema: dict
    messages: list[dict]


@dataclass
class ModeStats:
    per_token_ms: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    compile_ms: list[float] = field(default_factory=list)
    mask_p50: list[float] = field(default_factory=list)
    mask_p99: list[float] = field(default_factory=list)
    whole_mask_p50: list[float] = field(default_factory=list)
    prompt_tokens_per_s: list[float] = field(default_factory=list)
    fast_forward_batches: list[int] = field(default_factory=list)
    forced: int = 0
    whole_masks: int = 0
    tokens: int = 0
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


def cases(schema_name: str) -> list[Case]:
    """The requests a run sends for `--schema`: four tasks, each the same in both modes."""
    if schema_name == "step":
        return [Case(STEP_SCHEMA, messages_for(STEP_SCHEMA, task)) for task in STEP_TASKS]
    if schema_name == "answer":
        return [Case(ANSWER_JSON_SCHEMA, messages_for(ANSWER_JSON_SCHEMA, task)) for task in ANSWER_TASKS]
    from helpers.loop import observation_message, system_prompt
    from helpers.screen_schema import per_screen_schema
    from helpers.world.tasks import instruction, load_tasks, start_app

    chosen = [task for task in load_tasks() if task.id in PER_SCREEN_TASKS]
    found = []
    for task in chosen:
        app = start_app(task, seed=0)
        schema = per_screen_schema(app)
        found.append(Case(schema, [{"role": "system", "content": system_prompt(schema)},
                                   {"role": "user", "content": f"Task: {instruction(task, app)}"},
                                   observation_message(app, image=False)]))
    return found


def uncached(messages: list[dict], tag: str) -> list[dict]:
    """`messages` with a first line the server has not seen, so the whole prompt is evaluated afresh."""
    first = messages[0]
    return [{**first, "content": f"[{tag}]\n{first['content']}"}, *messages[1:]]


def run_mode(client, model: str, guided: bool, chosen: list[Case], seeds: range, max_tokens: int) -> ModeStats:
    """One pass of one mode; its first request starts from an uncached prompt, to measure prompt evaluation."""
    from helpers.runtime.dialects import guided_json

    stats = ModeStats()
    for seed in seeds:
        for index, case in enumerate(chosen):
            # structured_outputs sends the schema as it is (response_format would rewrite it into OpenAI's subset);
            # the embedded server enforces every dialect alike.
            fields = guided_json("structured_outputs", case.schema, "output") if guided else {}
            fresh = seed == seeds[0] and index == 0
            messages = uncached(case.messages, f"guided={guided} seed={seed}") if fresh else case.messages
            reply = client.chat.completions.create(model=model, messages=messages, seed=seed, temperature=0.7,
                                                   max_tokens=max_tokens, **fields)
            record(stats, reply, case.schema, guided, fresh)
    return stats


def record(stats: ModeStats, reply, schema: dict, guided: bool, uncached_prompt: bool) -> None:
    timings, tokens = reply.model_extra["timings"], reply.usage.completion_tokens
    if tokens > 1:
        stats.per_token_ms.append(timings["decode_ms"] / (tokens - 1))
    stats.ttft_ms.append(timings["time_to_first_token_ms"])
    if uncached_prompt:  # the whole prompt was evaluated (`uncached`): it times prompt evaluation
        stats.prompt_tokens_per_s.append(reply.usage.prompt_tokens / timings["prompt_eval_ms"] * 1000)
    if guided:
        stats.compile_ms.append(timings["grammar_compile_ms"])
        stats.mask_p50.append(timings["mask_us_per_token_p50"])
        stats.mask_p99.append(timings["mask_us_per_token_p99"])
        stats.fast_forward_batches.append(timings["fast_forward_batches"])
        stats.forced += timings["forced_tokens"]
        stats.whole_masks += timings["whole_masks"]
        if timings["whole_mask_us_p50"] is not None:
            stats.whole_mask_p50.append(timings["whole_mask_us_p50"])
    stats.tokens += tokens
    valid = is_valid(reply.choices[0].message.content, schema)
    stopped = reply.choices[0].finish_reason == "stop"
    stats.total += 1
    stats.valid += valid
    stats.stopped += stopped
    stats.stopped_valid += valid and stopped


def startup_seconds(port: int, server_args: tuple[str, ...] = ()) -> float:
    from helpers.runtime.embedded import start_server

    started = time.perf_counter()
    start_server(port, extra_args=server_args)
    return time.perf_counter() - started


def median(values: list[float]) -> float:
    return float(np.median(values)) if values else float("nan")


def markdown_table(header: tuple[str, ...], rows: list[tuple]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(value) for value in row) + " |" for row in rows])


def report(guided: ModeStats, plain: ModeStats, ready_s: float) -> str:
    ratio = median(guided.per_token_ms) / median(plain.per_token_ms)
    p99 = f"{float(np.percentile(guided.mask_p99, 99)):.0f}" if guided.mask_p99 else "nan"
    rows = [
        ("decode time per output token, median (ms)", f"{median(plain.per_token_ms):.2f}",
         f"{median(guided.per_token_ms):.2f}"),
        ("guided / unguided time per token", "", f"{ratio:.3f}x"),
        ("forced tokens (of all output tokens)", "", f"{guided.forced}/{guided.tokens} "
                                                      f"({guided.forced / max(guided.tokens, 1):.0%})"),
        ("fast-forward batches per reply, median", "", f"{median(guided.fast_forward_batches):.0f}"),
        ("grammar time per token p50 / p99 (us)", "", f"{median(guided.mask_p50):.0f} / {p99}"),
        ("tokens that needed the whole mask", "", f"{guided.whole_masks}/{guided.tokens} "
                                                   f"({guided.whole_masks / max(guided.tokens, 1):.0%})"),
        ("whole mask, computed and applied, p50 (us)", "", f"{median(guided.whole_mask_p50):.0f}"),
        ("prompt evaluation, uncached (tokens/s)", f"{median(plain.prompt_tokens_per_s):.0f}",
         f"{median(guided.prompt_tokens_per_s):.0f}"),
        ("time to first token, median (ms)", f"{median(plain.ttft_ms):.1f}", f"{median(guided.ttft_ms):.1f}"),
        ("schema compile, median (ms)", "", f"{median(guided.compile_ms):.2f}"),
        ("schema-valid replies", f"{plain.valid}/{plain.total}", f"{guided.valid}/{guided.total}"),
        ("finished with stop", f"{plain.stopped}/{plain.total}", f"{guided.stopped}/{guided.total}"),
        ("valid among those that stopped", f"{plain.stopped_valid}/{plain.stopped}",
         f"{guided.stopped_valid}/{guided.stopped}"),
        ("server ready after start (s)", f"{ready_s:.2f}", ""),
    ]
    return markdown_table(("measure", "unguided", "guided"), rows)


def load_unbounded_cases(path: Path = UNBOUNDED_CASES) -> list[dict]:
    """Schemas whose free-text strings have no maxLength, each with a prompt: `{"name", "prompt", "schema"}`."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def termination(client, model: str, max_tokens: int, temperature: float, seeds: int) -> str:
    """How many guided replies on unbounded-string schemas finish with `stop`, without and with each penalty."""
    from helpers.runtime.dialects import guided_json

    rows = []
    chosen = load_unbounded_cases()
    for name, penalty in PENALTIES.items():
        stopped = stopped_valid = total = 0
        lengths = []
        for seed in range(seeds):
            for case in chosen:
                reply = client.chat.completions.create(
                    model=model, messages=messages_for(case["schema"], case["prompt"]), seed=seed,
                    temperature=temperature, max_tokens=max_tokens,
                    **guided_json("structured_outputs", case["schema"], case["name"]), **penalty)
                stop = reply.choices[0].finish_reason == "stop"
                total += 1
                stopped += stop
                stopped_valid += stop and is_valid(reply.choices[0].message.content, case["schema"])
                lengths.append(reply.usage.completion_tokens)
        rows.append((name, f"{stopped}/{total} ({stopped / total:.0%})", f"{stopped_valid}/{stopped}",
                     f"{median(lengths):.0f}"))
    return markdown_table(("penalty", "finished with stop", "valid among those that stopped",
                           "output tokens, median"), rows)


def one_by_one_and_batched(engine, context: int, tokens: list[int], batch_threads: int) -> tuple[float, float, float]:
    """Evaluate `tokens` after the first `context` cached tokens one by one (on the decode thread), then again in
    one batch (on `batch_threads`): ms per token each way, and how far the batch moved the last logits."""
    engine.llm.n_tokens = context
    started = time.perf_counter()
    for token in tokens:
        engine.llm.eval([token])
    single_ms = (time.perf_counter() - started) / len(tokens) * 1000
    one_by_one = engine._logits().copy()
    engine.llm.n_tokens = context
    engine._set_threads(batch_threads)
    started = time.perf_counter()
    engine.llm.eval(tokens)
    batch_ms = (time.perf_counter() - started) / len(tokens) * 1000
    engine._set_threads(engine.n_threads)
    return single_ms, batch_ms, float(np.max(np.abs(engine._logits() - one_by_one)))


def batch_cost(contexts: tuple[int, ...] = (40, 500, 1000, 2000, 3000), rounds: int = 3) -> str:
    """What a fast-forward batch saves, by context length: one token against a batch of 8, per token.

    With flash attention and without, on one thread and on two (the median of `rounds`); the last column is
    how far the batch moves the logits from one-by-one evaluation, which must be 0 for fast-forward to keep a
    reply token for token.
    """
    from helpers.server.engine import Engine

    rows = []
    for flash_attn in (True, False):
        engine = Engine(n_ctx=4096, flash_attn=flash_attn)
        filler = engine.llm.tokenize(b"The campus store sells mugs, hoodies and notebooks. " * 400, add_bos=True)
        probe = engine.llm.tokenize(BATCH_PROBE, add_bos=False)[:8]
        for context in contexts:
            engine.llm.n_tokens = 0
            engine._load_prompt(filler[:context])
            runs = {threads: [one_by_one_and_batched(engine, context, probe, threads) for _ in range(rounds)]
                    for threads in (1, 2)}
            single_ms = median([run[0] for run in runs[1] + runs[2]])
            batch_1, batch_2 = (median([run[1] for run in runs[threads]]) for threads in (1, 2))
            moved = max(run[2] for run in runs[1] + runs[2])
            rows.append(("on" if flash_attn else "off", context, f"{single_ms:.2f}", f"{batch_1:.2f}",
                         f"{batch_2:.2f}", f"{batch_2 / single_ms:.2f}", f"{moved:.3f}"))
        del engine
    header = ("flash attention", "context (tokens)", "one token, 1 thread (ms)", "batch of 8, 1 thread (ms/token)",
              "batch of 8, 2 threads (ms/token)", "2-thread batch / one token", "batch moves logits by")
    return markdown_table(header, rows)


def settings_sweep(flash_attn: tuple[bool, ...] = (False, True), batches: tuple[int, ...] = (128, 512, 2048),
                   prompt_threads: tuple[int, ...] = (1, 2), rounds: int = 4) -> str:
    """llama.cpp settings side by side on the `--schema step` prompt: the median of `rounds` runs in ABBA order.

    Per setting: uncached prompt evaluation, one decoded token, a batch of 8 tokens as fast-forward evaluates
    it (on the decode thread), and how far that batch moves the logits from evaluating the same 8 tokens one by
    one: 0 means fast-forward cannot change a reply.
    """
    from helpers.server.engine import DECODE_THREADS, Engine

    grid = [(fa, batch, threads) for fa in flash_attn for batch in batches for threads in prompt_threads]
    probe = Engine(n_ctx=4096)
    prompt = probe.prompt_tokens(cases("step")[0].messages)
    reply = probe.llm.tokenize(BATCH_PROBE, add_bos=False)
    del probe
    samples: dict[tuple, list[tuple[float, ...]]] = {setting: [] for setting in grid}
    for round_ in range(rounds):
        for setting in grid if round_ % 2 == 0 else grid[::-1]:
            fa, batch, threads = setting
            engine = Engine(n_ctx=4096, n_threads=DECODE_THREADS, n_threads_batch=threads, flash_attn=fa, n_batch=batch)
            started = time.perf_counter()
            engine._load_prompt(prompt)
            prompt_s = time.perf_counter() - started
            single_ms, batch_ms, moved = one_by_one_and_batched(engine, len(prompt), reply[:8], DECODE_THREADS)
            samples[setting].append((len(prompt) / prompt_s, single_ms, batch_ms, moved))
            del engine
    rows = []
    for (fa, batch, threads), values in samples.items():
        tokens_per_s, single_ms, batch_ms, moved = np.median(values, axis=0)
        rows.append(("on" if fa else "off", batch, threads, f"{tokens_per_s:.0f}", f"{single_ms:.2f}",
                     f"{batch_ms:.2f}", f"{moved:.3f}"))
    header = ("flash attention", "n_batch = n_ubatch", "prompt threads", f"prompt of {len(prompt)} tokens (tokens/s)",
              "one token (ms)", "batch of 8, per token (ms)", "batch of 8 moves logits by")
    return markdown_table(header, rows)


def flood_request(server, seed: int, max_tokens: int, timeout: float) -> str:
    """One client of the flood: its HTTP status, or what went wrong when no answer came."""
    body = json.dumps({"model": model_id(), "messages": messages_for(STEP_SCHEMA, STEP_TASKS[seed % 2]), "seed": seed,
                       "max_tokens": max_tokens, "temperature": 0.7}).encode()
    request = urllib.request.Request(server.url + "/chat/completions", data=body,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": f"Bearer {server.key}"})
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


def keep_busy(server, done: threading.Event) -> None:
    """Another model process working flat out on the same cores: a student running a notebook meanwhile."""
    seed = 0
    while not done.is_set():
        flood_request(server, seed, 200, 120)
        seed += 1


def flood(port: int, clients: int, max_tokens: int, timeout: float, load_port: int | None = None) -> str:
    from helpers.runtime.embedded import find_server, health

    server = find_server(port)
    pid, peak = server.pid, [0.0]
    done = threading.Event()
    if load_port:
        threading.Thread(target=keep_busy, args=(find_server(load_port), done), daemon=True).start()

    def sample_memory() -> None:
        while not done.wait(0.2):
            peak[0] = max(peak[0], resident_mib(pid) or 0.0)

    sampler = threading.Thread(target=sample_memory, daemon=True)
    sampler.start()
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        outcomes = Counter(pool.map(lambda seed: flood_request(server, seed, max_tokens, timeout), range(clients)))
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    answered = outcomes["200"] + outcomes["429"]
    after = health(server)
    rows = [("clients", clients), ("another model process busy meanwhile", "yes" if load_port else "no"), ("answered 200", outcomes["200"]), ("answered 429 (queue full)", outcomes["429"]),
            ("anything else", ", ".join(f"{k}: {v}" for k, v in outcomes.items() if k not in ("200", "429")) or 0),
            ("every client answered", "yes" if answered == clients else f"no ({clients - answered} not)"),
            ("/health after the flood", "answers" if after else "no answer"),
            ("peak resident memory (MiB)", f"{peak[0]:.0f}" if peak[0] else "n/a (no /proc)"),
            ("wall time (s)", f"{seconds:.1f}")]
    return "\n".join(["| measure | result |", "|---|---|", *[f"| {name} | {value} |" for name, value in rows]])


def main(argv: list[str] | None = None) -> None:
    from helpers.runtime.client import embedded_client
    from helpers.runtime.embedded import find_server, stop_server

    parser = argparse.ArgumentParser(prog="python -m helpers.bench.decoding", description=__doc__.splitlines()[0])
    parser.add_argument("--schema", choices=SCHEMAS, default="step",
                        help="the schema of the 4 tasks: the Holo3 Step, the answer contract, or the Step "
                             "narrowed to each task's first screen (default step)")
    parser.add_argument("--trials", type=positive, default=10,
                        help="seeds per task and mode, 4 tasks each (default 10); with --termination, seeds per "
                             "schema and penalty")
    parser.add_argument("--max-tokens", type=int, default=200, help="per reply (default 200)")
    parser.add_argument("--port", type=int, default=8799, help="a free port for the benchmark's own server")
    parser.add_argument("--flood", type=int, default=0, metavar="N",
                        help="instead: N clients at once, each asking for 60 tokens; count the answers")
    parser.add_argument("--flood-timeout", type=float, default=300.0, help="seconds each flood client waits")
    parser.add_argument("--termination", action="store_true",
                        help=f"instead: guided replies on the schemas in {UNBOUNDED_CASES.name}, whose strings "
                             "have no maxLength, without and with each penalty; count those that stop")
    parser.add_argument("--temperature", type=float, default=0.0, help="with --termination (default 0: greedy)")
    parser.add_argument("--settings", action="store_true",
                        help="instead: llama.cpp settings (flash attention, batch size, prompt threads) side by "
                             "side, on the model directly, no server")
    parser.add_argument("--batch-cost", action="store_true",
                        help="instead: one token against a batch of 8, per token, by context length, with and "
                             "without flash attention, on the model directly, no server")
    parser.add_argument("--threads", type=int, default=None, help="decode threads for the benchmark's server")
    parser.add_argument("--with-load", action="store_true",
                        help="with --flood: a second model server on --port + 1 decodes flat out meanwhile")
    args = parser.parse_args(argv)
    if args.settings:
        print(f"python -m helpers.bench.decoding --settings  (model {model_id()}, median of 4 runs per setting, ABBA)")
        print(settings_sweep())
        return
    if args.batch_cost:
        print(f"python -m helpers.bench.decoding --batch-cost  (model {model_id()}, median of 3 runs)")
        print(batch_cost())
        return
    server_args = ("--threads", str(args.threads)) if args.threads else ()
    threads = f" --threads {args.threads}" if args.threads else ""
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
        print(f"python -m helpers.bench.decoding --flood {args.flood}{' --with-load' if load_port else ''}{threads}  "
              f"(60 tokens each, model {model_id()})")
        print(table)
        return
    server = find_server(args.port)
    client = embedded_client(server.url, server.key)
    if args.termination:
        try:
            table = termination(client, model_id(), args.max_tokens, args.temperature, args.trials)
        finally:
            stop_server(args.port)
        print(f"python -m helpers.bench.decoding --termination --trials {args.trials} --max-tokens {args.max_tokens} "
              f"--temperature {args.temperature}{threads}  ({len(load_unbounded_cases())} schemas x {args.trials} "
              f"seeds per penalty, model {model_id()})")
        print(table)
        return
    try:
        chosen = cases(args.schema)
        plain, guided = ModeStats(), ModeStats()
        for seeds, order in abba(args.trials):
            for is_guided in order:
                part = run_mode(client, model_id(), is_guided, chosen, seeds, args.max_tokens)
                merge(guided if is_guided else plain, part)
    finally:
        stop_server(args.port)
    print(f"python -m helpers.bench.decoding --schema {args.schema} --trials {args.trials} --max-tokens "
          f"{args.max_tokens}{threads}  ({len(chosen)} tasks x {args.trials} seeds per mode, model {model_id()})")
    print(report(guided, plain, ready_s))


def merge(into: ModeStats, part: ModeStats) -> None:
    for name, value in vars(part).items():
        setattr(into, name, getattr(into, name) + value)


def abba(trials: int) -> tuple[tuple[range, tuple[bool, bool]], ...]:
    """The passes of a run, as (seeds, guided or not in order): unguided then guided on the first seeds, guided then
    unguided on the rest, so that drift in the machine's load hits both modes alike. Each mode runs every seed of
    range(trials); an odd count gives the first pass the extra seed."""
    first = (trials + 1) // 2
    return (range(first), (False, True)), (range(first, trials), (True, False))


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of 1 or more")
    return int(text)


if __name__ == "__main__":
    main()
