"""Starting, finding again and stopping the server: one per user and checkout, restarted when its code is old."""
import http.server
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from helpers.runtime import embedded as control
from helpers.runtime.embedded import CHECKOUT, SERVER_NAME, MissingDependency, code_version
from helpers.runtime.embedded import DEFAULT_PORT, ensure_server, health, start_server, stop_server

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
    """Which answer each port gives, whose socket the kernel says holds it (by default, the uid the answer claims),
    and which ports the code started or stopped servers on."""
    monkeypatch.delenv("WORKSHOP_PORT", raising=False)
    world = {"answers": {}, "owners": {}, "started": [], "stopped": []}

    def kernel_says(port):
        uid = world["owners"].get(port, world["answers"].get(port, {}).get("uid", ME))
        return [control.Listener(uid=uid)] if port in world["answers"] else []

    monkeypatch.setattr(control, "health", lambda port, timeout=1.0: world["answers"].get(port))
    monkeypatch.setattr(control, "listeners", kernel_says)
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
    with pytest.raises(RuntimeError, match=f"another user.*uid {ME + 1}.*use another port.*WORKSHOP_PORT"):
        ensure_server()
    assert ports["stopped"] == []


def test_a_server_claiming_to_be_ours_on_a_port_another_user_holds_is_neither_reused_nor_restarted(ports):
    ports["answers"] = {DEFAULT_PORT: server_answer(code="0ld")}
    ports["owners"] = {DEFAULT_PORT: ME + 1}
    assert ensure_server() == f"started {DEFAULT_PORT + 1}" and ports["stopped"] == []


def test_an_explicit_port_held_by_another_program_is_a_clear_error(ports, monkeypatch):
    monkeypatch.setenv("WORKSHOP_PORT", "9100")
    ports["answers"] = {9100: {"something": "else"}}
    with pytest.raises(RuntimeError, match="another program"):
        ensure_server()


HELPERS_SERVER = ["python", "-m", "helpers.server", "--port", "8765"]


@pytest.mark.parametrize("owner,holder,command,checkout", [
    (ME + 1, 101, HELPERS_SERVER, CHECKOUT),  # another user's socket, whatever its /health says
    (ME, 102, ["python", "fake.py"], CHECKOUT),  # ours, but not a helpers.server: never signalled
    (ME, None, HELPERS_SERVER, CHECKOUT),  # ours, holder not found
    (ME, 103, HELPERS_SERVER, "/another/checkout"),  # another checkout's server
], ids=["other-user", "other-program", "no-holder", "other-checkout"])
def test_stop_signals_no_process_the_kernel_does_not_show_to_be_our_server(monkeypatch, owner, holder, command,
                                                                           checkout):
    monkeypatch.delenv("WORKSHOP_PORT", raising=False)
    killed = []
    monkeypatch.setattr(control, "health", lambda port, timeout=1.0: server_answer(checkout=checkout, pid=4242))
    monkeypatch.setattr(control, "listeners", lambda port: [control.Listener(uid=owner, inode=port)])
    monkeypatch.setattr(control, "holder", lambda listener: holder)
    monkeypatch.setattr(control, "command_line", lambda pid: command)
    monkeypatch.setattr(control.os, "kill", lambda pid, sig: killed.append(pid))
    assert stop_server() is False and killed == []


def test_stop_signals_the_process_the_kernel_says_holds_our_servers_port(monkeypatch):
    killed, listening = [], {DEFAULT_PORT + 2}
    monkeypatch.delenv("WORKSHOP_PORT", raising=False)
    monkeypatch.setattr(control, "health", lambda port, timeout=1.0: server_answer(pid=4242))
    monkeypatch.setattr(control, "listeners", lambda port: [control.Listener(uid=ME, inode=port)]
                        if port in listening else [])
    monkeypatch.setattr(control, "holder", lambda listener: 777)
    monkeypatch.setattr(control, "command_line", lambda pid: ["/venv/bin/python", "-X", "utf8", *HELPERS_SERVER[1:]])
    monkeypatch.setattr(control.os, "kill", lambda pid, sig: killed.append(pid) or listening.clear())
    assert stop_server() is True and killed == [777]  # the kernel's pid, not the 4242 that /health names


def test_status_names_the_owner_the_kernel_reports(ports):
    ports["answers"] = {DEFAULT_PORT: {**server_answer(uid=ME), "queue": {"waiting": 3, "limit": 32}}}
    ports["owners"] = {DEFAULT_PORT: ME + 1}
    assert control.status() == [f"port {DEFAULT_PORT}: pid 4242 (held by {control.owner_of(DEFAULT_PORT)}; it says "
                                f"it is from {CHECKOUT}), 3 waiting of 32, code {code_version()}"]
    assert "another user" in control.owner_of(DEFAULT_PORT)


