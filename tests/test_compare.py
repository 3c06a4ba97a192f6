import json
from dataclasses import replace
from types import SimpleNamespace

import pytest
from fake_openai_server import FakeServer

import helpers.compare
from helpers.compare import (MODES, Call, ModeResult, Trial, accurate, answer_cases, guided_fields, load_results,
                             prompt_for, run_grid, run_trial, save_results, skip_reason, step_cases, table)
from helpers.contract import format_error
from helpers.runtime.backends import connect, resolve_profile

ANSWER = answer_cases()[0]
STEP = step_cases()[1]


def trial(mode="prompt_only", valid=True, accurate=True, seconds=1.0, **extra):
    return Trial(mode, "q01", 0, valid, accurate, extra.get("repairs", 0), extra.get("fallback", False), seconds,
                 0.2, 40, "{}")


def test_the_task_set_has_both_contracts_with_labels():
    assert len(answer_cases()) >= 12 and len(step_cases()) >= 8
    assert set(ANSWER.labels) == {"status", "category"} and set(STEP.labels) == {"tool_name", "element", "content"}
    assert "<output_format>" in STEP.messages_with_schema[0]["content"]
    assert "<output_format>" not in STEP.messages_without_schema[0]["content"]


@pytest.mark.parametrize("mode,expected", [
    ("prompt_only", {}),
    ("guided_nvext", {"extra_body": {"nvext": {"guided_json": ANSWER.schema}}}),
    ("guided_structured_outputs", {"extra_body": {"structured_outputs": {"json": ANSWER.schema}}}),
])
def test_modes_map_to_their_dialect_whatever_the_backend(mode, expected):
    assert guided_fields(resolve_profile("embedded"), mode, ANSWER) == expected


def test_guided_backend_sends_what_the_backends_own_dialect_mode_sends():
    embedded = resolve_profile("embedded")
    assert guided_fields(embedded, "guided_backend", ANSWER) == guided_fields(embedded, "guided_response_format", ANSWER)


def test_backend_dialect_modes_follow_the_profile(monkeypatch):
    monkeypatch.setenv("NVIDIA_API_KEY", "nvapi-test")
    nvidia = resolve_profile("nvidia")
    assert guided_fields(nvidia, "guided_schema_not_in_prompt", ANSWER) == {
        "extra_body": {"nvext": {"guided_json": ANSWER.schema}}}
    assert prompt_for("guided_schema_not_in_prompt", ANSWER) is ANSWER.messages_without_schema
    assert guided_fields(nvidia, "guided_backend", ANSWER) == {"extra_body": {"nvext": {"guided_json": ANSWER.schema}}}
    assert prompt_for("guided_backend", ANSWER) is ANSWER.messages_with_schema


def test_modes_a_backend_cannot_speak_are_skipped_with_the_reason(monkeypatch):
    monkeypatch.setenv("HAI_API_KEY", "hai-test")
    hcompany = resolve_profile("hcompany")
    assert skip_reason(hcompany, "guided_nvext") == "the hcompany backend does not speak nvext"
    assert skip_reason(hcompany, "guided_structured_outputs") is None
    assert all(skip_reason(resolve_profile("embedded"), mode) is None for mode in MODES)
    assert skip_reason(resolve_profile("embedded", dialect="prompt_only"), "two_phase")
    assert skip_reason(resolve_profile("embedded", dialect="prompt_only"), "guided_backend")
    probed = replace(resolve_profile("embedded"), name="openai", dialects_spoken=frozenset({"json_object_schema"}),
                     probe_verdicts=(("nvext", "ignored"), ("json_object_schema", "enforced")))
    assert skip_reason(probed, "guided_nvext") == "the openai backend does not speak nvext (probe: ignored)"
    stopped_early = replace(probed, probe_verdicts=(("json_object_schema", "enforced"),))
    assert skip_reason(stopped_early, "guided_nvext") == \
        "the openai backend was not asked about nvext (the probe asked about json_object_schema only)"


def test_two_phases_first_token_of_the_object_waits_for_the_whole_first_turn(monkeypatch):
    """The NIM post's cost of a final format turn: TTFT counts the free-form turn, as a user waiting for it would."""
    turns = iter([Call("The library opens at 10:00.", 2.0, 0.5, 12), Call("{}", 1.0, 0.25, 2)])
    monkeypatch.setattr(helpers.compare, "call", lambda *_: next(turns))
    result = run_trial(SimpleNamespace(profile=resolve_profile("embedded")), "two_phase", ANSWER, 0, 64)
    assert (result.seconds, result.ttft_s) == (3.0, 2.25)


def test_a_case_says_its_question_in_words():
    assert ANSWER.question == "What time does the library open on Saturday?"
    assert STEP.question and STEP.question in STEP.messages_with_schema[1]["content"]


def test_accuracy_needs_validity_and_the_labelled_fields():
    right = {"status": ANSWER.labels["status"], "answer": "x", "category": ANSWER.labels["category"],
             "items": [], "missing": [], "sources": []}
    assert accurate(ANSWER, right)
    assert not accurate(ANSWER, {**right, "status": "not_found"})
    assert not accurate(ANSWER, {**right, "extra": 1})
    assert not accurate(ANSWER, None) and not accurate(ANSWER, format_error() | {"category": "campus_event"})


