"""The README is a one-screen front page, every relative link in the docs resolves, and the README's test command
is the one CI runs.

Links are checked as GitHub renders them: a relative link names a file of the repository, and an `#anchor` names a
heading of that file (lower case, punctuation dropped, spaces as hyphens). Notebooks' markdown cells are checked the
same way, since a learner follows those links too.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from helpers.runtime import publish

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
README_LIMIT_BYTES = 5 * 1024  # about one screen
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found: set[str] = set()
    for heading in re.findall(r"^#{1,6} (.+)$", FENCE.sub("", path.read_text(encoding="utf-8")), re.MULTILINE):
        base, number = slug(heading), 0
        while (name := base if number == 0 else f"{base}-{number}") in found:
            number += 1
        found.add(name)
    return found


def relative_links(text: str) -> list[str]:
    return [target for target in LINK.findall(FENCE.sub("", text)) if not re.match(r"[a-z]+:", target)]


def broken(source: Path, text: str) -> list[str]:
    """Each relative link in `text` (written in `source`) whose file or heading does not exist."""
    problems = []
    for target in relative_links(text):
        file_part, _, anchor = target.partition("#")
        path = (source.parent / file_part).resolve() if file_part else source
        if not path.exists():
            problems.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            problems.append(f"{target}: no heading #{anchor} in {path.name}")
    return problems


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    assert relative_links(page.read_text(encoding="utf-8")) or page != README
    assert not broken(page, page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_relative_link_of_a_notebook_resolves(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert not broken(path, text)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_opens_with_a_link_to_the_glossary(path):
    first = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
    assert "../docs/glossary.md" in relative_links(first)


def test_the_readme_fits_on_one_screen():
    assert len(README.read_bytes()) <= README_LIMIT_BYTES, "move detail into docs/"


def test_the_readme_tells_a_newcomer_to_run_what_ci_runs():
    commands = [line.split("#")[0].strip() for block in re.findall(r"```bash\n(.*?)```", README.read_text(), re.DOTALL)
                for line in block.splitlines()]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines() if line.startswith("./workshop")]
    assert ci == ["./workshop test"] and "./workshop test" in commands and "./workshop lab" in commands


def test_only_the_readme_names_the_published_address():
    # `python -m helpers.runtime.publish` moves the README's links; docs/ must link relatively to move with it.
    address = publish.read_address(ROOT / "pyproject.toml")
    assert not [p.name for p in PAGES[1:] if address.repository in p.read_text(encoding="utf-8")]
