"""Notebook 00's setup cell, run the way Colab runs it: clone, editable install, prepare(), data found, and again
after a runtime restart (when `helpers` is already importable and the working directory is not the clone's).

Colab itself cannot be reached from here, so the test builds what its setup cell meets:
- a kernel in a virtual environment of its own, so `%pip install -e` never re-points this test run's `helpers`;
  it sees the compiled packages (llama-cpp-python, llguidance...) of this environment through a folder of links,
  so nothing is compiled again, and pip works offline (`PIP_NO_INDEX`);
- a stub `google.colab`, imported at start-up as Colab does;
- the clone URL and folder, through the cell's test-only overrides, pointing at a `file://` copy of this
  repository's HEAD and at a temporary folder; the kernel's working directory is another temporary folder.
The cell comes from `helpers.runtime.publish.setup_cell`, the template every notebook's first cell is written from.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import helpers
from helpers.runtime import publish
from helpers.server import MODEL_ID
from kernel_runner import Kernel

pytestmark = [pytest.mark.slow, pytest.mark.integration]

ROOT = Path(__file__).resolve().parent.parent
ADDRESS = publish.read_address(ROOT / "pyproject.toml")
STUB = {
    "google/colab/__init__.py": '"""A stand-in for Colab\'s module: only its presence and the Secrets panel."""\n',
    "google/colab/userdata.py": "def get(name):\n    raise KeyError(f'no secret {name!r} in this simulated Colab')\n",
    "sitecustomize.py": "import google.colab  # Colab imports it before any cell runs\n",
}
# The kernel looks at the probe below after the setup cell; it prints one JSON line.
REPORT = """
import json, os, sys
import helpers
from helpers.runtime.paths import DATA
print(json.dumps({"helpers": helpers.__file__, "data": str(DATA), "cwd": os.getcwd(), "python": sys.executable,
                  "knowledge_base": (DATA / "knowledge_base.json").is_file(), "colab": "google.colab" in sys.modules,
                  "models": [m.id for m in conn.client.models.list()], "backend": conn.describe().splitlines()[0]}))
"""
KEYS = ("NVIDIA_API_KEY", "HAI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "WORKSHOP_MODEL", "WORKSHOP_DIALECT",
        "WORKSHOP_OWNER_PID")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


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


def origin(folder: Path) -> Path:
    """A bare copy of this repository whose published branch is this checkout's HEAD."""
    bare = folder / "origin.git"
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    git("clone", "-q", "--bare", str(ROOT), str(bare))
    git("-C", str(bare), "branch", "-f", ADDRESS.branch, head)
    return bare


@pytest.fixture(scope="module")
def colab(tmp_path_factory):
    folder = tmp_path_factory.mktemp("colab")
    for name, text in STUB.items():
        (folder / "stub" / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / "stub" / name).write_text(text)
    (folder / "content").mkdir()
    env = {key: "" for key in KEYS} | {
        "PYTHONPATH": str(folder / "stub"),
        "WORKSHOP_CLONE_URL": f"file://{origin(folder)}",
        "WORKSHOP_CLONE_DIR": str(folder / "content" / "workshop"),
        "WORKSHOP_BACKEND": "embedded",
        "WORKSHOP_PORT": str(free_port()),  # a server of the clone's own, not the test run's
        "PIP_NO_INDEX": "1",
        "PIP_NO_BUILD_ISOLATION": "0",  # pip reads "0" here as: do not isolate the build
    }
    kernel = Kernel(cwd=folder / "content", env=env, python=kernel_venv(folder), specs=folder)
    with kernel:
        try:
            yield folder, kernel
        finally:
            kernel.run("import importlib.util\nif importlib.util.find_spec('helpers'):\n"
                       "    from helpers.server.control import stop_server; stop_server()")


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
