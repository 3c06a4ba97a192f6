"""A three-hour class: each notebook's core path fits its minutes in the agenda, and all of them about 150.

Every `##` section of a notebook is marked on the line under its heading, `*Core*` or `*Going further*`; the title
and the list of what the notebook teaches, above the first `##`, count as core. A section's time is estimated as
words of markdown at 200 a minute, lines of code at 10 a minute, and 10 minutes for an exercise (a `## Your turn`
section). The agenda, with each notebook's minutes, is the table in docs/teaching.md; the README repeats it.

The core path must also run on its own: a class that skips the going-further sections still runs every cell, but
a core cell must never need a name that only a going-further cell defines.
"""
from __future__ import annotations

import ast
import builtins
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TOTAL_MINUTES = 150
WORDS_PER_MINUTE = 200
CODE_LINES_PER_MINUTE = 10
MINUTES_PER_EXERCISE = 10
MARKS = {"*Core*": True, "*Going further*": False}
AGENDA_ROW = re.compile(r"^\| (\d\d) [^|]*\| (\d+) \|", re.MULTILINE)


@dataclass
class Section:
    heading: str
    core: bool | None  # None: no mark under the heading
    words: int = 0
    code_lines: int = 0
    code: list[str] = field(default_factory=list)

    @property
    def minutes(self) -> float:
        exercise = MINUTES_PER_EXERCISE if self.heading.startswith("## Your turn") else 0
        return self.words / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE + exercise


def mark(lines: list[str]) -> bool | None:
    """The mark on the first non-empty line after a heading, if there is one."""
    following = next((line.strip() for line in lines if line.strip()), "")
    return MARKS.get(following)


def sections(path: Path) -> list[Section]:
    """The notebook's sections in order, the text above the first `##` as a core section of its own."""
    found = [Section("(opening)", True)]
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "code":
            found[-1].code.append(text)
            found[-1].code_lines += sum(1 for line in text.splitlines()
                                        if line.strip() and not line.strip().startswith("#"))
            continue
        lines = text.splitlines()
        for number, line in enumerate(lines):
            if line.startswith("## "):
                found.append(Section(line, mark(lines[number + 1:])))
            found[-1].words += len(re.findall(r"\w+", line))
    return found


def core_minutes(path: Path) -> float:
    return sum(section.minutes for section in sections(path) if section.core)


def agenda() -> dict[str, int]:
    """Each notebook's core minutes, by number, from the agenda in docs/teaching.md."""
    text = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    return dict(AGENDA_ROW.findall(text.split("## The agenda", 1)[1]))


def test_the_agenda_has_every_notebook_and_adds_up():
    budgets = {number: int(minutes) for number, minutes in agenda().items()}
    assert sorted(budgets) == [path.name[:2] for path in NOTEBOOKS]
    assert sum(budgets.values()) == TOTAL_MINUTES


def test_the_readme_gives_the_agendas_minutes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert dict(re.findall(r"^\| (\d\d) \|.*\| (\d+) min \|", readme, re.MULTILINE)) == agenda()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_section_is_marked_core_or_going_further(path):
    unmarked = [section.heading for section in sections(path) if section.core is None]
    assert not unmarked, "put *Core* or *Going further* on the line under each heading"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_core_path_fits_its_minutes_in_the_agenda(path):
    budget = int(agenda()[path.name[:2]])
    estimate = core_minutes(path)
    print(f"{path.name}: about {estimate:.0f} of {budget} minutes")
    assert estimate <= budget, "mark more of it *Going further*, or say it in fewer words"


def test_all_the_core_paths_fit_a_three_hour_class():
    assert sum(core_minutes(path) for path in NOTEBOOKS) <= TOTAL_MINUTES


def names(source: str) -> tuple[set[str], set[str]]:
    """The names a cell defines and the names it reads (IPython's `!` and `%` lines left out)."""
    code = "\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("!", "%")) else line
                     for line in source.splitlines())
    defined, read = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (defined if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            defined.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.arg):
            defined.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined.add(node.name)
    return defined, read - set(dir(builtins))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_core_path_needs_no_going_further_cell(path):
    from_core, from_further, borrowed = set(), set(), []
    for section in sections(path):
        for source in section.code:
            defined, read = names(source)
            if section.core:
                borrowed += sorted((read - defined - from_core) & from_further)
                from_core |= defined
            else:
                from_further |= defined
    assert not borrowed, f"core cells read names only going-further cells define: {borrowed}"
