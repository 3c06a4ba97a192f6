"""Prompt-only against guided decoding, in every dialect the backend speaks: `python -m helpers.compare --n 50`.

One task set (answer-contract questions and Holo3 step cases), N seeded trials per
mode, the same metrics for every mode. A mode the backend cannot speak is skipped
with the reason, never faked; a mode whose requests fail is recorded as failed, with
the server's reason, and the grid goes on.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import openai

from helpers.assistant import ENTRIES, fact_line
from helpers.contract import ANSWER_JSON_SCHEMA, ANSWER_TOKENS, parse_json_object, validate_answer
from helpers.ladder import ANSWER_CONTRACT, STEP_CONTRACT, climb, model_repair
from helpers.loop import execute, system_prompt
from helpers.runtime.dialects import guided_json
from helpers.runtime.paths import DATA
from helpers.runtime.strict_subset import left_out_nulls
from helpers.runtime.versions import software_versions
from helpers.pydantic_contract import model_errors
from helpers.steps import STEP_SCHEMA, STEP_TOKENS, Step
from helpers.world.scripted_policy import ScriptedPolicy
from helpers.world.tasks import instruction, load_tasks, start_app

MODES: dict[str, str] = {
    "prompt_only": "schema in the prompt, no constraint",
    "prompt_only+ladder": "prompt-only, then the repair ladder",
    "guided_backend": "guided in the backend's own dialect (conn.profile.dialect)",
    "guided_nvext": "guided via NIM nvext.guided_json",
    "guided_structured_outputs": "guided via structured_outputs.json",
    "guided_response_format": "guided via response_format json_schema",
    "guided_schema_not_in_prompt": "guided, schema not repeated in the prompt",
    "two_phase": "a free-form turn, then one enforced format turn",
}
MODE_DIALECT = {"guided_nvext": "nvext", "guided_structured_outputs": "structured_outputs",
                "guided_response_format": "response_format"}


@dataclass
class Case:
    """One question for the model, with its labels."""

    kind: str  # "answer" or "step"
    id: str
    messages_with_schema: list[dict]
    messages_without_schema: list[dict]
    schema: dict
    labels: dict
    question: str  # the question, or the step case's task, in words


@dataclass
class Trial:
    mode: str
    case: str
    seed: int
    valid: bool
    accurate: bool
    repair_calls: int
    fallback: bool
    seconds: float
    ttft_s: float | None  # from the trial's start to the first token of the reply meant to be the object
    completion_tokens: int | None
    text: str


@dataclass
class ModeResult:
    mode: str
    description: str
    skipped: str | None = None
    failed: str | None = None
    trials: list[Trial] = field(default_factory=list)

    def metrics(self) -> dict[str, Any]:
        if self.failed:
            return {"failed": self.failed, "completed_trials": len(self.trials)}
        if self.skipped or not self.trials:
            return {"skipped": self.skipped}
        seconds = [t.seconds for t in self.trials]
        ttft = [t.ttft_s for t in self.trials if t.ttft_s is not None]
        tokens = [t.completion_tokens for t in self.trials if t.completion_tokens is not None]
        n = len(self.trials)
        return {"n": n, "valid_rate": sum(t.valid for t in self.trials) / n,
                "accuracy": sum(t.accurate for t in self.trials) / n,
                "repair_calls": sum(t.repair_calls for t in self.trials),
                "fallbacks": sum(t.fallback for t in self.trials),
                "latency_p50_s": float(np.percentile(seconds, 50)), "latency_p95_s": float(np.percentile(seconds, 95)),
                "completion_tokens_mean": float(np.mean(tokens)) if tokens else None,
                "ttft_p50_s": float(np.percentile(ttft, 50)) if ttft else None}


# The longest valid answer (ANSWER_TOKENS) and step (STEP_TOKENS) both fit: a guided reply can always close.
GRID_TOKENS = max(ANSWER_TOKENS, STEP_TOKENS)


# --- the task set ---------------------------------------------------------------------------------------------

ANSWER_INSTRUCTIONS = ("You answer questions about Northfield Institute using only the facts given. "
                       "Cite fact ids in sources. If the facts do not answer, use status not_found.")


def answer_cases(limit: int | None = None) -> list[Case]:
    questions = [json.loads(line) for line in (DATA / "kb_questions.jsonl").read_text().splitlines() if line.strip()]
    cases = []
    for q in questions[:limit]:
        facts = [ENTRIES[s] for s in q["sources"] if s in ENTRIES] or list(ENTRIES.values())[:2]
        fact_text = "\n".join(fact_line(e) for e in facts)
        user = {"role": "user", "content": f"Facts:\n{fact_text}\n\nQuestion: {q['question']}"}
        with_schema = f"{ANSWER_INSTRUCTIONS}\nReply with one JSON object matching this schema:\n" \
                      f"{json.dumps(ANSWER_JSON_SCHEMA, separators=(',', ':'))}"
        cases.append(Case("answer", q["id"], [{"role": "system", "content": with_schema}, user],
                          [{"role": "system", "content": ANSWER_INSTRUCTIONS}, user], ANSWER_JSON_SCHEMA,
                          {"status": q["status"], "category": q["category"]}, q["question"]))
    return cases


def step_cases(limit: int | None = None) -> list[Case]:
    """Screens part-way through each task, labelled with the scripted reference policy's next step."""
    cases = []
    for task in load_tasks()[:limit]:
        app, policy = start_app(task, 0), ScriptedPolicy(task)
        execute(policy.next_step(app), app)  # label the second decision: the first screen is the same for most
        expected = policy.next_step(app)
        asked = instruction(task, app)
        user = {"role": "user", "content": f"Task: {asked}\n<observation>\n<screen_text>\n"
                                           f"{app.accessibility_tree()}\n</screen_text>\n</observation>"}
        bare = system_prompt().split("\n\n<output_format>")[0]
        cases.append(Case("step", task.id, [{"role": "system", "content": system_prompt()}, user],
                          [{"role": "system", "content": bare}, user], STEP_SCHEMA,
                          {"tool_name": expected.tool_call.tool_name,
                           "element": getattr(expected.tool_call, "element", None),
                           "content": getattr(expected.tool_call, "content", None)}, asked))
    return cases


