"""Starting, finding again and stopping the server: one per user and checkout, restarted when its code is old."""
import http.server
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from helpers.server import CHECKOUT, SERVER_NAME, MissingDependency, code_version, control
from helpers.server.control import DEFAULT_PORT, ensure_server, health, start_server, stop_server

ME = os.getuid()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def server_answer(uid=ME, checkout=CHECKOUT, code=None, pid=4242) -> dict:
    return {"server": SERVER_NAME, "uid": uid, "user": "someone" if uid != ME else "me", "checkout": checkout,
            "code": code or code_version(), "pid": pid}


@pytest.fixture()
def ports(monkeypatch):
    """Which answer each port gives, and which ports the code started or stopped servers on."""
    monkeypatch.delenv("WORKSHOP_PORT", raising=False)
    world = {"answers": {}, "started": [], "stopped": []}
    monkeypatch.setattr(control, "health", lambda port, timeout=1.0: world["answers"].get(port))
    monkeypatch.setattr(control, "start_server", lambda port: world["started"].append(port) or f"started {port}")
    monkeypatch.setattr(control, "stop_server", lambda port: world["stopped"].append(port) or True)
    return world


def test_nothing_running_starts_on_the_default_port(ports):
    assert ensure_server() == f"started {DEFAULT_PORT}"


def test_our_current_server_is_reused_wherever_it_runs(ports):
    ports["answers"] = {DEFAULT_PORT: server_answer(uid=ME + 1), DEFAULT_PORT + 3: server_answer()}
    assert ensure_server() == control.base_url(DEFAULT_PORT + 3) and ports["started"] == []


def test_another_users_server_is_never_shared_the_next_free_port_is_taken(ports):
    ports["answers"] = {DEFAULT_PORT: server_answer(uid=ME + 1)}
    assert ensure_server() == f"started {DEFAULT_PORT + 1}" and ports["stopped"] == []


def test_a_server_from_another_checkout_is_left_alone(ports):
    ports["answers"] = {DEFAULT_PORT: server_answer(checkout="/elsewhere")}
    assert ensure_server() == f"started {DEFAULT_PORT + 1}" and ports["stopped"] == []


def test_a_server_running_older_code_is_restarted(ports, capsys):
    ports["answers"] = {DEFAULT_PORT: server_answer(code="0ld")}
    assert ensure_server() == f"started {DEFAULT_PORT}" and ports["stopped"] == [DEFAULT_PORT]
    assert "older code" in capsys.readouterr().err


def test_an_explicit_port_held_by_another_user_is_a_clear_error(ports, monkeypatch):
    monkeypatch.setenv("WORKSHOP_PORT", "9100")
    ports["answers"] = {9100: server_answer(uid=ME + 1)}
    with pytest.raises(RuntimeError, match="someone's workshop server.*WORKSHOP_PORT"):
        ensure_server()
    assert ports["stopped"] == []


def test_an_explicit_port_held_by_another_program_is_a_clear_error(ports, monkeypatch):
    monkeypatch.setenv("WORKSHOP_PORT", "9100")
    ports["answers"] = {9100: {"something": "else"}}
    with pytest.raises(RuntimeError, match="another program"):
        ensure_server()


def test_stop_only_touches_our_own_servers(monkeypatch):
    monkeypatch.delenv("WORKSHOP_PORT", raising=False)
    answers = {DEFAULT_PORT: server_answer(uid=ME + 1, pid=1), DEFAULT_PORT + 1: server_answer(checkout="/x", pid=2)}
    killed = []
    monkeypatch.setattr(control, "health", lambda port, timeout=1.0: answers.get(port))
    monkeypatch.setattr(control.os, "kill", lambda pid, sig: killed.append(pid))
    assert stop_server() is False and killed == []


def test_status_names_the_owner(monkeypatch):
    monkeypatch.delenv("WORKSHOP_PORT", raising=False)
    answers = {DEFAULT_PORT: {**server_answer(uid=ME + 1), "queue": {"waiting": 3, "limit": 32}}}
    monkeypatch.setattr(control, "health", lambda port, timeout=1.0: answers.get(port))
    assert control.status() == [f"port {DEFAULT_PORT}: pid 4242 (someone's, from {CHECKOUT}), 3 waiting of 32, "
                                f"code {code_version()}"]


@pytest.mark.integration
def test_a_later_caller_reuses_the_running_server(server_url):
    port = int(os.environ["WORKSHOP_PORT"])
    first = health(port)
    assert ensure_server() == server_url
    assert health(port)["pid"] == first["pid"]


@pytest.mark.integration
def test_start_then_stop_on_a_port_of_its_own():
    port = free_port()
    url = start_server(port)
    answer = health(port)
    assert url == f"http://127.0.0.1:{port}/v1" and answer["status"] == "ok"
    assert (answer["uid"], answer["checkout"], answer["code"]) == (ME, CHECKOUT, code_version())
    assert stop_server(port) is True
    assert health(port) is None
    assert stop_server(port) is False


@pytest.mark.integration
def test_a_real_server_with_older_code_is_replaced(monkeypatch):
    port = free_port()
    start_server(port)
    old_pid = health(port)["pid"]
    monkeypatch.setattr(control, "code_version", lambda: "newer-code")
    try:
        ensure_server(port)
        assert health(port)["pid"] != old_pid
    finally:
        stop_server(port)


@pytest.mark.integration
def test_the_server_leaves_with_the_lab_that_started_it(monkeypatch):
    lab = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setenv(control.OWNER_PID_VARIABLE, str(lab.pid))
    port = free_port()
    start_server(port)
    try:
        lab.kill()
        lab.wait()
        deadline = time.monotonic() + 15
        while health(port) is not None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert health(port) is None, "the server outlived the process it was started for"
    finally:
        stop_server(port)


def test_missing_packages_are_named_with_the_fix(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llama_cpp" else real_find_spec(name, *a))
    with pytest.raises(MissingDependency, match=r"llama-cpp-python.*pip install -r requirements.txt"):
        start_server(free_port())


@pytest.mark.integration
def test_a_port_held_by_another_program_is_a_clear_error():
    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(RuntimeError, match="exited"):
            control.start_server(other.server_address[1], ready_timeout=30)
    finally:
        other.shutdown()
