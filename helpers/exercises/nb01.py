"""Checks for notebook 01's exercises: a reply that breaks the naive parser, and two rules about meaning."""
from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from helpers.assistant import ENTRIES, KNOWLEDGE_BASE
from helpers.contract import format_error, load_corpus, naive_parse_json_object, parse_json_object, validate_answer
from helpers.exercises import Verdict

# The answer the reader hides in a tricky reply. No reply of the corpus holds it, so a corpus reply, or a
# near-copy of one (a space added, a word changed), parses to another answer and cannot pass.
GYM_SUNDAY = {"status": "answered", "answer": "On Sunday the gym opens at 09:00.", "category": "campus_hours",
              "items": [{"name": "Pike Sports Centre gym", "value": "Sunday 09:00-17:00"}],
              "missing": [], "sources": ["hours-gym"]}

CORPUS = load_corpus()
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


# Objects that keep the contract and break a rule about meaning, each with what it shows. A bad id comes first as
# well as last, and under every status: the id rule holds whatever the status, and for every source.
_BROKEN = [
    ({"sources": []}, "an answered reply must cite a source"),
    ({"sources": ["hours-pool"]}, "'hours-pool' looks like an id, but ENTRIES has no such key"),
    ({"sources": ["hours-library", "library-hours"]}, "the second source is no id"),
    ({"sources": ["hours-gym-2", "hours-library"]}, "the first source is no id, the second is"),
    ({"status": "not_found", "sources": ["hours-pool"]}, "the id rule holds whatever the status"),
    ({"status": "needs_clarification", "category": "refusal", "items": [], "sources": ["hours-labs", "hours-gym"]},
     "the id rule holds whatever the status, for the first source too"),
    ({"sources": ["Lindqvist Library"]}, "a name the knowledge base holds is not its id"),
    ({"sources": ["hours"]}, "'hours' is part of an id, not an id"),
]


def policy_problems(answer: Any) -> Verdict:
    """Your turn 1: `answer` is a function from a contract-valid object to a list of messages about meaning."""
    praise = "two meaning rules the contract's types could never express."
    if not callable(answer):
        return False, praise, "write a function: def policy_problems(data): ... return problems"
    clean = _CASES["clean"]
    fine = [clean, *(data for key, data in _CASES.items() if key != "clean"), format_error()]
    broken = [({**clean, **change}, why) for change, why in _BROKEN]
    assert all(validate_answer(data) == [] for data in fine + [data for data, _ in broken])  # meaning, not shape
    # The objects that keep both rules come again after the broken ones: messages kept from one call to the next
    # (a list outside the function) would show there.
    cases = [(data, None) for data in fine] + broken + [(data, None) for data in fine]
    results = []
    for data, why in cases:
        try:
            results.append((data, why, answer(copy.deepcopy(data))))
        except Exception as error:  # a crash on some input is "not yet", with what crashed
            return False, praise, (f"it raised {type(error).__name__}: {error} for status {data['status']!r} with "
                                   f"sources {data['sources']}. Every object here keeps the contract.")
    for data, why, problems in results:
        if not (isinstance(problems, list) and all(isinstance(p, str) and p for p in problems)):
            return False, praise, (f"return a list of messages (strings), [] when both rules hold; for sources "
                                   f"{data['sources']} it returned {problems!r}.")
    for data, why, problems in results:
        if why is None and problems:
            return False, praise, (f"{problems[0]!r} for an object that keeps both rules: status "
                                   f"{data['status']!r} with sources {data['sources']}.")
        if why is not None and not problems:
            return False, praise, f"no message for status {data['status']!r} with sources {data['sources']}: {why}."
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


def _ids_only_when_answered(data: dict) -> list[str]:
    if data["status"] != "answered":
        return []
    return _answered_only(data) + _ids_only(data)


def _last_source_only(data: dict) -> list[str]:
    return _answered_only(data) + [f"{s} is unknown" for s in data["sources"][-1:] if s not in ENTRIES]


def _first_source_only(data: dict) -> list[str]:
    return _answered_only(data) + [f"{s} is unknown" for s in data["sources"][:1] if s not in ENTRIES]


def _anywhere_in_the_knowledge_base(data: dict) -> list[str]:
    text = json.dumps(KNOWLEDGE_BASE)
    return _answered_only(data) + [f"{s} is unknown" for s in data["sources"] if s not in text]


def _kept_between_calls(data: dict, problems: list = []) -> list[str]:  # noqa: B006 - the bug it stands for
    problems += _answered_only(data) + _ids_only(data)
    return problems


SOLUTIONS = {"tricky_reply": "tricky_reply", "policy_problems": "policy_problems"}


def _by_sets(data: dict) -> list[str]:
    unknown = set(data["sources"]) - set(ENTRIES)
    return (["answered, but no source"] if data["status"] == "answered" and len(data["sources"]) == 0 else []) + (
        [f"not knowledge-base ids: {sorted(unknown)}"] if unknown else [])


def _from_the_entries_list(data: dict) -> list[str]:
    ids = [entry["id"] for entry in KNOWLEDGE_BASE["entries"]]
    problems = []
    for source in data["sources"]:
        if source not in ids:
            problems.append("unknown source " + source)
    if not data["sources"] and data["status"] == "answered":
        problems.append("an answer needs a source")
    return problems


# Other correct spellings a learner writes: they must pass too.
RIGHT = {"policy_problems": [_by_sets, _from_the_entries_list]}

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
        _ids_only_when_answered,  # an unknown id under not_found passes
        _last_source_only,  # an unknown first source passes
        _first_source_only,  # an unknown second source passes
        _anywhere_in_the_knowledge_base,  # a substring test: a name, or a piece of an id, passes
        _kept_between_calls,  # messages from an earlier call come back for a good object
        lambda data: [True] if _answered_only(data) + _ids_only(data) else [],  # not messages
    ],
}