# --- scoring ---------------------------------------------------------------------------------------------------

def validate(case: Case, data: Any) -> list[str]:
    return validate_answer(data) if case.kind == "answer" else model_errors(Step, data)


def accurate(case: Case, data: Any) -> bool:
    """Right content, not only right shape: the labelled fields match."""
    if not isinstance(data, dict) or validate(case, data):
        return False
    if case.kind == "answer":
        return data["status"] == case.labels["status"] and data["category"] == case.labels["category"]
    call, labels = data["tool_call"], case.labels
    same_text = str(call.get("content", "")).strip().lower() == str(labels["content"] or "").strip().lower()
    return call["tool_name"] == labels["tool_name"] and call.get("element") == labels["element"] and same_text


def parsed(text: str, schema: dict) -> Any:
    """The reply's JSON object as `schema` means it (`left_out_nulls`: the strict rewrite's nulls left out), or None
    when it holds none."""
    try:
        return left_out_nulls(schema, parse_json_object(text))
    except ValueError:
        return None


# --- one call, streamed so time to first token is measured on the client ---------------------------------------

@dataclass
class Call:
    text: str
    seconds: float
    ttft_s: float | None
    completion_tokens: int | None


def call(conn, messages: list[dict], seed: int, extra: dict, max_tokens: int) -> Call:
    started, first, pieces, usage = time.perf_counter(), None, [], None
    stream = conn.client.chat.completions.create(model=conn.model, messages=messages, seed=seed, temperature=0.7,
                                                 max_tokens=max_tokens, stream=True,
                                                 stream_options={"include_usage": True}, **extra)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            first = first or time.perf_counter()
            pieces.append(chunk.choices[0].delta.content)
        usage = chunk.usage or usage
    return Call("".join(pieces), time.perf_counter() - started, first and first - started,
                usage.completion_tokens if usage else None)


def guided_fields(profile, mode: str, case: Case) -> dict:
    """The request fields a mode sends: a fixed dialect, the backend's own dialect, or nothing."""
    if mode in MODE_DIALECT:
        return guided_json(MODE_DIALECT[mode], case.schema, case.kind)
    if mode in ("guided_backend", "guided_schema_not_in_prompt", "two_phase"):
        return profile.guided(case.schema, name=case.kind)
    return {}


def prompt_for(mode: str, case: Case) -> list[dict]:
    return case.messages_without_schema if mode == "guided_schema_not_in_prompt" else case.messages_with_schema


