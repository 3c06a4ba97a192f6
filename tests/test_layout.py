"""`helpers/` reads in notebook order: no module, and no notebook, reaches a later notebook's lesson module.

The order is the table in `helpers/__init__.py`'s docstring, the one place it is written. Imports are walked
from the source, including the ones inside functions, and followed through every module they reach.
"""
from __future__ import annotations

import ast
import importlib.util
import json
import re
from functools import cache
from pathlib import Path

import pytest

import helpers

ROOT = Path(helpers.__file__).resolve().parent.parent
PACKAGE = ROOT / "helpers"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ROW = re.compile(r"^\|\s*(\d\d)\s*\|\s*`(\w+)`\s*\|", re.MULTILINE)
SUBPACKAGE_ROW = re.compile(r"^\|\s*`(\w+)`\s*\|", re.MULTILINE)


def lesson_order() -> dict[str, int]:
    return {f"helpers.{name}": int(number) for number, name in ROW.findall(helpers.__doc__ or "")}


def is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def imported_by(tree: ast.AST) -> set[str]:
    """The `helpers` modules a piece of source imports; `from helpers.x import y` counts `helpers.x.y` when y is
    a module of its own."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("helpers")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("helpers"):
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names if is_module(f"{node.module}.{alias.name}")}
    return found


def source_of(module: str) -> Path:
    path = ROOT.joinpath(*module.split("."))
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@cache
def reached_from(module: str) -> frozenset[str]:
    """Every `helpers` module that importing `module` may load, itself and its parent packages included."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):
            parent = ".".join(parts[:depth])
            if parent not in seen and source_of(parent).is_file():
                seen.add(parent)
                todo += imported_by(ast.parse(source_of(parent).read_text(encoding="utf-8")))
    return frozenset(seen)


def notebook_source(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]
    # IPython's magics (%pip, !git) are not Python: blank them out before parsing.
    return "\n".join(re.sub(r"^(\s*)[%!].*$", r"\1pass", text, flags=re.MULTILINE) for text in code)


def later_lessons(reached: frozenset[str], number: int) -> list[str]:
    return sorted(m for m in reached if lesson_order().get(m, 0) > number)


def test_every_flat_module_is_a_lesson_in_the_table():
    flat = {f"helpers.{path.stem}" for path in PACKAGE.glob("*.py") if path.stem != "__init__"}
    assert flat == set(lesson_order()), "a module in helpers/ is a lesson with a row in helpers/__init__.py; " \
                                        "anything else belongs in a subpackage"


def test_the_table_is_in_notebook_order():
    numbers = list(lesson_order().values())
    assert numbers == sorted(numbers) and set(numbers) == set(range(1, 7))


def test_every_subpackage_says_what_it_holds_and_is_listed():
    subpackages = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert subpackages == set(SUBPACKAGE_ROW.findall(helpers.__doc__.split("| subpackage")[1]))
    for name in subpackages:
        doc = ast.get_docstring(ast.parse((PACKAGE / name / "__init__.py").read_text(encoding="utf-8")))
        assert doc and len(doc) > 80, f"helpers/{name}/__init__.py needs a docstring saying what it holds"


@pytest.mark.parametrize("module", sorted(lesson_order()))
def test_no_lesson_module_reaches_a_later_notebooks_module(module):
    assert later_lessons(reached_from(module), lesson_order()[module]) == []


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda path: path.name[:2])
def test_no_notebook_imports_a_later_notebooks_module(notebook):
    number = int(notebook.name[:2])
    reached = frozenset().union(*(reached_from(m) for m in imported_by(ast.parse(notebook_source(notebook)))))
    assert later_lessons(reached, number) == []


def test_the_walk_sees_a_backward_import():
    """The check itself: code of notebook 03 that imports notebook 06's module, even inside a function, is caught,
    and so is what that module reaches."""
    tree = ast.parse("def f():\n    from helpers.grounding import Grounding\n")
    reached = frozenset().union(*(reached_from(m) for m in imported_by(tree)))
    assert {"helpers.grounding", "helpers.instruction"} <= set(later_lessons(reached, 3))


# The floors below the lessons: they may share the data contracts, nothing else of a lesson (the widgets take plain
# data, which a lesson module builds); the runtime (which chooses and starts a backend) knows nothing of the server
# it starts but its command line.
FLOORS = ("world", "runtime", "server", "widgets")
SHARED_CONTRACTS = {"helpers.contract", "helpers.pydantic_contract", "helpers.steps"}


def floor_modules() -> list[str]:
    return sorted(f"helpers.{floor}.{path.stem}".removesuffix(".__init__")
                  for floor in FLOORS for path in (PACKAGE / floor).glob("*.py"))


# What each floor may not import beyond the lessons: the runtime is the lowest (it chooses and starts a backend, and
# knows the server only by its command line), and the server, a server like any other, knows no lesson at all.
FORBIDDEN_FLOORS = {"helpers.runtime": ("helpers.server", "helpers.world", "helpers.widgets"),
                    "helpers.server": ("helpers.world", "helpers.widgets")}


def floor_breaches(module: str, tree: ast.AST) -> list[str]:
    """What `module`'s source imports that its floor may not: a lesson module beyond the contracts (none at all, for
    the server), or a floor above its own."""
    imported = imported_by(tree)
    allowed = set() if module.startswith("helpers.server") else SHARED_CONTRACTS
    breaches = sorted(m for m in imported if m in lesson_order() and m not in allowed)
    above = next((floors for floor, floors in FORBIDDEN_FLOORS.items() if module.startswith(floor + ".")
                  or module == floor), ())
    return breaches + sorted(m for m in imported if any(m == f or m.startswith(f + ".") for f in above))


@pytest.mark.parametrize("module", floor_modules())
def test_the_floors_import_no_lesson_but_the_contracts_and_no_floor_above_their_own(module):
    assert floor_breaches(module, ast.parse(source_of(module).read_text(encoding="utf-8"))) == []


def test_the_floor_check_sees_a_breach():
    """The check itself: a lesson import inside a function, and the runtime reaching for the server, are caught;
    the contracts are not."""
    tree = ast.parse("from helpers.steps import Step\ndef f():\n    from helpers.loop import execute\n"
                     "    from helpers.server.engine import Engine\n    from helpers.world.store import CampusStore\n")
    assert floor_breaches("helpers.world.store", tree) == ["helpers.loop"]
    assert floor_breaches("helpers.runtime.backends", tree) == ["helpers.loop", "helpers.server.engine",
                                                                "helpers.world.store"]
    assert floor_breaches("helpers.server.app", tree) == ["helpers.loop", "helpers.steps", "helpers.world.store"]


# Above the lessons: the exercises' checks and the benchmarks measure what the lessons build; nothing below imports
# them, so a lesson never depends on a check or a measurement.
ABOVE = ("helpers.exercises", "helpers.bench")


def below_modules() -> list[str]:
    return sorted([*lesson_order(), *floor_modules()])


def reaches_above(tree: ast.AST) -> list[str]:
    return sorted(m for m in imported_by(tree) if m.startswith(ABOVE))


@pytest.mark.parametrize("module", below_modules())
def test_no_lesson_or_floor_imports_the_checks_or_the_benchmarks(module):
    assert reaches_above(ast.parse(source_of(module).read_text(encoding="utf-8"))) == []


def test_the_check_above_sees_a_lesson_importing_a_benchmark():
    tree = ast.parse("def f():\n    from helpers.bench.agent import table\n    import helpers.exercises.nb01\n")
    assert reaches_above(tree) == ["helpers.bench.agent", "helpers.exercises.nb01"]
