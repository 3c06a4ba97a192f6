"""One embedded server for the whole test run, shared by integration tests and by the notebooks nbval executes.

Notebook kernels inherit this process's environment, so setting WORKSHOP_PORT and
WORKSHOP_BACKEND here makes every notebook find the same server, and never a paid
API even when a developer has keys in the environment. Every notebook cell nbval runs
is marked `integration` (notebooks talk to the model), so `-m "not integration"` runs
no model.
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
    for name in ("WORKSHOP_MODEL", "WORKSHOP_DIALECT", "WORKSHOP_IMAGES", "WORKSHOP_QUICK"):  # nbval runs in full
        os.environ.pop(name, None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.integration)


def pytest_unconfigure(config: pytest.Config) -> None:
    from helpers.runtime.embedded import stop_server

    stop_server(int(os.environ["WORKSHOP_PORT"]))
