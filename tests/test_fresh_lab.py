"""A fresh clone opens the lab compiling nothing, where llama-cpp-python's CPU index has the pinned wheel (issue 49).

The index cannot be reached from here, so it is replaced as the Colab matrix replaces it: a folder holding the pinned
wheel, offered to pip by PIP_FIND_LINKS, the index itself failing at once (PIP_RETRIES=0). The clone's own cache
folder is empty (XDG_CACHE_HOME), so no machine wheel is at hand either: the lab's first start must fetch the wheel,
as a laptop with internet would from the index, and build nothing. Packages come from pip's cache or the package
registry as for a learner. Cost: about a minute on 2 cores (one lab install, JupyterLab started and asked once).
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from helpers.runtime import install

pytestmark = [pytest.mark.slow, pytest.mark.integration]
ROOT = Path(__file__).resolve().parent.parent
DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serves(url: str) -> bool:
    try:
        with DIRECT.open(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def test_a_fresh_clone_opens_the_lab_compiling_nothing(tmp_path):
    clone = tmp_path / "workshop"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    index = tmp_path / "index"
    index.mkdir()
    wheel = install.machine_wheel()  # the wheel at hand, as the index would serve it
    (index / wheel.name).symlink_to(wheel)
    port = free_port()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PIP_FIND_LINKS": str(index),
           "PIP_RETRIES": "0", "PIP_DEFAULT_TIMEOUT": "15", "WORKSHOP_VENV": str(tmp_path / "venv")}
    for name in ("VIRTUAL_ENV", "WORKSHOP_PORT", "WORKSHOP_BACKEND"):
        env.pop(name, None)
    log = tmp_path / "lab.log"
    started = time.monotonic()
    with log.open("w") as out:
        lab = subprocess.Popen([str(clone / "workshop"), "lab", "--no-browser", "--port", str(port),
                                "--ServerApp.token=", "--ServerApp.password="], cwd=clone, env=env, stdout=out,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = started + 600
        while time.monotonic() < deadline and lab.poll() is None and not serves(f"http://127.0.0.1:{port}/lab"):
            time.sleep(1)
        seconds = time.monotonic() - started
        said = log.read_text()
        assert serves(f"http://127.0.0.1:{port}/lab"), said[-3000:]
    finally:
        os.killpg(lab.pid, signal.SIGTERM)
        lab.wait(30)
    assert "asking its authors' CPU index" in said and not re.search(r"building llama-cpp-python\S* from source", said)
    assert list((tmp_path / "cache" / "structured-outputs-workshop" / "wheels").glob("llama_cpp_python-*.whl"))
    print(f"the lab served after {seconds:.0f} s")
    shutil.rmtree(tmp_path / "venv", ignore_errors=True)
