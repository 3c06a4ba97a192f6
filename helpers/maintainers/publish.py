"""Where the workshop is published, kept in one place, and everything that follows from it.

    python -m helpers.maintainers.publish --repo OWNER/NAME [--branch main]   # publish under a new address
    python -m helpers.maintainers.publish                                     # bring every notebook up to date

The address is `[tool.workshop]` in pyproject.toml. From it this module writes each notebook's Colab
badge, the setup cell that opens every notebook (one template, `setup_cell`), and the README's links to
the repository. Running it again changes nothing; a test checks that the notebooks and the README agree.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat

from helpers.runtime.paths import ROOT

COLAB_BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE_LINE = re.compile(rf"^.*{re.escape(COLAB_BADGE_IMAGE)}.*$", re.MULTILINE)
COLAB_URL = re.compile(r"https://colab\.research\.google\.com/github/[^/\s)]+/[^/\s)]+/blob/[^/\s)]+/")
# Both go into a shell command and a Python string in the setup cell: nothing that could break out of either.
REPOSITORY_PATTERN = r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+"
BRANCH_PATTERN = r"[A-Za-z0-9._/-]+"
SECTION = re.compile(r"^\[tool\.workshop\]\n(?:(?!\[).*\n)*", re.MULTILINE)


@dataclass(frozen=True)
class Address:
    repository: str  # OWNER/NAME on GitHub
    branch: str = "main"

    def __post_init__(self) -> None:
        if not re.fullmatch(REPOSITORY_PATTERN, self.repository):
            raise ValueError(f"not a GitHub OWNER/NAME: {self.repository!r}")
        if not re.fullmatch(BRANCH_PATTERN, self.branch) or self.branch.startswith("-"):
            raise ValueError(f"not a branch name this tool accepts: {self.branch!r}")

    @property
    def web(self) -> str:
        return f"https://github.com/{self.repository}"

    @property
    def clone_url(self) -> str:
        return f"{self.web}.git"

    def colab(self, notebook: str) -> str:
        return f"https://colab.research.google.com/github/{self.repository}/blob/{self.branch}/notebooks/{notebook}"

    def badge(self, notebook: str) -> str:
        return f"[![Open In Colab]({COLAB_BADGE_IMAGE})]({self.colab(notebook)})"


# The setup cell shows its title only: Colab's form view and JupyterLab's collapsed input both hide its code, which
# is plumbing (a click shows it).
SETUP_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}


def setup_cell(address: Address) -> str:
    """The first code cell of every notebook."""
    return f'''\
# @title Setup: connect to the model (run this first; the code is plumbing, shown on a click)
# Setup: the same cell opens every notebook (written by `./workshop run helpers.maintainers.publish`; change it there).
# After `./workshop lab` it only connects. In Colab, where every badge opens a NEW runtime, it clones the workshop
# and installs the embedded model, with progress, unless an API key is set (see docs/setup.md).
import importlib.util, os, pathlib, sys

if importlib.util.find_spec("helpers") is None:
    if "google.colab" in sys.modules:  # tests set WORKSHOP_CLONE_URL and WORKSHOP_CLONE_DIR to a local copy
        CLONE_URL = os.environ.get("WORKSHOP_CLONE_URL",
                                   "{address.clone_url}")
        WORKSHOP = pathlib.Path(os.environ.get("WORKSHOP_CLONE_DIR", "/content/workshop"))
        if not WORKSHOP.exists():
            !git clone -q --depth 1 --branch {address.branch} {{CLONE_URL}} "{{WORKSHOP}}"
        %pip install -q -e "{{WORKSHOP}}"
    else:  # Jupyter started by hand in notebooks/, without `./workshop lab`
        WORKSHOP = pathlib.Path.cwd().parent
    sys.path.insert(0, str(WORKSHOP))  # the install is seen after a restart; this finds `helpers` now

from helpers.runtime.environment import prepare

conn = prepare()  # with an API key set this compiles nothing; without one it starts the embedded model'''


def read_address(pyproject: Path) -> Address:
    section = SECTION.search(pyproject.read_text(encoding="utf-8"))
    if section is None:
        raise ValueError(f"{pyproject} has no [tool.workshop] section")
    values = dict(re.findall(r'^(\w+)\s*=\s*"([^"]*)"', section[0], re.MULTILINE))
    return Address(values["repository"], values.get("branch", "main"))


def write_address(pyproject: Path, address: Address) -> bool:
    text = pyproject.read_text(encoding="utf-8")
    section = f'[tool.workshop]\nrepository = "{address.repository}"\nbranch = "{address.branch}"\n'
    new = SECTION.sub(lambda _: section, text, count=1)
    return _write(pyproject, text, new)


def publish_notebook(path: Path, address: Address) -> bool:
    """Put the badge for `address` in the first cell and the setup cell in the first code cell."""
    text = path.read_text(encoding="utf-8")
    notebook = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
    top = notebook.cells[0]
    badge = address.badge(path.name)
    if BADGE_LINE.search(top.source):
        top.source = BADGE_LINE.sub(lambda _: badge, top.source, count=1)
    else:  # under the title
        title, _, rest = top.source.partition("\n")
        top.source = f"{title}\n\n{badge}" + (f"\n{rest}" if rest else "")
    setup = next(cell for cell in notebook.cells if cell.cell_type == "code")
    setup.source = setup_cell(address)
    setup.metadata.update(SETUP_METADATA)
    return _write(path, text, nbformat.writes(notebook) + "\n")


def publish_readme(path: Path, old: Address, new: Address) -> bool:
    """Point the README's links to the repository, and every Colab link, at `new`."""
    text = path.read_text(encoding="utf-8")
    moved = COLAB_URL.sub(f"https://colab.research.google.com/github/{new.repository}/blob/{new.branch}/", text)
    moved = re.sub(rf"https://github\.com/{re.escape(old.repository)}(?=[/.\s)`]|$)", new.web, moved)
    return _write(path, text, moved)


def publish(root: Path = ROOT, address: Address | None = None) -> list[Path]:
    """Write `address` (default: the current one) everywhere under `root`; the files that changed."""
    pyproject = root / "pyproject.toml"
    old = read_address(pyproject)
    new = address or old
    changed = [pyproject] if write_address(pyproject, new) else []
    if publish_readme(root / "README.md", old, new):
        changed.append(root / "README.md")
    changed += [path for path in notebooks(root) if publish_notebook(path, new)]
    return changed


def notebooks(root: Path = ROOT) -> list[Path]:
    return sorted((root / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _write(path: Path, old: str, new: str) -> bool:
    if new == old:
        return False
    path.write_text(new, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.maintainers.publish", description=__doc__.splitlines()[0])
    parser.add_argument("--repo", help="OWNER/NAME on GitHub (default: the current one, from pyproject.toml)")
    parser.add_argument("--branch", help="the branch Colab opens and the setup cell clones (default: the current)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the workshop folder (default: this checkout)")
    args = parser.parse_args(argv)
    current = read_address(args.root / "pyproject.toml")
    try:
        address = Address(args.repo or current.repository, args.branch or current.branch)
    except ValueError as error:
        parser.error(str(error))
    changed = publish(args.root, address)
    print(f"published as {address.web} (branch {address.branch}):",
          ", ".join(str(path.relative_to(args.root)) for path in changed) if changed else "everything was up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
