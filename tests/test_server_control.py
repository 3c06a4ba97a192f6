import http.server
import importlib.util
import os
import socket
import threading

import pytest

from helpers import server_control
from helpers.engine import MissingDependency
from helpers.server_control import ensure_server, health, start_server, stop_server

pytestmark = pytest.mark.integration


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_a_later_caller_reuses_the_running_server(server_url):
    port = int(os.environ["WORKSHOP_PORT"])
    first = health(port)
    assert ensure_server() == server_url
    assert health(port)["pid"] == first["pid"]


def test_start_then_stop_on_a_port_of_its_own():
    port = free_port()
    url = start_server(port)
    assert url == f"http://127.0.0.1:{port}/v1" and health(port)["status"] == "ok"
    assert stop_server(port) is True
    assert health(port) is None
    assert stop_server(port) is False


def test_missing_packages_are_named_with_the_fix(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real_find_spec(name, *a))
    with pytest.raises(MissingDependency, match=r"llama-cpp-python.*pip install -r requirements.txt"):
        start_server(free_port())


def test_a_port_held_by_another_program_is_a_clear_error():
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(RuntimeError, match="exited"):
            server_control.start_server(other.server_address[1], ready_timeout=30)
    finally:
        other.shutdown()