PROC_NET_TCP = """\
  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1001        0 5001 1 0 100 0 0 10 0
   1: 00000000:223E 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1002        0 5002 1 0 100 0 0 10 0
   2: 0100007F:223D 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1003        0 5003 1 0 20 4 30 10 -1
   3: 0200000A:223D 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1004        0 5004 1 0 100 0 0 10 0
"""
PROC_NET_TCP6 = """\
  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:223D 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1005        0 5005 1 0 100 0 0 10 0
   1: 00000000000000000000000001000000:223D 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1006        0 5006 1 0 100 0 0 10 0
"""


@pytest.mark.skipif(sys.byteorder != "little", reason="the sample rows are written as a little-endian kernel does")
def test_the_listeners_are_read_from_the_kernels_table(tmp_path):
    (tmp_path / "net").mkdir()
    (tmp_path / "net" / "tcp").write_text(PROC_NET_TCP)
    (tmp_path / "net" / "tcp6").write_text(PROC_NET_TCP6)
    # Port 0x223D = 8765: 127.0.0.1 and the IPv6 wildcard are reachable from 127.0.0.1; an established connection,
    # 10.0.0.2 and ::1 (the server connects to 127.0.0.1 only) are not. 0x223E is another port.
    assert control.proc_listeners(8765, tmp_path) == [control.Listener(1001, 5001), control.Listener(1005, 5005)]
    assert control.proc_listeners(8766, tmp_path) == [control.Listener(1002, 5002)]
    assert control.proc_listeners(8767, tmp_path) == []


def test_the_holder_of_a_socket_is_found_by_its_inode(tmp_path):
    for pid, target in ((10, "pipe:[1]"), (20, "socket:[5001]")):
        (tmp_path / str(pid) / "fd").mkdir(parents=True)
        os.symlink(target, tmp_path / str(pid) / "fd" / "3")
    assert control.holder(control.Listener(1001, 5001), tmp_path) == 20
    assert control.holder(control.Listener(1001, 9999), tmp_path) is None


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


def gone(port: int, within: float = 15) -> bool:
    """Whether the server on `port` stops answering within `within` seconds."""
    deadline = time.monotonic() + within
    while health(port) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    return health(port) is None


@pytest.mark.integration
def test_the_server_leaves_with_the_lab_that_started_it(monkeypatch):
    lab = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setenv(control.OWNER_PID_VARIABLE, str(lab.pid))
    port = free_port()
    start_server(port)
    try:
        lab.kill()
        lab.wait()
        assert gone(port), "the server outlived the process it was started for"
    finally:
        stop_server(port)


# A kernel's code: it believes it runs in Jupyter (as IPython says in a real kernel), starts the server, and ends.
KERNEL = """
import sys, types
shell = types.SimpleNamespace(kernel=object())
sys.modules["IPython"] = types.SimpleNamespace(get_ipython=lambda: shell)
from helpers.runtime.embedded import start_server
start_server(int(sys.argv[1]))
"""


@pytest.mark.integration
def test_a_jupyter_started_by_hand_takes_its_server_with_it(monkeypatch):
    """No `./workshop lab`, so no owner variable: the server a kernel starts stays while the Jupyter that ran the
    kernel lives (the kernel's end does not stop it: another notebook may use it), and leaves when that Jupyter
    stops."""
    monkeypatch.delenv(control.OWNER_PID_VARIABLE, raising=False)
    port = free_port()
    jupyter = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                                f"subprocess.run([sys.executable, '-c', {KERNEL!r}, '{port}'], check=True)\n"
                                "time.sleep(120)"], cwd=CHECKOUT)
    try:
        deadline = time.monotonic() + 60
        while health(port) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert health(port) is not None, "the kernel did not start its server"
        time.sleep(1.5)
        assert health(port) is not None and jupyter.poll() is None
        jupyter.kill()
        jupyter.wait()
        assert gone(port), "the server outlived the Jupyter its kernel ran in"
    finally:
        jupyter.kill()
        stop_server(port)


def test_only_a_kernel_gives_its_server_an_owner_and_the_labs_own_comes_first(monkeypatch):
    monkeypatch.delenv(control.OWNER_PID_VARIABLE, raising=False)
    assert not control.in_kernel() and "--exit-with" not in control.server_command(8765)  # a script, a test
    monkeypatch.setattr(control, "in_kernel", lambda: True)
    assert control.server_command(8765)[-2:] == ["--exit-with", str(os.getppid())]
    monkeypatch.setenv(control.OWNER_PID_VARIABLE, "4242")
    assert control.server_command(8765)[-2:] == ["--exit-with", "4242"]


