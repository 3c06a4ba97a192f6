"""Notebook 00's setup cell, run the way Colab runs it: clone, editable install, prepare(), data found, and again
after a runtime restart (when `helpers` is already importable and the working directory is not the clone's).

Colab itself cannot be reached from here, so the test builds what its setup cell meets:
- a kernel in a virtual environment of its own, so `%pip install -e` never re-points this test run's `helpers`;
  it sees the compiled packages (llama-cpp-python, llguidance...) of this environment through a folder of links,
  so nothing is compiled again, and pip works offline (`PIP_NO_INDEX`);
- a stub `google.colab`, imported at start-up as Colab does;
- the clone URL and folder, through the cell's test-only overrides, pointing at a `file://` copy of this
  repository's HEAD and at a temporary folder; the kernel's working directory is another temporary folder.
The cell comes from `helpers.maintainers.publish.setup_cell`, the template every notebook's first cell is written from.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import helpers
from colab_stage import ADDRESS, ROOT, colab_env, origin
from helpers.maintainers import publish
from helpers.runtime.embedded import MODEL_ID
from kernel_runner import Kernel

pytestmark = [pytest.mark.slow, pytest.mark.integration]

# The kernel looks at the probe below after the setup cell; it prints one JSON line.
REPORT = """
import json, os, sys
import helpers
from helpers.runtime.paths import DATA
print(json.dumps({"helpers": helpers.__file__, "data": str(DATA), "cwd": os.getcwd(), "python": sys.executable,
                  "knowledge_base": (DATA / "knowledge_base.json").is_file(), "colab": "google.colab" in sys.modules,
                  "models": [m.id for m in conn.client.models.list()], "backend": conn.describe().splitlines()[0]}))
"""


def kernel_venv(folder: Path) -> Path:
    """A venv whose site-packages reaches this environment's packages, except this workshop's own install."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", folder / "venv"], check=True)
    links = folder / "parent-site-packages"
    links.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(("__editable__", "structured_outputs_workshop")) and entry.suffix != ".pth":
            (links / entry.name).symlink_to(entry)
    python = folder / "venv" / "bin" / "python"
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    Path(site, "parent.pth").write_text(f"{links}\n")
    return python


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("colab")
    env = colab_env(folder, origin(folder)) | {
        "WORKSHOP_BACKEND": "embedded",
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip reads "0" here as: do not isolate the build
    }
    kernel = Kernel(cwd=folder / "content", env=env, python=kernel_venv(folder), specs=folder)
    with kernel:
        try:
            yield folder, kernel
        finally:
            kernel.run("import importlib.util\nif importlib.util.find_spec('helpers'):\n"
                       "    from helpers.runtime.embedded import stop_server; stop_server()")


def report(kernel: Kernel) -> dict:
    return json.loads(kernel.run(REPORT).strip().splitlines()[-1])


def test_the_setup_cell_clones_installs_and_connects(colab):
    folder, kernel = colab
    clone = folder / "content" / "workshop"
    output = kernel.run(publish.setup_cell(ADDRESS))
    assert (clone / ".git").is_dir() and (clone / "helpers" / "runtime" / "paths.py").is_file()
    assert "backend: embedded" in output
    seen = report(kernel)
    assert seen["colab"] and seen["python"].startswith(str(folder / "venv"))
    assert seen["helpers"] == str(clone / "helpers" / "__init__.py")
    assert seen["data"] == str(clone / "data") and seen["knowledge_base"]
    assert seen["cwd"] == str(folder / "content") and MODEL_ID in seen["models"]


def test_after_a_restart_the_editable_install_finds_the_clone_and_its_data(colab):
    folder, kernel = colab
    clone = folder / "content" / "workshop"
    kernel.restart()
    assert "backend: embedded" in kernel.run(publish.setup_cell(ADDRESS))
    seen = report(kernel)
    assert seen["helpers"] == str(clone / "helpers" / "__init__.py") and seen["knowledge_base"]
    assert seen["cwd"] == str(folder / "content")  # not the clone's notebooks/: data must not depend on it


def test_this_test_runs_helpers_stays_where_it_was(colab):
    assert Path(helpers.__file__).resolve().parent.parent == ROOT
    check = subprocess.run([sys.executable, "-c", "import helpers; print(helpers.__file__)"], cwd=colab[0],
                           capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": ""})
    assert Path(check.stdout.strip()).resolve().parent.parent == ROOT
