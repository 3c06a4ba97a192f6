"""Every exercise check passes its worked solution and every other correct spelling a module lists in `RIGHT`, and
rejects the known-wrong answers (and the empty stub)."""
import importlib
import pkgutil
import re
import runpy
from pathlib import Path

import pytest

import helpers.exercises

SOLUTIONS = Path(__file__).resolve().parent.parent / "notebooks" / "solutions"
MODULES = sorted(info.name for info in pkgutil.iter_modules(helpers.exercises.__path__) if info.name.startswith("nb"))
CASES = [(name, checker) for name in MODULES
         for checker in importlib.import_module(f"helpers.exercises.{name}").SOLUTIONS]


def test_every_notebook_with_exercises_has_a_checks_module_and_a_solutions_file():
    notebooks = sorted(p.name[:2] for p in (SOLUTIONS.parent).glob("[0-9][0-9]_*.ipynb"))
    assert [f"nb{n}" for n in notebooks] == MODULES
    assert sorted(p.stem for p in SOLUTIONS.glob("[0-9][0-9].py")) == notebooks


@pytest.mark.parametrize("module,checker", CASES, ids=[f"{m}.{c}" for m, c in CASES])
def test_the_worked_solution_passes_and_every_wrong_answer_fails(module, checker):
    checks = importlib.import_module(f"helpers.exercises.{module}")
    solution = runpy.run_path(str(SOLUTIONS / f"{module[2:]}.py"))
    run = getattr(checks, checker)
    assert run(solution[checks.SOLUTIONS[checker]])[0], "the worked solution must pass"
    for wrong in [None, *checks.WRONG[checker]]:
        assert not run(wrong)[0], f"a wrong answer passed: {wrong!r}"
    for right in getattr(checks, "RIGHT", {}).get(checker, []):
        assert run(right)[0], f"a correct spelling failed: {right!r}"


@pytest.mark.parametrize("module,checker", CASES, ids=[f"{m}.{c}" for m, c in CASES])
def test_the_hint_for_an_untouched_stub_points_the_way_without_the_code(module, checker):
    run = getattr(importlib.import_module(f"helpers.exercises.{module}"), checker)
    solved, _, hint = run(None)
    # A signature ("def name(...)", "class Name(...)") says what to write; a call spells out how.
    calls = re.sub(r"\b(def|class) \w+\(", "", hint)
    assert not solved and hint and not re.search(r"\w\(|\{\*\*", calls), hint


def test_the_order_checks_hint_names_what_went_wrong():
    """Notebook 04's order check replays the replies and names the first thing that went wrong, not one fixed hint:
    typing '2' twice, typing 'two', a second order, no order, an answer before the order."""
    from helpers.exercises import nb04

    quantity, place, back = nb04._QUANTITY, nb04._PLACE, nb04._BACK
    hints = {name: nb04.order_through_the_user(replies)[2] for name, replies in {
        "twice": [quantity, nb04._TWO, nb04._TWO, place],
        "word": [quantity, nb04._write("two"), place],
        "again": [quantity, nb04._TWO, place, back, quantity, nb04._TWO, place],
        "none": [quantity, nb04._TWO],
        "said": [quantity, nb04._TWO, nb04._ORDERED],
    }.items()}
    assert "'22'" in hints["twice"] and "only 17 in stock" in hints["twice"]
    assert hints["word"].startswith("reply 2 was refused (not_asked): 'two'")
    assert hints["again"].startswith("reply 7 was refused (duplicate_side_effect)")
    assert hints["none"].startswith("every reply went through, but no order was placed")
    assert hints["said"].startswith("reply 3 ended the run before any order was placed")
    assert len(set(hints.values())) == len(hints)


def test_the_guided_repair_check_wants_room_for_a_whole_answer():
    from helpers.exercises import nb04

    solved, _, hint = nb04.guided_repair(nb04._too_short)
    assert not solved and "64 tokens" in hint and "ANSWER_TOKENS" in hint
