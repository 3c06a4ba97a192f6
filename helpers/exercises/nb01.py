"""Checks for notebook 01's exercises: a reply that breaks the naive parser, and two rules about meaning."""
from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from helpers.assistant import ENTRIES
from helpers.contract import format_error, naive_parse_json_object, parse_json_object, validate_answer
from helpers.exercises import Verdict
from helpers.runtime.paths import DATA

# The answer the reader hides in a tricky reply. No reply of the corpus holds it, so a corpus reply, or a
# near-copy of one (a space added, a word changed), parses to another answer and cannot pass.
GYM_SUNDAY = {"status": "answered", "answer": "On Sunday the gym opens at 09:00.", "category": "campus_hours",
              "items": [{"name": "Pike Sports Centre gym", "value": "Sunday 09:00-17:00"}],
              "missing": [], "sources": ["hours-gym"]}

CORPUS = [json.loads(line) for line in (DATA / "broken_outputs.jsonl").read_text(encoding="utf-8").splitlines()]
_CASES = {case["id"]: json.loads(case["reply"]) for case in CORPUS if case["id"].startswith(("clean", "valid_"))}


def _parsed(parse: Callable[[str], Any], text: str) -> Any:
    try:
        return parse(text)
    except ValueError as error:
        return f"{type(error).__name__}: {error}"


def tricky_reply(answer: Any) -> Verdict:
    """Your turn 2: a reply whose answer, GYM_SUNDAY, parse_json_object finds and the naive parser does not."""
    praise = "parse_json_object finds the answer and the naive parser does not."
    if not isinstance(answer, str):
        return False, praise, "a reply is a string: write one that holds GYM_SUNDAY as JSON, where the naive parser trips."
    robust = _parsed(parse_json_object, answer)
    if robust != GYM_SUNDAY:
        return False, praise, (f"parse_json_object must find GYM_SUNDAY in your reply; it got {str(robust)[:80]!r}. "
                               "Start from json.dumps(GYM_SUNDAY).")
    if _parsed(naive_parse_json_object, answer) == GYM_SUNDAY:
        return False, praise, ("the naive parser finds it too. Where does it cut? From the first '{' to the last "
                               "'}': add text with a brace before or after the object.")
    return True, praise, ""


def policy_problems(answer: Any) -> Verdict:
    """Your turn 1: `answer` is a function from a contract-valid object to a list of messages about meaning."""
    praise = "two meaning rules the contract's types could never express."
    if not callable(answer):
        return False, praise, "write a function: def policy_problems(data): ... return problems"
    clean = _CASES["clean"]
    fine = [clean, *(data for key, data in _CASES.items() if key != "clean"), format_error()]
    broken = [{**clean, "sources": []}, {**clean, "sources": ["hours-pool"]},
              {**clean, "sources": ["hours-library", "library-hours"]},
              {**clean, "sources": ["hours"]}]  # a piece of an id is not an id
    assert all(validate_answer(data) == [] for data in fine + broken)  # the rules are about meaning, not shape
    try:
        results = [(data, answer(data)) for data in fine + broken]
    except Exception as error:  # a crash on some input is "not yet", with what crashed
        return False, praise, f"it raised {type(error).__name__}: {error}. Every answer here is contract-valid."
    for data, problems in results:
        if not isinstance(problems, list):
            return False, praise, f"return a list of messages, [] when both rules hold; it returned {problems!r}."
    for data, problems in results[:len(fine)]:
        if problems:
            return False, praise, (f"{problems[0]!r} for an object that keeps both rules: status "
                                   f"{data['status']!r} with sources {data['sources']}.")
    for data, problems in results[len(fine):]:
        if not problems:
            return False, praise, f"no message for status {data['status']!r} with sources {data['sources']}."
    return True, praise, ""


def _ids_only(data: dict) -> list[str]:
    return [f"{s} is unknown" for s in data["sources"] if s not in ENTRIES]


def _answered_only(data: dict) -> list[str]:
    return ["no sources"] if data["status"] == "answered" and not data["sources"] else []


def _any_empty(data: dict) -> list[str]:
    return ["no sources"] if not data["sources"] else []


def _looks_like_an_id(data: dict) -> list[str]:
    known = ("hours-", "event-", "resource-")
    return _answered_only(data) + [f"{s} is unknown" for s in data["sources"] if not s.startswith(known)]


def _answered_only_or_part_of_an_id(data: dict) -> list[str]:
    return _answered_only(data) + [f"{s} is unknown" for s in data["sources"] if not any(s in e for e in ENTRIES)]


SOLUTIONS = {"tricky_reply": "tricky_reply", "policy_problems": "policy_problems"}

_GYM = json.dumps(GYM_SUNDAY)
WRONG = {
    "tricky_reply": [
        _GYM,  # both parsers find it
        f"```json\n{_GYM}\n```",  # so does the naive one
        f"Here you go: {_GYM} Hope it helps.",
        f"[{_GYM}]",  # a list: the naive parser takes the object out, the robust one refuses
        _GYM[:-1],  # cut off
        *(case["reply"] for case in CORPUS),  # the corpus, and near-copies of it
        *(case["reply"] + " " for case in CORPUS),
        *(case["reply"].replace("Saturday", "Sunday") for case in CORPUS),
    ],
    "policy_problems": [
        lambda data: [],  # accepts everything
        _ids_only,  # forgets that an answer needs a source
        _answered_only,  # forgets unknown ids
        _any_empty,  # an honest not_found has no source to cite
        _looks_like_an_id,  # "hours-pool" looks like an id but is not one
        lambda data: "sources: missing" if not data["sources"] else "",  # not a list
        lambda data: [s for s in data["sources"] if ENTRIES[s]],  # crashes on an unknown id
        _answered_only_or_part_of_an_id,  # "hours" is inside an id, not one
    ],
}
