"""Every notebook opens the same way, can be opened in Colab, has exercises with checks, and ends with a recap.

The setup cell and the badges are written by `python -m helpers.maintainers.publish` from the one published address;
when these tests fail after an edit of the template or the address, run it.
"""
import ast
import json
import re
from pathlib import Path

import pytest

from helpers.maintainers import publish

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
ADDRESS = publish.read_address(ROOT / "pyproject.toml")
# What learners should not have to read: the test suite's files and markers, the repository's history, a source
# they cannot look up. Markers for tools are cell metadata tags instead.
PLUMBING = re.compile(r"tests/|test_\w+\.py|NBVAL_|notebook-version|seed 002|\bcommit(s|ted)?\b|\bissue \d|git history",
                      re.IGNORECASE)


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def source(cell: dict) -> str:
    return "".join(cell["source"])


def first_code_cell(path: Path) -> str:
    return next(source(c) for c in cells(path) if c["cell_type"] == "code")


def test_there_is_a_start_here_notebook():
    assert NOTEBOOKS and NOTEBOOKS[0].name == "00_start_here.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_notebook_opens_with_the_generated_setup_cell(path):
    assert first_code_cell(path) == publish.setup_cell(ADDRESS), "run `./workshop run helpers.maintainers.publish`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_setup_cell_shows_its_title_and_hides_its_plumbing(path):
    """Colab's form view shows the `# @title` line; JupyterLab collapses the input. A click shows the code."""
    setup = next(c for c in cells(path) if c["cell_type"] == "code")
    assert setup["metadata"]["cellView"] == "form" and setup["metadata"]["jupyter"]["source_hidden"] is True
    assert source(setup).startswith("# @title Setup")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_colab_badge_points_at_this_notebook_where_it_is_published(path):
    assert ADDRESS.badge(path.name) in source(cells(path)[0]), "run `python -m helpers.maintainers.publish`"


def test_the_readme_links_to_where_the_workshop_is_published():
    readme = (ROOT / "README.md").read_text()
    assert f"({ADDRESS.colab(NOTEBOOKS[0].name)})" in readme and f"git clone {ADDRESS.clone_url}" in readme


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_after_the_setup_builds_a_path_from_the_working_directory(path):
    # After a Colab restart the working directory is /content: paths come from helpers.runtime.paths (DATA, ROOT).
    code = [source(c) for c in cells(path) if c["cell_type"] == "code"][1:]
    assert not [s for s in code if "cwd()" in s or "getcwd()" in s]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_progress_is_text_not_a_widget(path):
    # A tqdm widget shows a bar frozen at 0 % on GitHub and stores its state in the file; helpers.runtime.progress prints.
    notebook = json.loads(path.read_text())
    assert not [s for s in (source(c) for c in notebook["cells"] if c["cell_type"] == "code") if "tqdm" in s]
    state = notebook["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    assert not [m for m in state.get("state", {}).values() if m.get("model_name") == "FloatProgressModel"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_exercises_have_check_cells_and_a_recap(path):
    headings = [source(c) for c in cells(path) if c["cell_type"] == "markdown"]
    assert sum("## Your turn" in h for h in headings) >= 2
    assert sum("check(" in source(c) for c in cells(path) if c["cell_type"] == "code") >= 2
    assert any(h.lstrip().startswith("## Recap") for h in headings)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_executed_without_errors(path):
    code = [c for c in cells(path) if c["cell_type"] == "code"]
    assert all(c["execution_count"] for c in code), "commit the notebook executed, top to bottom"
    counts = [c["execution_count"] for c in code]
    assert counts == sorted(counts)
    assert not any(o["output_type"] == "error" for c in code for o in c["outputs"])


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_hides_its_result_with_a_trailing_semicolon(path):
    # nbval runs cells without storing history, so IPython does not see the ';' and shows the result anyway:
    # the fresh run then has an output the committed notebook lacks, and nbval fails the cell.
    code = [source(c).rstrip() for c in cells(path) if c["cell_type"] == "code"]
    assert not [s.splitlines()[-1] for s in code if s.endswith(";")]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_cell_talks_to_the_maintainers(path):
    lines = [line for cell in cells(path) for line in source(cell).splitlines() if PLUMBING.search(line)]
    assert not lines, "say it in docs/ or CONTRIBUTING.md, or as a cell tag"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_kernel_is_named_as_jupyterlab_names_it(path):
    # JupyterLab writes ipykernel's display name into a notebook it opens: any other name marks every notebook
    # as modified the moment it is opened, before the reader has changed anything.
    from ipykernel.kernelspec import get_kernel_dict

    kernelspec = json.loads(path.read_text())["metadata"]["kernelspec"]
    assert kernelspec == {**kernelspec, "name": "python3", "display_name": get_kernel_dict()["display_name"]}


MUTATORS = {"append", "extend", "insert", "add", "update", "setdefault"}


def outside_definitions(tree: ast.AST):
    """Every node of a cell that runs when the cell runs: not inside a function, lambda or class body."""
    for node in ast.iter_child_nodes(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield node
            yield from outside_definitions(node)


def grows_another_cells_name(code: str) -> list[str]:
    """Lines where a cell adds to a collection it did not make itself: run twice, it records twice."""
    tree = ast.parse("\n".join(line[: len(line) - len(line.lstrip())] + "pass" if line.lstrip().startswith(("!", "%"))
                               else line for line in code.splitlines()))
    grown_in_place = {id(n.target) for n in ast.walk(tree) if isinstance(n, ast.AugAssign)}
    made = {n.id for n in ast.walk(tree)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in grown_in_place}
    grown = []
    for node in outside_definitions(tree):
        target = None
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            target = node.target.id
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS
              and isinstance(node.func.value, ast.Name)):
            target = node.func.value.id
        if target and target not in made:
            grown.append(ast.unparse(node))
    return grown


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_running_a_cell_again_records_nothing_twice(path):
    grown = [line for c in cells(path) if c["cell_type"] == "code" for line in grows_another_cells_name(source(c))]
    assert not grown, "build the collection in the cell that fills it, so a second run starts afresh"


def test_a_cell_that_grows_another_cells_list_is_found():
    assert grows_another_cells_name("messages.append(step)") == ["messages.append(step)"]
    assert grows_another_cells_name("for s in steps:\n    ledger += [s]") == ["ledger += [s]"]
    assert grows_another_cells_name("messages = []\nmessages.append(step)") == []
    assert grows_another_cells_name("def f(m):\n    m.append(1)") == []
