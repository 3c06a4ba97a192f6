"""The README is a one-screen front page, every relative link in the docs resolves, and the README's test command
is the one CI runs.

Links are checked as GitHub renders them: a relative link names a file of the repository, and an `#anchor` names a
heading of that file (lower case, punctuation dropped, spaces as hyphens). Notebooks' markdown cells are checked the
same way, since a learner follows those links too.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.maintainers import publish

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
    # `python -m helpers.maintainers.publish` moves the README's links; docs/ must link relatively to move with it.
    address = publish.read_address(ROOT / "pyproject.toml")
    assert not [p.name for p in PAGES[1:] if address.repository in p.read_text(encoding="utf-8")]


# --- what a newcomer runs: the workshop's Python, the worked solutions, the Colab install ---------------------------

# A module run with `python -m helpers...`: which Python runs it is the whole question (a bare `python` is whatever
# the shell finds first, and fails without the workshop's packages).
MODULE_RUN = re.compile(r"([^\s`(]*python3?)\s+-m\s+(helpers[\w.]*)")
# The programs print the command that made a table above it, then two spaces and what ran: output, not a command.
PRINTED_HEADER = re.compile(r"^python -m helpers\.\S+ .*  \(", re.MULTILINE)
# Mentions of the server's process as the kernel lists it, not commands to type.
PROCESS_MENTIONS = ["this user's `python -m helpers.server`"]


def reader_pages() -> dict[str, str]:
    pages = {str(page.relative_to(ROOT)): page.read_text(encoding="utf-8") for page in PAGES}
    for path in NOTEBOOKS:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        pages[path.name] = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    return pages


def module_runs_without_the_workshops_python(text: str) -> list[str]:
    for mention in PROCESS_MENTIONS:
        text = text.replace(mention, "")
    text = PRINTED_HEADER.sub("", text)
    return [match[0] for match in MODULE_RUN.finditer(text) if match[1] != ".venv/bin/python"]


@pytest.mark.parametrize("name,text", sorted(reader_pages().items()))
def test_every_documented_module_run_uses_the_workshops_python(name, text):
    assert not module_runs_without_the_workshops_python(text), "write ./workshop run helpers.MODULE"


def test_the_check_sees_a_bare_python_and_passes_the_workshops():
    assert module_runs_without_the_workshops_python("run `python -m helpers.compare --n 5`") == [
        "python -m helpers.compare"]
    assert module_runs_without_the_workshops_python("`./workshop run helpers.compare` or `.venv/bin/python -m "
                                                    "helpers.compare`\npython -m helpers.compare --n 5  (backend x)")\
        == []


LOAD_BLOCK = re.compile(r"```python\n(from helpers\.runtime\.paths import ROOT\n%load \{ROOT\}/notebooks/solutions/"
                        r"(\d\d)\.py)\n```")


def test_every_way_to_load_a_solution_works_from_any_folder():
    pages = reader_pages()
    assert not [name for name, text in pages.items() if "%load solutions/" in text]
    assert "`%load {ROOT}/notebooks/solutions/NN.py`" in pages["docs/teaching.md"]
    blocks = {name: LOAD_BLOCK.findall(pages[name]) for name in [path.name for path in NOTEBOOKS]}
    assert all(len(found) == 1 and found[0][1] == name[:2] for name, found in blocks.items()), blocks
    assert sum(text.count("%load") for name, text in pages.items() if name.endswith(".ipynb")) == len(NOTEBOOKS)


def test_the_load_cell_puts_the_solution_in_the_cell_from_colabs_working_folder(tmp_path):
    """Each notebook's two lines, run by IPython in a folder that is not the checkout (Colab's is /content)."""
    cells = [found[0] for path in NOTEBOOKS for found in LOAD_BLOCK.findall(reader_pages()[path.name])]
    script = ("import json, sys\nfrom IPython.core.interactiveshell import InteractiveShell\n"
              "shell = InteractiveShell.instance()\nloaded = []\n"
              "shell.set_next_input = lambda text, replace=False: loaded.append([text, replace])\n"
              "for cell in json.loads(sys.argv[1]):\n    assert shell.run_cell(cell).success, cell\n"
              "print(json.dumps(loaded))\n")
    result = subprocess.run([sys.executable, "-c", script, json.dumps(cells)], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    loaded = json.loads(result.stdout.splitlines()[-1])
    solutions = sorted((ROOT / "notebooks" / "solutions").glob("0[0-6].py"))
    assert [(text.split("\n", 1)[1], replace) for text, replace in loaded] == [
        (path.read_text(encoding="utf-8"), True) for path in solutions]


def colab_install_paragraphs(text: str) -> list[str]:
    parts = re.split(r"\n\n|\n(?=- )", FENCE.sub("", text))
    return [" ".join(p.split()) for p in parts if "Colab" in p and re.search(r"install|compil", p)]


def test_the_colab_install_takes_one_time_on_every_page():
    """Compiling llama-cpp-python takes the minutes its install message says; with a wheel, seconds."""
    minutes = re.search(r"about (\d+) minutes on 2 cores", (ROOT / "helpers/runtime/install.py").read_text())[1]
    for page in ("teaching.md", "setup.md"):
        for paragraph in colab_install_paragraphs((ROOT / "docs" / page).read_text(encoding="utf-8")):
            figures = re.findall(r"about (\d+) min", paragraph)
            assert set(figures) <= {minutes}, (page, paragraph)
            assert not figures or "seconds" in paragraph, (page, paragraph)


def test_contributing_keeps_the_time_budget_and_every_run_shows_its_slowest_tests():
    """Instant. The budget CI's runs are held to, and what every run prints to compare with it."""
    section = " ".join((ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8").split("\n## Time\n", 1)[1]
                       .split("\n## ", 1)[0].split())
    assert "**90 minutes**" in section and "**45 minutes**" in section and "Warm caches save the compile" in section
    assert "A new test names what it costs" in section
    options = re.search(r'^addopts = "(.*)"$', (ROOT / "pyproject.toml").read_text(), re.MULTILINE)[1].split()
    assert "--durations=15" in options
