"""Worked solutions for notebook 01's exercises. In the notebook, `%load solutions/01.py` puts this file into a
cell; run it, then run the check cells again."""
import json

from helpers.assistant import ENTRIES  # the knowledge base's entries by id, as the notebook loads them
from helpers.exercises.nb01 import GYM_SUNDAY

# Your turn 2: the object, then a sentence with a brace in it. The naive parser cuts from the first '{' to the
# last '}', which now sits in the sentence, so json.loads fails on the extra text; parse_json_object parses
# the whole reply first, then each '{' on its own, and stops at the end of the object.
tricky_reply = json.dumps(GYM_SUNDAY) + "\nI left out {nothing}."


# Your turn 1: an `if` and a list comprehension. Notebook 04's harness runs checks like these before it acts on
# any answer.
def policy_problems(data):
    problems = []
    if data["status"] == "answered" and not data["sources"]:
        problems.append("sources: an answered question must cite at least one source")
    problems += [f"sources: {s!r} is not a knowledge-base id" for s in data["sources"] if s not in ENTRIES]
    return problems