def run_trial(conn, mode: str, case: Case, seed: int, max_tokens: int) -> Trial:
    guided = guided_fields(conn.profile, mode, case)
    if mode == "two_phase":
        draft = call(conn, case.messages_without_schema, seed, {}, max_tokens)
        messages = case.messages_with_schema + [{"role": "assistant", "content": draft.text},
                                                {"role": "user", "content": "Now give exactly that as one JSON "
                                                                            "object matching the schema."}]
        final = call(conn, messages, seed, guided, max_tokens)
        # The object's first token comes after the whole first turn: what a user waits for (the NIM post's point).
        final.ttft_s = None if final.ttft_s is None else draft.seconds + final.ttft_s
        final.seconds += draft.seconds
    else:
        final = call(conn, prompt_for(mode, case), seed, guided, max_tokens)
    data, repairs, fallback = parsed(final.text, case.schema), 0, False
    if mode == "prompt_only+ladder":
        started = time.perf_counter()
        record = climb(final.text, ANSWER_CONTRACT if case.kind == "answer" else STEP_CONTRACT, model_repair(conn))
        final.seconds += time.perf_counter() - started
        data, repairs, fallback = record.data, int(record.repair_attempted), record.fallback_used
    valid = data is not None and not validate(case, data)
    return Trial(mode, case.id, seed, valid and not fallback, accurate(case, data) and not fallback, repairs,
                 fallback, final.seconds, final.ttft_s, final.completion_tokens, final.text)


def skip_reason(profile, mode: str) -> str | None:
    dialect = MODE_DIALECT.get(mode)
    if dialect and dialect not in profile.dialects_spoken:
        verdicts = dict(profile.probe_verdicts)
        if verdicts and dialect not in verdicts:
            return f"the {profile.name} backend was not asked about {dialect} (the probe asked about " \
                   f"{', '.join(verdicts)} only)"
        verdict = verdicts.get(dialect)
        return f"the {profile.name} backend does not speak {dialect}" + (f" (probe: {verdict})" if verdict else "")
    if mode not in ("prompt_only", "prompt_only+ladder") and profile.dialect == "prompt_only":
        return "the active dialect is prompt_only: no guided decoding"
    return None


def run_grid(conn, n: int, modes: list[str] | None = None, cases: list[Case] | None = None,
             max_tokens: int = GRID_TOKENS, progress: Callable | None = None) -> list[ModeResult]:
    """N trials per mode, cycling through the cases; cases stay grouped so the server's prompt cache helps.

    A request that fails (the server refuses it, or cannot be reached) ends its mode as failed, with the
    reason; the other modes still run.
    """
    cases = cases or answer_cases() + step_cases()
    results = []
    for mode in modes or list(MODES):
        result = ModeResult(mode, MODES[mode], skip_reason(conn.profile, mode))
        if result.skipped is None:
            plan = sorted(((i % len(cases), i) for i in range(n)), key=lambda pair: pair[0])
            try:
                for case_index, seed in progress(plan, desc=mode) if progress else plan:
                    result.trials.append(run_trial(conn, mode, cases[case_index], seed, max_tokens))
            except openai.APIError as exc:
                result.failed = failure_reason(exc)
        results.append(result)
    return results


def failure_reason(error: openai.APIError) -> str:
    """One line for the table: the first line of the error, which names the server's own reason."""
    return str(error).splitlines()[0][:300]


# --- results: save, load, chart -----------------------------------------------------------------------------

def save_results(results: list[ModeResult], conn, n: int, path: Path | str) -> None:
    payload = {"backend": conn.profile.name, "model": conn.model, "dialect": conn.profile.dialect,
               "dialect_reason": conn.profile.dialect_reason, "n": n,
               "seeds": list(range(n)), "versions": software_versions(),
               "modes": [{**asdict(r), "metrics": r.metrics()} for r in results]}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=1))


def load_results(path: Path | str) -> dict:
    return json.loads(Path(path).read_text())


def results_from(run: dict) -> list[ModeResult]:
    """A saved run's results again, for `table` and `plot_results`: a recorded grid shown without a model."""
    return [ModeResult(mode["mode"], mode["description"], mode["skipped"], mode["failed"],
                       [Trial(**trial) for trial in mode["trials"]]) for mode in run["modes"]]


