"""Fast-forward on the real model: forced tokens skip the model's choice, never change the reply.

Each case decodes the same request twice on one engine, once step by step (every token evaluated as
soon as it is chosen) and once fast-forwarded (forced tokens wait and are evaluated in a batch with the
next chosen one), and compares the token ids. Both runs start from the same cache state: the prompt
fully cached, so only its last token is evaluated again.
"""
import dataclasses

import pytest

from helpers.contract import ANSWER_JSON_SCHEMA
from helpers.runtime.embedded import MODEL_ID
from helpers.bench.decoding import cases as bench_cases
from helpers.bench.decoding import messages_for
from helpers.server.protocol import parse_chat_request

pytestmark = [pytest.mark.integration,
              pytest.mark.filterwarnings("ignore:llama_token_get_attr is deprecated:DeprecationWarning")]

CONST_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["tool_name", "element", "x", "y"],
                "properties": {"tool_name": {"const": "click"},
                               "element": {"enum": ["Sign in button at the bottom right", "Username field"]},
                               "x": {"const": 932}, "y": {"const": 880}}}


@pytest.fixture(scope="module")
def engine():
    from helpers.server.engine import Engine

    return Engine(n_ctx=4096)


def cases():
    for name in ("step", "per-screen"):
        first = bench_cases(name)[0]
        yield name, first.schema, first.messages
    yield "answer", ANSWER_JSON_SCHEMA, messages_for(ANSWER_JSON_SCHEMA, "Question: When does the library open?")
    yield "consts", CONST_SCHEMA, messages_for(CONST_SCHEMA, "Click the sign-in button.")


CASES = {name: (schema, messages) for name, schema, messages in cases()}


def decode(engine, messages, schema, fast_forward, **sampling):
    body = {"model": MODEL_ID, "messages": messages, "max_tokens": 120,
            "response_format": {"type": "json_schema", "json_schema": {"name": "case", "schema": schema}}, **sampling}
    job = engine.prepare(parse_chat_request(body, [MODEL_ID]))
    engine.run(dataclasses.replace(job, max_tokens=1, matcher=None))  # the same cache state for both runs
    return engine.run(dataclasses.replace(job, fast_forward=fast_forward))


GREEDY, T08, T1_TOP_P = {"temperature": 0.0}, {"temperature": 0.8, "seed": 3}, {"temperature": 1.0, "top_p": 0.9,
                                                                                  "seed": 11}


# Greedy and plain sampling (both checked after drawing) on every case; a nucleus, which takes the whole mask at
# every step, the simpler path, on the two short cases only: on the long step prompts it took about 45 s a case.
@pytest.mark.parametrize(("sampling", "name"), [*((GREEDY, name) for name in CASES), *((T08, name) for name in CASES),
                                                (T1_TOP_P, "answer"), (T1_TOP_P, "consts")],
                         ids=[*(f"greedy-{name}" for name in CASES), *(f"t0.8-{name}" for name in CASES),
                              "t1-top_p-answer", "t1-top_p-consts"])
def test_fast_forward_gives_the_step_by_step_reply_token_for_token(engine, name, sampling):
    schema, messages = CASES[name]
    step = decode(engine, messages, schema, False, **sampling)
    fast = decode(engine, messages, schema, True, **sampling)
    assert fast.tokens == step.tokens
    assert (fast.text, fast.finish_reason) == (step.text, step.finish_reason)
    assert fast.timings["forced_tokens"] == step.timings["forced_tokens"] > 0
    assert step.timings["fast_forward_batches"] == 0


@pytest.mark.parametrize("idle", [0, 1], ids=["one-thread-batches", "two-thread-batches"])
def test_batches_on_one_or_two_threads_give_the_same_reply(engine, monkeypatch, idle):
    import helpers.server.engine as engine_module

    schema, messages = CASES["per-screen"]
    step = decode(engine, messages, schema, False, temperature=0.0)
    monkeypatch.setattr(engine_module, "idle_cores", lambda: idle)
    fast = decode(engine, messages, schema, True, temperature=0.0)
    assert fast.tokens == step.tokens and fast.timings["fast_forward_batches"] > 0


