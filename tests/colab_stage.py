"""What a Colab runtime is made of here, for the tests that run the setup cell the way Colab does
(tests/test_colab_setup.py, tests/test_colab_matrix.py).

Colab itself cannot be reached from here, so these stand in for it: a `google.colab` module imported at start-up
(its presence, and a Secrets panel with no key in it), the workshop's published branch as a local repository the
setup cell clones through its test-only WORKSHOP_CLONE_URL and WORKSHOP_CLONE_DIR, and an environment without keys.
"""
from __future__ import annotations

import socket
import subprocess
from pathlib import Path

from helpers.maintainers import publish

ROOT = Path(__file__).resolve().parent.parent
ADDRESS = publish.read_address(ROOT / "pyproject.toml")
STUB = {
    "google/colab/__init__.py": '"""A stand-in for Colab\'s module: only its presence and the Secrets panel."""\n',
    "google/colab/userdata.py": "def get(name):\n    raise KeyError(f'no secret {name!r} in this simulated Colab')\n",
    "sitecustomize.py": "import google.colab  # Colab imports it before any cell runs\n",
}
# What the test run may have set and a new Colab runtime has not: keys, and the workshop's own choices.
KEYS = ("NVIDIA_API_KEY", "HAI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL", "WORKSHOP_BACKEND", "WORKSHOP_MODEL",
        "WORKSHOP_DIALECT", "WORKSHOP_OWNER_PID")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def git(*args: str | Path) -> str:
    return subprocess.run(["git", *map(str, args)], check=True, capture_output=True, text=True).stdout


def origin(folder: Path) -> Path:
    """A bare copy of this repository whose published branch is this checkout's HEAD: what GitHub would serve."""
    bare = folder / "origin.git"
    git("clone", "-q", "--bare", ROOT, bare)
    git("-C", bare, "branch", "-f", ADDRESS.branch, git("-C", ROOT, "rev-parse", "HEAD").strip())
    return bare


def colab_env(folder: Path, bare: Path) -> dict[str, str]:
    """The variables a new runtime in `folder` gets on top of the test run's: the stand-in on the path, the clone's
    origin and place (`folder`/content/workshop, as Colab's /content/workshop), no key, and a server port of its
    own (never the test run's server)."""
    (folder / "content").mkdir()
    stub = folder / "stub"
    for name, text in STUB.items():
        (stub / name).parent.mkdir(parents=True, exist_ok=True)
        (stub / name).write_text(text)
    return {key: "" for key in KEYS} | {
        "PYTHONPATH": str(stub),
        "WORKSHOP_CLONE_URL": f"file://{bare}",
        "WORKSHOP_CLONE_DIR": str(folder / "content" / "workshop"),
        "WORKSHOP_PORT": str(free_port()),
    }
