"""A three-hour class: each notebook's core path fits its minutes in the agenda, all of them at most 120 of the 150
the class spends in the notebooks, and the other 30 are the instructor's, for their talk and the room's questions.

Every `##` section of a notebook is marked on the line under its heading, `*Core*` or `*Going further*`; the title
and the list of what the notebook teaches, above the first `##`, count as core. A section's time is what a room
spends on it: words of markdown read at 150 a minute, lines of code at 10 a minute, and the time its cells took to
run, read from the committed notebook's own timing metadata (notebooks are committed executed on the embedded model,
on the 2-core reference machine). An exercise (a `## Your turn` section) is 10 minutes, its prompt and its code
included, plus its cells' run time. The setup cell, the same in every notebook, is read once, in notebook 00; later
notebooks count only its run time. The agenda, with each notebook's minutes, is the table in docs/teaching.md; the
README repeats it.

The core path must also run on its own: a class that skips the going-further sections still runs every cell, but
a core cell must never need a name that only a going-further cell defines.
"""
from __future__ import annotations

import ast
import builtins
import json
import math
import re
from datetime import datetime
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
TOTAL_MINUTES = 150  # the class's time in the notebooks
CORE_LIMIT = 120  # of it, the core paths: the rest is the instructor's talk and the room's questions
WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 10
MINUTES_PER_EXERCISE = 10
# A core cell that runs longer than this keeps the room waiting: it goes further, or shows a recorded result.
LONGEST_CORE_CELL_SECONDS = 75
SAYS_SO_AFTER = 12  # seconds: about the longest a room sits before it wonders whether the cell is stuck
# The agenda is the estimate rounded up, not a padded promise: a row may exceed it by less than this.
AGENDA_SLACK = 3
SETUP_MARK = "# @title Setup"
MARKS = {"*Core*": True, "*Going further*": False}
# An agenda row names its notebook, then its core minutes and the instructor's (| 00 Start here | 9 | 3 |); a
# breakdown row does not name it (| 00 | 7 |).
AGENDA_ROW = re.compile(r"^\| (\d\d) [^|]+\| (\d+) \| (\d+) \|", re.MULTILINE)
# The breakdown after the agenda: | 00 | prose | code | running | exercises |, whole minutes.
BREAKDOWN_ROW = re.compile(r"^\| (\d\d) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \|$", re.MULTILINE)


@dataclass
class Section:
    heading: str
    core: bool | None  # None: no mark under the heading
    words: int = 0
    code_lines: int = 0
    run_seconds: float = 0.0
    code: list[str] = field(default_factory=list)
    cell_seconds: list[float] = field(default_factory=list)

    @property
    def exercise(self) -> bool:
        return self.heading.startswith("## Your turn")

    @property
    def minutes(self) -> float:
        running = self.run_seconds / 60
        if self.exercise:
            return MINUTES_PER_EXERCISE + running
        return self.words / WORDS_PER_MINUTE + self.code_lines / CODE_LINES_PER_MINUTE + running


