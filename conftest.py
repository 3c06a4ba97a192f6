"""One embedded server per test process, shared by its integration tests and by the notebooks nbval executes in
it: `./workshop test` runs two xdist workers, each its own process, so two servers, each decoding on its own core.

Notebook kernels inherit this process's environment, so setting WORKSHOP_PORT and
WORKSHOP_BACKEND here makes every notebook find the same server, and never a paid
API even when a developer has keys in the environment. A server for WORKSHOP_PORT has
a folder of its own (`helpers.runtime.embedded.server_folder`), and the port is one no
other program holds now: no other checkout or test run finds this server, nor this run
theirs (nor the other worker's). It leaves with this process. Every notebook cell nbval runs is marked
`integration` (notebooks talk to the model), so `-m "not integration"` runs no model.

The run sets WORKSHOP_QUICK=1 for every pass over the notebooks (nbval, llama-cpp-python's server, the Colab
matrix): their long going-further measurements run the same code on fewer cases. The full size runs when a notebook
is executed to be committed (CONTRIBUTING, Notebooks).
"""
from __future__ import annotations

import os
import socket

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pytest_configure(config: pytest.Config) -> None:
    os.environ["WORKSHOP_BACKEND"] = "embedded"
    os.environ["WORKSHOP_PORT"] = str(_free_port())
    os.environ["WORKSHOP_QUICK"] = "1"
    # The run's server leaves with this process, not with a lab or never
    for name in ("WORKSHOP_MODEL", "WORKSHOP_MODEL_FILE", "WORKSHOP_DIALECT", "WORKSHOP_IMAGES", "WORKSHOP_OWNER_PID",
                 "WORKSHOP_KEEP_SERVER"):
        os.environ.pop(name, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.integration)
    # Heaviest files first: `./workshop test` hands files to two workers in this order (--no-loadscope-reorder),
    # so the last ones to start are short and neither worker waits long, idle, for the other at the end.
    weight = {}
    for item in items:
        rank = 0 if item.get_closest_marker("slow") else 1 if item.path.suffix == ".ipynb" else \
            2 if item.get_closest_marker("integration") else 3
        weight[item.path] = min(rank, weight.get(item.path, rank))
    items.sort(key=lambda item: weight[item.path])


def pytest_unconfigure(config: pytest.Config) -> None:
    from helpers.runtime.embedded import stop_server

    stop_server()