@pytest.mark.parametrize("name", CASES)
def test_greedy_checked_after_drawing_is_greedy_under_the_whole_mask(engine, name):
    """Without a trace, greedy decoding draws first and has the grammar check the token, computing the whole mask
    only where a token may be forced or the draw is refused. A trace shows the whole mask at every step: each
    token must be the most likely one after it, and the reply the same as without a trace."""
    schema, messages = CASES[name]
    traced = decode(engine, messages, schema, False, temperature=0.0, x_trace=True)
    checked = decode(engine, messages, schema, True, temperature=0.0)
    assert checked.tokens == traced.tokens
    assert all(step["token"] == step["top_after_mask"][0][0] for step in traced.trace)
    assert checked.timings["forced_tokens"] == traced.timings["forced_tokens"]
    assert traced.timings["whole_masks"] == len(traced.trace)
    if name != "consts":  # all of whose tokens are forced but the enum's first: a mask at every step
        assert checked.timings["whole_masks"] < len(traced.trace)


@pytest.mark.parametrize("sampling", [T08, T1_TOP_P], ids=["t0.8", "t1-top_p"])
def test_a_sampled_reply_is_the_same_with_a_trace(engine, sampling):
    """A trace computes every mask to show it, but must not change what is drawn."""
    schema, messages = CASES["per-screen"]
    traced = decode(engine, messages, schema, False, x_trace=True, **sampling)
    plain = decode(engine, messages, schema, True, **sampling)
    assert plain.tokens == traced.tokens


def test_forced_runs_are_evaluated_in_batches(engine):
    schema, messages = CASES["consts"]
    fast = decode(engine, messages, schema, True, temperature=0.0)
    assert fast.finish_reason == "stop"
    # '{"tool_name": "click", "element": "' is all forced: it and the other const runs go in a few batches.
    assert fast.timings["forced_tokens"] > 10
    assert 0 < fast.timings["fast_forward_batches"] < fast.timings["forced_tokens"]


def test_a_trace_lists_every_token_and_marks_the_forced_ones(engine):
    schema, messages = CASES["consts"]
    body = {"model": MODEL_ID, "messages": messages, "max_tokens": 60, "temperature": 0.0, "x_trace": True,
            "response_format": {"type": "json_schema", "json_schema": {"name": "case", "schema": schema}}}
    traced = engine.run(engine.prepare(parse_chat_request(body, [MODEL_ID])))
    assert [step["token"] for step in traced.trace] == [engine.token_text(t) for t in traced.tokens]
    assert sum(step["forced"] for step in traced.trace) == traced.timings["forced_tokens"]
    assert all(step["forced"] == (step["allowed"] == 1) for step in traced.trace)
    assert all(step["top_before_mask"] for step in traced.trace)  # the model's view, even where it had no say


def test_a_penalty_changes_the_greedy_reply_but_never_its_validity(engine):
    import json
    from collections import Counter

    import jsonschema

    schema = {"type": "object", "additionalProperties": False, "required": ["story"],
              "properties": {"story": {"type": "string"}}}
    messages = messages_for(schema, "Write the word mug ten times.")
    plain = decode(engine, messages, schema, True, temperature=0.0)
    assert max(Counter(plain.tokens).values()) >= 5  # greedy repeats itself: what a penalty is for
    for penalty in ({"frequency_penalty": 2.0}, {"presence_penalty": 2.0}, {"repetition_penalty": 1.5}):
        penalised = decode(engine, messages, schema, True, temperature=0.0, **penalty)
        assert penalised.tokens != plain.tokens, penalty
        assert penalised.text.startswith('{"story": "')
        if penalised.finish_reason == "stop":
            jsonschema.validate(json.loads(penalised.text), schema)


def test_the_batch_cost_table_holds_flash_attention_to_exact_batches():
    """`bench --batch-cost`: a row per setting and context, and its last column the reason flash attention is on."""
    from helpers.bench.decoding import batch_cost

    lines = batch_cost(contexts=(40, 300), rounds=1).splitlines()
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    assert [(row[0], row[1]) for row in rows] == [("on", "40"), ("on", "300"), ("off", "40"), ("off", "300")]
    moved = {(row[0], row[1]): float(row[-1]) for row in rows}
    assert moved[("on", "40")] == moved[("on", "300")] == 0.0
    assert moved[("off", "300")] > 0.01
    assert all(float(value) > 0 for row in rows for value in row[2:6])
