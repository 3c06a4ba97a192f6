"""Every notebook through the NVIDIA backend's own code path, on a server that refuses `nvext` (issue 49).

A room that runs its own NIM points the workshop at it with NVIDIA_BASE_URL. If that server refuses NIM 1.x's
spelling (a newer NIM speaks `response_format`), `connect()` must not trust it: its probe finds `nvext` refused and
takes the next dialect the server enforces, and every notebook runs to the end with no error output. The server is
`tests/refusing_proxy.py` in front of the test run's embedded server; tests/test_llama_cpp_server.py runs the same
path against a server that accepts `nvext` and ignores it.

Cost: the seven notebooks once more, at WORKSHOP_QUICK's size, about as long as their nbval pass (10 minutes on
2 cores, an estimate), on one worker.
"""
from __future__ import annotations

import os
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from refusing_proxy import RefusingProxy
from test_llama_cpp_server import FOREIGN_SETTINGS, errors_in

from helpers.runtime.embedded import MODEL_ID

pytestmark = [pytest.mark.integration, pytest.mark.slow]
NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


@pytest.fixture(scope="module")
def refusing(server):
    with RefusingProxy(server.url, server.key) as proxy:
        yield proxy


@pytest.mark.parametrize("name", sorted(p.name for p in NOTEBOOKS.glob("0[0-6]_*.ipynb")))
def test_every_notebook_runs_on_a_nim_that_refuses_nvext(refusing, name):
    env = {k: v for k, v in os.environ.items() if k not in FOREIGN_SETTINGS}
    env |= {"NVIDIA_API_KEY": "nvapi-test-not-a-key", "NVIDIA_BASE_URL": refusing.base_url,
            "WORKSHOP_MODEL": MODEL_ID, "NO_PROXY": "127.0.0.1,localhost"}
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute(env=env)
    assert errors_in(notebook) == []
    printed = "\n".join(out.get("text", "") for cell in notebook.cells if cell.cell_type == "code"
                        for out in cell.get("outputs", []))
    assert "backend: nvidia" in printed and "why:     probed in order: nvext rejected, response_format enforced" in printed
    assert refusing.refused >= 1