def run_seconds(cell: dict) -> float | None:
    """How long the cell ran when the notebook was executed, from nbclient's timing metadata; None: never run."""
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return None
    return (datetime.fromisoformat(end.replace("Z", "+00:00"))
            - datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def mark(lines: list[str]) -> bool | None:
    """The mark on the first non-empty line after a heading, if there is one."""
    following = next((line.strip() for line in lines if line.strip()), "")
    return MARKS.get(following)


def sections(path: Path) -> list[Section]:
    """The notebook's sections in order, the text above the first `##` as a core section of its own."""
    found = [Section("(opening)", True)]
    read_setup = path.name.startswith("00")
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "code":
            seconds = run_seconds(cell) or 0.0
            found[-1].code.append(text)
            found[-1].cell_seconds.append(seconds)
            found[-1].run_seconds += seconds
            if read_setup or not text.startswith(SETUP_MARK):
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


def breakdown(path: Path) -> dict[str, float]:
    """The core path's minutes by what the room does: reads prose, reads code, waits for cells, does exercises."""
    core = [section for section in sections(path) if section.core]
    lessons = [section for section in core if not section.exercise]
    return {"prose": sum(section.words for section in lessons) / WORDS_PER_MINUTE,
            "code": sum(section.code_lines for section in lessons) / CODE_LINES_PER_MINUTE,
            "running": sum(section.run_seconds for section in core) / 60,
            "exercises": MINUTES_PER_EXERCISE * sum(section.exercise for section in core)}


def agenda_rows() -> dict[str, tuple[int, int]]:
    """Each notebook's core minutes and the instructor's, by number, from the agenda in docs/teaching.md."""
    text = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    return {number: (int(core), int(talk))
            for number, core, talk in AGENDA_ROW.findall(text.split("## The agenda", 1)[1])}


def agenda() -> dict[str, str]:
    """Each notebook's core minutes, by number, from the agenda."""
    return {number: str(core) for number, (core, _) in agenda_rows().items()}


def test_the_agenda_has_every_notebook_and_adds_up():
    rows = agenda_rows()
    assert sorted(rows) == [path.name[:2] for path in NOTEBOOKS]
    assert sum(core + talk for core, talk in rows.values()) == TOTAL_MINUTES
    assert sum(core for core, _ in rows.values()) <= CORE_LIMIT, "the instructor's 30 minutes are gone"


def test_the_agenda_shows_what_the_minutes_are_made_of():
    """docs/teaching.md's breakdown is this test's estimate, to the minute: what a room reads, runs and writes."""
    text = (ROOT / "docs" / "teaching.md").read_text(encoding="utf-8")
    shown = {row[0]: [int(minutes) for minutes in row[1:]] for row in BREAKDOWN_ROW.findall(text)}
    assert sorted(shown) == [path.name[:2] for path in NOTEBOOKS]
    for path in NOTEBOOKS:
        computed = breakdown(path)
        print(path.name[:2], {kind: round(minutes, 1) for kind, minutes in computed.items()})
        assert all(abs(doc - minutes) <= 1 for doc, minutes in zip(shown[path.name[:2]], computed.values())), path.name


def test_the_readme_gives_the_agendas_minutes():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert dict(re.findall(r"^\| (\d\d) \|.*\| (\d+) min \|", readme, re.MULTILINE)) == agenda()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_section_is_marked_core_or_going_further(path):
    unmarked = [section.heading for section in sections(path) if section.core is None]
    assert not unmarked, "put *Core* or *Going further* on the line under each heading"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_core_path_fits_its_minutes_in_the_agenda(path):
    """The agenda counts whole minutes: a core fits its row when it rounds to at most the row (8.4 minutes fit an
    8-minute row). The whole stays within CORE_LIMIT unrounded (the test below), so rounding never hides a minute."""
    budget = int(agenda()[path.name[:2]])
    estimate = core_minutes(path)
    print(f"{path.name}: about {estimate:.1f} of {budget} minutes")
    assert math.floor(estimate + 0.5) <= budget, "mark more of it *Going further*, or say it in fewer words"
    assert estimate > budget - AGENDA_SLACK, f"the agenda gives {budget} minutes to about {estimate:.0f}: give it fewer"


def test_all_the_core_paths_fit_a_three_hour_class_and_leave_the_instructor_time():
    assert sum(core_minutes(path) for path in NOTEBOOKS) <= CORE_LIMIT


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_code_cell_carries_its_run_time(path):
    """The agenda counts execution: a notebook committed unexecuted, or without timing, would count it as free."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    untimed = [number for number, cell in enumerate(cells) if cell["cell_type"] == "code" and run_seconds(cell) is None]
    assert not untimed, f"execute the notebook (nbconvert --execute records timing); untimed cells: {untimed}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_core_cell_keeps_the_room_waiting(path):
    slow = [(section.heading, round(seconds)) for section in sections(path) if section.core
            for seconds in section.cell_seconds if seconds > LONGEST_CORE_CELL_SECONDS]
    assert not slow, "move the cell to a going-further section, or show a recorded result in the core"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_a_core_cell_that_keeps_the_room_waiting_says_so_while_it_waits(path):
    """A silent cell reads as a stuck one: a core cell that ran longer than SAYS_SO_AFTER seconds prints as it goes
    (helpers.runtime.progress: `progress` over its items, or `waiting` before its one long call)."""
    silent = [(section.heading, round(seconds)) for section in sections(path) if section.core
              for code, seconds in zip(section.code, section.cell_seconds)
              if seconds > SAYS_SO_AFTER and not code.startswith(SETUP_MARK)
              and not re.search(r"\bprogress\b|\bwaiting\(", code)]
    assert not silent, "print what the room waits for before the wait: helpers.runtime.progress"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_lesson_has_an_exercise_in_its_core(path):
    if path.name.startswith("00"):
        pytest.skip("notebook 00 opens the class: it sets up and shows one call")
    assert any(section.core and section.exercise for section in sections(path)), "mark one `## Your turn` *Core*"


def parsed(source: str) -> ast.Module:
    """A code cell's Python, its IPython `!` and `%` lines read as `pass`."""
    return ast.parse("\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("!", "%"))
                               else line for line in source.splitlines()))


def names(source: str) -> tuple[set[str], set[str]]:
    """The names a cell defines and the names it reads (IPython's `!` and `%` lines left out)."""
    defined, read = set(), set()
    for node in ast.walk(parsed(source)):
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