def test_metrics_and_table():
    result = ModeResult("prompt_only", "x", trials=[trial(valid=False, accurate=False, seconds=1.0),
                                                     trial(seconds=3.0)])
    metrics = result.metrics()
    assert (metrics["valid_rate"], metrics["accuracy"], metrics["latency_p50_s"]) == (0.5, 0.5, 2.0)
    assert metrics["completion_tokens_mean"] == 40
    skipped = ModeResult("guided_nvext", "x", skipped="the hcompany backend does not speak nvext")
    text = table([result, skipped])
    assert "| prompt_only | 50% | 50% |" in text and "skipped: the hcompany backend does not speak nvext" in text


class Profile:
    name, dialect, dialect_reason = "embedded", "response_format", "the embedded default"


class Conn:
    profile, model = Profile(), "m"


def test_results_save_and_load(tmp_path):
    results = [ModeResult("prompt_only", "x", trials=[trial()])]
    save_results(results, Conn(), 1, tmp_path / "r.json")
    loaded = load_results(tmp_path / "r.json")
    assert loaded["model"] == "m" and loaded["modes"][0]["metrics"]["valid_rate"] == 1.0
    assert "llguidance" in loaded["versions"] and loaded["dialect_reason"] == "the embedded default"


def refuse_guided(body, headers):
    """The fake refuses every request that carries response_format, as a server that cannot read it does."""
    if body.get("response_format"):
        return 500, {"error": {"message": "Input should be 'text' or 'json_object'"}}
    return None


def test_a_failing_mode_is_recorded_with_its_reason_and_the_grid_goes_on(monkeypatch, tmp_path):
    for name in ("WORKSHOP_BACKEND", "NVIDIA_API_KEY", "HAI_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    with FakeServer(refuse_guided) as fake:
        monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)
        monkeypatch.setenv("WORKSHOP_DIALECT", "response_format")  # told to, without probing
        conn = connect()
        results = run_grid(conn, 2, cases=[ANSWER])
        save_results(results, conn, 2, tmp_path / "r.json")
    by_mode = {r.mode: r for r in results}
    assert list(by_mode) == list(MODES)
    reason = "Error code: 500 - the openai backend refused a guided request in the response_format dialect: " \
             "Input should be 'text' or 'json_object'"
    for mode in ("guided_backend", "guided_response_format", "guided_schema_not_in_prompt", "two_phase"):
        assert by_mode[mode].failed == reason and by_mode[mode].trials == []
    for mode in ("prompt_only", "prompt_only+ladder"):  # the fake's canned reply is JSON of the wrong shape
        assert by_mode[mode].failed is None and len(by_mode[mode].trials) == 2
        assert by_mode[mode].metrics()["valid_rate"] == 0
    assert by_mode["guided_nvext"].skipped == "the openai backend was not asked about nvext (the probe asked " \
                                              "about response_format only)"
    text = table(results)
    assert f"| guided_backend | failed: {reason} |" in text and "| prompt_only | 0% | 0% |" in text
    saved = {m["mode"]: m for m in load_results(tmp_path / "r.json")["modes"]}
    assert saved["two_phase"]["failed"] == reason and saved["two_phase"]["metrics"]["failed"] == reason


@pytest.mark.integration
def test_a_tiny_grid_against_the_embedded_server(server_url):
    from helpers.runtime.backends import connect

    conn = connect()
    results = run_grid(conn, 1, cases=[ANSWER])
    assert [r.mode for r in results] == list(MODES) and all(len(r.trials) == 1 for r in results)
    by_mode = {r.mode: r.trials[0] for r in results}
    assert by_mode["guided_nvext"].completion_tokens and by_mode["guided_nvext"].ttft_s is not None
    # Three spellings of one guided request, the same seed and the same cache state (each follows a request with
    # the same messages), so the same reply. guided_backend sends what guided_response_format sends, but it is the
    # first with these messages: the prompt's end is evaluated in a batch, which moves the logits in the last bits
    # (README, "Prompt cache and reproducibility"), so its reply may differ.
    texts = {by_mode[mode].text for mode in ("guided_nvext", "guided_structured_outputs", "guided_response_format")}
    assert len(texts) == 1, "one request in three spellings, three replies"
    for mode in ("guided_nvext", "guided_structured_outputs", "guided_response_format"):
        text = by_mode[mode].text
        assert text.startswith("{")
    json.dumps([r.metrics() for r in results])


@pytest.mark.integration
def test_mask_trace_shows_forced_and_free_tokens(server_url):
    from helpers.runtime.backends import connect
    from helpers.mask_view import mask_trace

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    text, trace = mask_trace(connect(), [{"role": "user", "content": "Is water wet? Answer in JSON."}], schema)
    assert json.loads(text)["ok"] in (True, False)
    assert trace[0]["allowed"] == 1 and trace[0]["token"].startswith("{")
    assert any(step["allowed"] > 1 for step in trace)
    assert all({"token", "allowed", "top_before_mask", "top_after_mask"} <= set(step) for step in trace)
