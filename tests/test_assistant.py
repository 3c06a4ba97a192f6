"""The campus assistant's pipeline (ask -> ladder -> harness -> deliver), with a scripted client instead of a model."""
import json
from types import SimpleNamespace

import pytest
from openai.types.chat import ChatCompletion

from helpers.assistant import ENTRIES, EXAMPLE_ANSWER, SYSTEM, fact_line, load_evals, messages_for, user_message
from helpers.contract import CATEGORIES, STATUSES, validate_answer
from helpers.harness import Tracer, summarize_trace
from helpers.ladder import ANSWER_CONTRACT, Reply, climb
from helpers.pipeline import answer_question, ask, grade, missing_matches, settle, total_usage
from helpers.runtime.profiles import PROFILES

VALID = {"status": "answered", "answer": "The library opens at 10:00 on Saturday.", "category": "campus_hours",
         "items": [], "missing": [], "sources": ["hours-library"]}
QUESTION = {"id": "t1", "question": "When does the library open on Saturday?", "facts": ["hours-library"],
            "status": "answered", "category": "campus_hours", "missing": [], "sources": ["hours-library"]}


class ScriptedClient:
    """A scripted stand-in for `openai.OpenAI`, not a model: replies with fixed texts, in order, and records requests."""

    def __init__(self, *texts: str, usage: bool = True):
        self.texts, self.requests, self.usage = list(texts), [], usage
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, **request):
        self.requests.append(request)
        return completion(self.texts.pop(0), {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
                          if self.usage else None)


def completion(text: str, usage: dict | None) -> ChatCompletion:
    """What the openai client returns for a reply of `text`, built with its own types."""
    return ChatCompletion.model_validate({
        "id": "scripted", "object": "chat.completion", "created": 0, "model": "scripted", "usage": usage,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": text}}]})


def scripted_conn(*texts: str, usage: bool = True):
    return SimpleNamespace(client=ScriptedClient(*texts, usage=usage), model="scripted", profile=PROFILES["embedded"])


def scripted_repair(text: str):
    """A scripted repair function (no model): always answers `text`."""
    return lambda messages: Reply(text, {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28})


def settled(text: str, repair=None, usage: dict | None = None):
    """A reply of `text` up the answer ladder, then settled by the harness."""
    reply = Reply(text, usage)
    return settle(reply, climb(reply.text, ANSWER_CONTRACT, repair))


def test_the_prompt_is_short_and_its_example_keeps_the_contract():
    messages = messages_for(QUESTION)
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert messages[0]["content"] == SYSTEM and validate_answer(EXAMPLE_ANSWER) == []
    assert json.loads(messages[2]["content"]) == EXAMPLE_ANSWER
    assert fact_line(ENTRIES["hours-library"]) in messages[3]["content"] and QUESTION["question"] in messages[3]["content"]
    assert "(none)" in user_message({"question": "What is the capital of France?", "facts": []})
    assert sum(len(m["content"]) for m in messages) < 2500  # about 400 tokens: quick to read on a CPU


def test_ask_is_prompt_only_at_temperature_zero():
    conn = scripted_conn(json.dumps(VALID))
    reply = ask(conn, QUESTION, max_tokens=120)
    request = conn.client.requests[0]
    assert reply.text == json.dumps(VALID) and reply.usage["total_tokens"] == 15
    assert request["temperature"] == 0 and request["max_tokens"] == 120
    assert not {"response_format", "extra_body"} & set(request)


def test_a_valid_reply_is_delivered_as_is():
    outcome = settled(f"Sure: {json.dumps(VALID)}")
    assert outcome.ladder.rung == "valid" and outcome.decision.allowed and outcome.data == VALID
    assert outcome.usage is None  # the server gave none: never fake zeros


def test_a_repaired_reply_is_delivered_with_summed_usage():
    outcome = settled("The library opens at 10:00.", scripted_repair(json.dumps(VALID)),
                      {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3})
    assert outcome.ladder.rung == "repaired" and outcome.data == VALID
    assert outcome.usage == {"prompt_tokens": 21, "completion_tokens": 10, "total_tokens": 31}


def test_an_unrepairable_reply_delivers_the_fallback():
    outcome = settled("prose", scripted_repair("still prose"))
    assert outcome.ladder.rung == "fallback" and outcome.data["missing"] == ["valid_json"]
    assert outcome.decision.allowed  # the fallback says not_found out loud: not a silent refusal


def test_an_empty_reply_is_never_repaired():
    calls = []
    outcome = settled("", lambda messages: calls.append(messages))
    assert not calls and outcome.data["missing"] == ["empty_model_response"]


def test_a_silent_refusal_is_rejected_and_replaced_by_a_fallback_naming_it():
    refusing = {**VALID, "answer": "Sorry, I can't help with that."}
    outcome = settled(json.dumps(refusing))
    assert outcome.ladder.rung == "valid" and not outcome.decision.allowed
    assert outcome.decision.cause == "silent_refusal" and outcome.data["missing"] == ["silent_refusal"]
    assert validate_answer(outcome.data) == []


def test_clarification_and_not_found_are_accepted_intents():
    asking = settled(json.dumps({**VALID, "status": "needs_clarification", "answer": "Which lab?"}))
    assert asking.decision.allowed and asking.decision.intent.kind == "clarification"
    honest = settled(json.dumps({**VALID, "status": "not_found", "answer": "Sorry, there is no pool.",
                                   "missing": ["swimming pool"]}))
    assert honest.decision.allowed and honest.data["missing"] == ["swimming pool"]


@pytest.mark.parametrize("text", ["", "null", "[1, 2]", '{"status": "done"}', "```json\n{", "Sorry, I can't."])
def test_whatever_the_model_says_the_delivered_object_keeps_the_contract(text):
    outcome = answer_question(scripted_conn(text), QUESTION, scripted_repair(text))
    assert validate_answer(outcome.data) == []


def test_answer_question_traces_one_line_per_turn(tmp_path):
    tracer = Tracer(tmp_path / "traces" / "run.jsonl")
    conn = scripted_conn(json.dumps(VALID), "prose", json.dumps({**VALID, "answer": "Sorry, I can't."}))
    for turn in range(3):
        answer_question(conn, QUESTION, scripted_repair("still prose"), tracer=tracer, turn=turn)
    lines = [json.loads(line) for line in (tmp_path / "traces" / "run.jsonl").read_text().splitlines()]
    assert [line["turn"] for line in lines] == [0, 1, 2] and lines[1]["raw"] == "prose"
    assert lines[0]["usage"] == {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    summary = summarize_trace(tmp_path / "traces" / "run.jsonl")
    assert summary["repair_rate"] == pytest.approx(1 / 3) and summary["fallback_rate"] == pytest.approx(1 / 3)
    assert summary["rejections"] == {"silent_refusal": 1}


def test_total_usage_sums_or_is_none():
    assert total_usage([{"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3}] * 2) == {
        "prompt_tokens": 2, "completion_tokens": 4, "total_tokens": 6}
    assert total_usage([{"prompt_tokens": 1}, None]) is None


def test_grading_per_field():
    assert grade(QUESTION, VALID) == {"status": True, "category": True, "missing": True, "contract": True}
    wrong = {**VALID, "status": "not_found", "category": "campus_event", "missing": ["hours"]}
    assert grade(QUESTION, wrong) == {"status": False, "category": False, "missing": False, "contract": True}
    assert missing_matches(["swimming pool"], ["opening hours of the Swimming Pool"])
    assert not missing_matches(["swimming pool"], []) and not missing_matches([], None)


def test_the_eval_set_is_well_formed():
    evals = load_evals()
    assert len(evals) >= 20 and len({q["id"] for q in evals}) == len(evals)
    for q in evals:
        assert q["status"] in STATUSES and q["category"] in CATEGORIES, q["id"]
        assert set(q["facts"]) | set(q["sources"]) <= set(ENTRIES), q["id"]
        assert (q["missing"] == []) == (q["status"] == "answered" or q["category"] == "refusal"), q["id"]
    assert {q["status"] for q in evals} == set(STATUSES)
