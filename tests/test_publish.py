"""`python -m helpers.maintainers.publish` moves every address in one go, on copies of the real files, and is idempotent."""
import json
import shutil
from pathlib import Path

import pytest

from helpers.maintainers import publish
from helpers.runtime.paths import ROOT

PLACEHOLDER = "structured-outputs-workshop/structured-outputs-workshop"
ACME = publish.Address("acme/workshop", "teach")


@pytest.fixture
def checkout(tmp_path) -> Path:
    """The files publish writes, copied: the real ones are never touched."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    shutil.copy(ROOT / "README.md", tmp_path)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return tmp_path


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text())["cells"]


def first_code_cell(path: Path) -> str:
    return next("".join(c["source"]) for c in cells(path) if c["cell_type"] == "code")


def test_a_new_address_leaves_no_trace_of_the_old_one(checkout, capsys):
    assert publish.main(["--repo", ACME.repository, "--branch", ACME.branch, "--root", str(checkout)]) == 0
    assert "published as https://github.com/acme/workshop (branch teach)" in capsys.readouterr().out
    assert publish.read_address(checkout / "pyproject.toml") == ACME
    texts = snapshot(checkout)
    assert not [name for name, text in texts.items() if PLACEHOLDER in text]
    assert f"({ACME.colab('00_start_here.ipynb')})" in texts["README.md"]
    assert f"git clone {ACME.clone_url}" in texts["README.md"]
    for path in publish.notebooks(checkout):
        assert ACME.badge(path.name) in "".join(cells(path)[0]["source"])
        assert first_code_cell(path) == publish.setup_cell(ACME)
        assert f"--branch teach {{CLONE_URL}}" in first_code_cell(path) and ACME.clone_url in first_code_cell(path)


def test_publishing_twice_changes_nothing(checkout, capsys):
    publish.main(["--repo", ACME.repository, "--root", str(checkout)])
    before = snapshot(checkout)
    publish.main(["--repo", ACME.repository, "--root", str(checkout)])
    assert snapshot(checkout) == before
    assert capsys.readouterr().out.endswith("everything was up to date\n")


def test_moving_back_restores_the_readme_and_only_the_workshop_links_move(checkout):
    original = (checkout / "README.md").read_text()
    here = publish.read_address(checkout / "pyproject.toml")
    publish.publish(checkout, ACME)
    moved = (checkout / "README.md").read_text()
    assert "https://github.com/guidance-ai/llguidance" in moved  # other projects' links stay
    publish.publish(checkout, here)
    assert (checkout / "README.md").read_text() == original


def test_with_no_arguments_the_current_address_is_written_everywhere(checkout):
    here = publish.read_address(checkout / "pyproject.toml")
    publish.main(["--root", str(checkout)])
    assert publish.read_address(checkout / "pyproject.toml") == here
    assert {first_code_cell(path) for path in publish.notebooks(checkout)} == {publish.setup_cell(here)}


def test_a_notebook_without_a_badge_gets_one_under_its_title(checkout):
    path = publish.notebooks(checkout)[0]
    notebook = json.loads(path.read_text())
    notebook["cells"][0]["source"] = ["# 00 · A title\n", "\n", "Some words."]
    path.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
    publish.publish_notebook(path, ACME)
    assert "".join(cells(path)[0]["source"]) == f"# 00 · A title\n\n{ACME.badge(path.name)}\n\nSome words."


def test_outputs_and_other_cells_are_left_alone(checkout):
    path = publish.notebooks(checkout)[1]
    before = cells(path)
    publish.publish_notebook(path, ACME)
    after = cells(path)
    setup_index = next(i for i, c in enumerate(before) if c["cell_type"] == "code")
    assert [c for i, c in enumerate(after) if i not in (0, setup_index)] == [
        c for i, c in enumerate(before) if i not in (0, setup_index)]
    assert after[setup_index]["outputs"] == before[setup_index]["outputs"]


@pytest.mark.parametrize("repo", ["acme", "acme/work shop", "acme/x;rm -rf", "-x/y", "a/b/c", "acme/ws\""])
def test_an_address_that_could_break_the_setup_cell_is_refused(checkout, repo, capsys):
    with pytest.raises(SystemExit):
        publish.main([f"--repo={repo}", "--root", str(checkout)])
    assert "not a GitHub OWNER/NAME" in capsys.readouterr().err
    assert publish.read_address(checkout / "pyproject.toml") != publish.Address("acme/x")


def test_a_branch_that_could_break_the_setup_cell_is_refused():
    for branch in ["--upload-pack=x", "main; ls", "a b", ""]:
        with pytest.raises(ValueError):
            publish.Address("acme/workshop", branch)