def test_in_kernel_asks_ipython_for_a_kernel(monkeypatch):
    import types

    shell = types.SimpleNamespace(kernel=None)
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert not control.in_kernel()  # IPython in a terminal: no kernel
    shell.kernel = object()
    assert control.in_kernel()


def test_the_log_lives_in_a_folder_only_its_user_may_enter(monkeypatch, tmp_path):
    monkeypatch.setattr(control.tempfile, "gettempdir", lambda: str(tmp_path))
    log = control.log_path(8765)
    assert log.parent.parent == tmp_path and (log.parent.stat().st_mode & 0o777) == 0o700
    os.close(control.open_log(log))
    assert (log.stat().st_mode & 0o777) == 0o600


def test_a_planted_log_folder_or_log_link_is_refused(monkeypatch, tmp_path):
    monkeypatch.setattr(control.tempfile, "gettempdir", lambda: str(tmp_path))
    folder = control.log_folder()
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (folder / "server-8765.log").symlink_to(victim)
    with pytest.raises(OSError):
        control.open_log(control.log_path(8765))
    assert victim.read_text() == "precious"
    (folder / "server-8765.log").unlink()
    folder.rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere)  # a link planted where the folder goes
    with pytest.raises(PermissionError, match="not a private folder"):
        control.log_path(8765)
    folder.unlink()
    folder.mkdir(mode=0o755)
    folder.chmod(0o777)  # a folder others may write into
    with pytest.raises(PermissionError, match="not a private folder"):
        control.log_path(8765)


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


NOBODY = 65534


def lying_server(port: int, claim: dict, uid: int | None) -> int:
    """A child process that listens on `port` (as `uid`, when given) and answers /health with `claim`: a tiny
    HTTP server that says it is this user's workshop server. Its pid; it ends when the test kills it."""
    "127.0.0.1".encode("idna")  # loaded now: the child, as nobody, may not read the standard library's files
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to `uid`, listen, tell the parent, serve
        try:
            os.close(ready_read)
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            answer = json.dumps(claim).encode()

            class Liar(http.server.BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(answer)))
                    self.end_headers()
                    self.wfile.write(answer)

                def log_message(self, *args):
                    pass

            server = http.server.HTTPServer(("127.0.0.1", port), Liar)
            os.write(ready_write, b"ok")
            server.serve_forever()
        except BaseException as exc:
            os.write(ready_write, repr(exc).encode())
        finally:
            os._exit(0)
    os.close(ready_write)
    said = os.read(ready_read, 200)
    os.close(ready_read)
    if said != b"ok":
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        pytest.skip(f"could not listen as uid {uid}: {said.decode(errors='replace')}")
    return pid


@pytest.fixture()
def victim():
    """A process of this user's that a lying server names as its pid."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()


@pytest.mark.skipif(not hasattr(os, "fork") or control.listeners(free_port()) is None,
                    reason="needs fork and a kernel that names a socket's owner (/proc/net/tcp or lsof)")
@pytest.mark.parametrize("owner", ["another-user", "this-user"])
def test_a_server_that_lies_about_its_owner_is_not_taken_as_ours_nor_signalled(monkeypatch, victim, owner):
    # On a shared machine another user can listen first and answer /health with this user's uid, checkout and
    # code, and any pid: to be sent the notebooks' prompts, or to have `./workshop stop` signal that pid.
    if owner == "another-user" and os.geteuid() != 0:
        pytest.skip("listening as another user needs root (the test drops to uid 65534, nobody)")
    port = free_port()
    monkeypatch.setenv("WORKSHOP_PORT", str(port))
    claim = {**server_answer(pid=victim.pid), "status": "ok", "user": control.current_user()}
    liar = lying_server(port, claim, NOBODY if owner == "another-user" else None)
    try:
        assert health(port) == claim
        started = []
        monkeypatch.setattr(control, "start_server", lambda port: started.append(port) or "started")
        if owner == "another-user":
            with pytest.raises(RuntimeError, match=f"another user.*uid {NOBODY}.*use another port.*WORKSHOP_PORT"):
                ensure_server()
        assert stop_server() is False
        assert victim.poll() is None, "stop signalled the pid a server named"
        os.kill(liar, 0)  # nor the liar itself: it is not a helpers.server this user started
        assert started == []
    finally:
        os.kill(liar, signal.SIGKILL)
        os.waitpid(liar, 0)