def table(results: list[ModeResult]) -> str:
    header = "| mode | valid | accurate | repairs | fallbacks | p50 s | p95 s | tokens | TTFT p50 s |"
    lines = [header, "|" + "---|" * 9]
    for r in results:
        m = r.metrics()
        if m.get("failed"):
            lines.append(f"| {r.mode} | failed: {m['failed'].replace('|', '/')} |||||||| ")
            continue
        if m.get("skipped") or "n" not in m:
            lines.append(f"| {r.mode} | skipped: {m.get('skipped') or 'no trials'} |||||||| ")
            continue
        tokens = f"{m['completion_tokens_mean']:.0f}" if m["completion_tokens_mean"] is not None else "n/a"
        ttft = f"{m['ttft_p50_s']:.2f}" if m["ttft_p50_s"] is not None else "n/a"
        lines.append(f"| {r.mode} | {m['valid_rate']:.0%} | {m['accuracy']:.0%} | {m['repair_calls']} | "
                     f"{m['fallbacks']} | {m['latency_p50_s']:.2f} | {m['latency_p95_s']:.2f} | {tokens} | {ttft} |")
    return "\n".join(lines)


def plot_results(results: list[ModeResult], title_suffix: str = ""):
    """Three charts, one message each: validity by mode, latency by mode, accuracy against validity."""
    import matplotlib.pyplot as plt

    ran = [r for r in results if not r.skipped and not r.failed and r.trials]
    names = [r.mode for r in ran]
    metrics = [r.metrics() for r in ran]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    axes[0].barh(names, [m["valid_rate"] * 100 for m in metrics], color="#2e6fd8")
    axes[0].set(title=f"Schema-valid replies{title_suffix}", xlabel="% valid", xlim=(0, 100))
    axes[0].invert_yaxis()
    p50, p95 = [m["latency_p50_s"] for m in metrics], [m["latency_p95_s"] for m in metrics]
    axes[1].barh(names, p95, color="#c9d8f2", label="p95")
    axes[1].barh(names, p50, color="#2e6fd8", label="p50")
    axes[1].set(title="Latency per request", xlabel="seconds")
    axes[1].invert_yaxis()
    axes[1].legend()
    # Modes often land on the same point: distinct markers, drawn large to small, keep each one visible.
    markers = "osD^vPX*"
    for i, (name, m) in enumerate(zip(names, metrics)):
        axes[2].scatter(m["valid_rate"] * 100, m["accuracy"] * 100, s=160 - 16 * i, marker=markers[i % len(markers)],
                        label=name, alpha=0.8)
    axes[2].legend(fontsize=7, loc="upper left")
    axes[2].plot([0, 100], [0, 100], ls="--", color="grey", lw=1)
    axes[2].set(title="Valid is not the same as right", xlabel="% valid", ylabel="% accurate (labelled fields)",
                xlim=(-5, 105), ylim=(-5, 105))
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> None:
    from helpers.runtime.backends import connect, probe_the_rest
    from helpers.runtime.settings import BackendError

    parser = argparse.ArgumentParser(prog="python -m helpers.compare", description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50, help="trials per mode")
    parser.add_argument("--out", default="results", help="folder for results.json and charts.png")
    parser.add_argument("--max-tokens", type=int, default=GRID_TOKENS,
                        help=f"per reply (default {GRID_TOKENS}: the longest valid answer or step fits)")
    parser.add_argument("--modes", nargs="*", choices=list(MODES), default=None, help="default: every mode")
    args = parser.parse_args(argv)
    try:
        conn = connect()
        probe_the_rest(conn)
    except BackendError as exc:
        sys.exit(f"error: {exc}")
    print(conn.describe(), flush=True)
    try:
        from tqdm import tqdm as progress
    except ImportError:
        progress = None
    results = run_grid(conn, args.n, args.modes, max_tokens=args.max_tokens, progress=progress)
    out = Path(args.out)
    save_results(results, conn, args.n, out / "results.json")
    plot_results(results, f" ({conn.model})").savefig(out / "charts.png", dpi=110)
    modes = f" --modes {' '.join(args.modes)}" if args.modes else ""
    print(f"python -m helpers.compare --n {args.n}{modes}  (backend {conn.profile.name}, model {conn.model})")
    print(table(results))
    print(f"results: {out / 'results.json'}, charts: {out / 'charts.png'}")


if __name__ == "__main__":
    main()
