"""Starting, finding again and stopping the server: through a private folder per user, checkout and port asked for.

The tests that need no model stand in for a server with a small process that does what the server does with its
folder (`claim`, then `announce`), or start the real server where it fails before loading the model (a taken
port). Those marked `integration` start the real one.
"""
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

from helpers.runtime import embedded as control
from helpers.runtime.embedded import CHECKOUT, MissingDependency, Running, ServerError, code_version
from helpers.runtime.embedded import ensure_server, find_server, health, server_folder, start_server, stop_server

ME = os.getuid()
NOBODY = 65534


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture()
def home(monkeypatch, tmp_path):
    """A temporary folder of this test's own, for this process and the processes it starts, and no setting that
    names a port, an owner or a wish to keep the server."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    for name in (control.PORT_VARIABLE, control.OWNER_PID_VARIABLE, control.KEEP_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


# What the server does with its folder, in a process that stands in for it: claim, announce, wait to be stopped.
STAND_IN = """
import sys, time
from helpers.runtime import embedded
if sys.argv[3] != "current":
    embedded.code_version = lambda: sys.argv[3]
folder = embedded.server_folder(int(sys.argv[1]) or None)
lock = embedded.claim(folder)
embedded.announce(folder, int(sys.argv[2]), "stand-in-key")
print("ready", flush=True)
time.sleep(120)
"""


@pytest.fixture()
def stand_in(home):
    """Start a stand-in server: `stand_in(slot=0, port=4321, code="current")`; each is killed at the end."""
    started = []

    def start(slot: int = 0, port: int = 4321, code: str = "current") -> subprocess.Popen:
        process = subprocess.Popen([sys.executable, "-c", STAND_IN, str(slot), str(port), code], cwd=CHECKOUT,
                                   stdout=subprocess.PIPE, text=True)
        started.append(process)
        assert process.stdout.readline() == "ready\n"
        return process

    yield start
    for process in started:
        process.kill()
        process.wait()


@pytest.fixture()
def starts(monkeypatch):
    """Record the servers ensure_server would start, instead of starting them."""
    calls = []
    monkeypatch.setattr(control, "_start", lambda folder, port, timeout, extra: calls.append((folder, port)) or "new")
    return calls


def test_a_running_server_of_current_code_is_found_with_its_port_and_key(stand_in, starts):
    process = stand_in(port=4321)
    found = ensure_server()
    assert (found.port, found.pid, found.key, found.url) == (4321, process.pid, "stand-in-key",
                                                             "http://127.0.0.1:4321/v1")
    assert starts == [] and "stand-in-key" not in repr(found) and "stand-in-key" not in str(found)


def test_nothing_running_starts_a_server_on_any_free_port(home, starts):
    assert ensure_server() == "new" and starts == [(server_folder(), None)]
    assert "--port" not in control.server_command(None)
    assert control.server_command(9100)[3:5] == ["--port", "9100"]


def test_a_server_running_older_code_is_stopped_then_started_again(stand_in, starts, capsys):
    process = stand_in(code="0ld")
    assert ensure_server() == "new" and len(starts) == 1
    assert process.wait(timeout=10) == -signal.SIGTERM
    assert "older code" in capsys.readouterr().err


def test_what_a_server_that_has_gone_left_behind_is_neither_used_nor_signalled(stand_in, starts, monkeypatch):
    process = stand_in()
    process.kill()  # no chance to withdraw: its port, pid and key stay in the folder
    process.wait()
    assert (server_folder() / control.ANNOUNCEMENT).exists() and find_server() is None
    signalled = []
    monkeypatch.setattr(control.os, "kill", lambda pid, sig: signalled.append(pid))
    assert stop_server() is False and signalled == []
    assert ensure_server() == "new"


def test_stop_signals_the_process_holding_the_folder_and_nothing_else(stand_in):
    process = stand_in()
    assert stop_server() is True
    assert process.wait(timeout=10) == -signal.SIGTERM
    assert stop_server() is False
    assert control.main(["stop"]) == 0


def test_stop_and_ensure_act_on_the_server_workshop_port_names(stand_in, monkeypatch, starts):
    default, named = stand_in(port=4321), stand_in(slot=9100, port=9100)
    monkeypatch.setenv(control.PORT_VARIABLE, "9100")
    assert ensure_server().pid == named.pid
    assert stop_server() is True and named.wait(timeout=10) == -signal.SIGTERM
    assert default.poll() is None
    monkeypatch.delenv(control.PORT_VARIABLE)
    assert ensure_server().pid == default.pid


def test_each_checkout_and_each_port_asked_for_has_a_folder_of_its_own(home, monkeypatch):
    here, named = server_folder(), server_folder(9100)
    monkeypatch.setenv(control.PORT_VARIABLE, "9100")
    assert server_folder() == named != here
    monkeypatch.delenv(control.PORT_VARIABLE)
    monkeypatch.setattr(control, "CHECKOUT", "/another/clone")
    assert server_folder() not in (here, named)
    assert {here.parent, named.parent, server_folder().parent} == {control.user_folder()}


def test_the_folders_and_the_key_are_this_users_alone(stand_in):
    stand_in()
    folder = server_folder()
    assert (folder.parent.stat().st_mode & 0o777) == 0o700 and (folder.stat().st_mode & 0o777) == 0o700
    assert ((folder / control.KEY).stat().st_mode & 0o777) == 0o600
    assert (folder / control.KEY).read_text() == "stand-in-key"
    assert "stand-in-key" not in (folder / control.ANNOUNCEMENT).read_text()


def test_a_planted_folder_or_link_is_refused(home):
    folder = server_folder()
    victim = home / "victim"
    victim.write_text("precious")
    (folder / control.LOG).symlink_to(victim)
    with pytest.raises(OSError):
        control.open_private(folder / control.LOG)
    assert victim.read_text() == "precious"
    (folder / control.LOG).unlink()
    for name in os.listdir(folder):
        (folder / name).unlink()
    folder.rmdir()
    elsewhere = home / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    folder.symlink_to(elsewhere)  # a link planted where the folder goes
    with pytest.raises(PermissionError, match="not a private folder"):
        server_folder()
    folder.unlink()
    folder.mkdir(mode=0o755)
    folder.chmod(0o777)  # a folder others may write into
    with pytest.raises(PermissionError, match="not a private folder"):
        server_folder()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_another_users_folder_is_never_read(home):
    planted = control.user_folder()
    os.chown(planted, NOBODY, NOBODY)  # as if another user had made it first
    with pytest.raises(PermissionError, match="not a private folder"):
        find_server()
    with pytest.raises(PermissionError, match="not a private folder"):
        stop_server()


@pytest.mark.parametrize("value", ["abc", "0", "70000", "-1", "8765x"])
def test_a_workshop_port_that_is_not_a_port_is_one_line_that_says_what_to_do(home, monkeypatch, value):
    monkeypatch.setenv(control.PORT_VARIABLE, value)
    with pytest.raises(ServerError, match=rf"WORKSHOP_PORT='{re.escape(value)}' \(from the environment\) is not a port: "
                                          "unset it .* or set it to the"):
        ensure_server()


def test_the_command_line_says_a_wrong_setting_in_one_line(home, monkeypatch, capsys):
    monkeypatch.setenv(control.PORT_VARIABLE, "abc")
    assert control.main(["stop"]) == control.SETTING_EXIT
    error = capsys.readouterr().err
    assert error.startswith("error: WORKSHOP_PORT='abc' (from the environment) is not a port") and error.count("\n") == 1


def junk_health(port: int) -> http.server.HTTPServer:
    class Junk(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"<html>not yours</html>")

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", port), Junk)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.mark.parametrize("listener", ["plain-socket", "junk-health"])
def test_a_workshop_port_another_program_holds_is_named_with_the_way_out(home, monkeypatch, listener):
    """The real server starts, cannot bind, and says so before it loads the model; the client passes it on."""
    if listener == "plain-socket":
        other = socket.socket()
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
    else:
        other = junk_health(free_port())
        port = other.server_address[1]
    monkeypatch.setenv(control.PORT_VARIABLE, str(port))
    try:
        with pytest.raises(ServerError) as caught:
            ensure_server()
    finally:
        other.server_close() if listener == "junk-health" else other.close()
    assert str(caught.value) == (f"port {port} is held by another program: unset WORKSHOP_PORT "
                                 "to let the server take any free port, or set it to a free one")


def test_a_script_gives_its_server_its_own_life_unless_asked_to_keep_it(home, monkeypatch):
    assert control.owner_pid() == os.getpid()  # the pre-class check, the probe, a script: nothing left behind
    monkeypatch.setenv(control.KEEP_VARIABLE, "1")
    assert control.owner_pid() is None and "--exit-with" not in control.server_command(None)
    monkeypatch.setenv(control.KEEP_VARIABLE, "yes please")
    with pytest.raises(ServerError, match=r"WORKSHOP_KEEP_SERVER='yes please' \(from the environment\): set it to 1"):
        control.owner_pid()


def test_a_kernel_shares_its_server_with_the_jupyter_that_runs_it_and_the_labs_own_comes_first(home, monkeypatch):
    monkeypatch.setattr(control, "in_kernel", lambda: True)
    assert control.server_command(None)[-2:] == ["--exit-with", str(os.getppid())]
    monkeypatch.setenv(control.OWNER_PID_VARIABLE, "4242")
    assert control.server_command(None)[-2:] == ["--exit-with", "4242"]
    monkeypatch.setattr(control, "in_kernel", lambda: False)
    assert control.server_command(None)[-2:] == ["--exit-with", "4242"]  # a script in the lab's terminal


def test_in_kernel_asks_ipython_for_a_kernel(monkeypatch):
    import types

    shell = types.SimpleNamespace(kernel=None)
    monkeypatch.setitem(sys.modules, "IPython", types.SimpleNamespace(get_ipython=lambda: shell))
    assert not control.in_kernel()  # IPython in a terminal: no kernel
    shell.kernel = object()
    assert control.in_kernel()


def test_status_names_each_server_of_this_user_and_where_its_key_is_never_the_key(stand_in, monkeypatch):
    stand_in(port=4321)
    assert control.status() == [f"http://127.0.0.1:4321/v1: pid {find_server().pid} (this checkout), ? waiting of ?; "
                                f"its key and log are in {server_folder()}"]
    monkeypatch.setattr(control, "code_version", lambda: "newer")
    assert "(this checkout, older code)" in control.status()[0]
    assert "stand-in-key" not in "".join(control.status())


def test_status_says_when_nothing_runs_and_stop_makes_no_folder(home):
    (control.user_folder() / "server-8765.log").write_text("an older workshop's log")
    assert control.status() == ["no embedded server of yours is running"]
    assert stop_server() is False and find_server() is None
    assert [path.name for path in control.user_folder().iterdir()] == ["server-8765.log"]


def test_missing_packages_name_the_workshops_own_python_or_the_setup_cell(home, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # as if it were not installed
    with pytest.raises(MissingDependency, match=r"needs the package llama-cpp-python.*\./workshop run .*"
                                                r"\.venv/bin/python -m"):
        start_server(free_port())
    monkeypatch.setattr(control, "in_kernel", lambda: True)
    with pytest.raises(MissingDependency, match=r"llama-cpp-python: run the notebook's first cell"):
        start_server(free_port())


def test_the_server_run_by_a_python_without_the_packages_says_which_python_to_use(home):
    # -S: no site-packages, as the system's python3 without the workshop's packages; helpers is found in the folder
    run = subprocess.run([sys.executable, "-S", "-m", "helpers.server"], cwd=CHECKOUT, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == control.SETTING_EXIT and "Traceback" not in run.stderr
    assert run.stderr.count("\n") == 1 and "helpers.server needs the package llama-cpp-python" in run.stderr
    assert "./workshop run helpers.server" in run.stderr and ".venv/bin/python -m helpers.server" in run.stderr
    assert "pip install" not in run.stderr


# --- the real server ------------------------------------------------------------------------------------------------

@pytest.mark.integration
def test_a_later_caller_reuses_the_running_server(server):
    assert ensure_server() == server and health(server)["pid"] == server.pid


@pytest.mark.integration
def test_a_server_binds_any_free_port_says_where_in_its_folder_and_asks_for_its_key(home):
    started = start_server()
    try:
        folder = server_folder()
        said = json.loads((folder / control.ANNOUNCEMENT).read_text())
        assert (said["port"], said["pid"], said["code"]) == (started.port, started.pid, code_version())
        assert find_server() == started and health(started)["status"] == "ok"
        assert ((folder / control.KEY).stat().st_mode & 0o777) == 0o600
        assert health(Running(folder, started.port, started.pid, started.code, CHECKOUT, "a-guess")) is None
        assert started.key not in (folder / control.LOG).read_text()
        with pytest.raises(ServerError, match="another embedded server already runs"):
            start_server()
    finally:
        assert stop_server() is True
    assert find_server() is None and not (folder / control.KEY).exists()
    assert health(started) is None and stop_server() is False


@pytest.mark.integration
def test_a_real_server_with_older_code_is_replaced(home, monkeypatch):
    old = start_server()
    monkeypatch.setattr(control, "code_version", lambda: "newer-code")
    try:
        assert ensure_server().pid != old.pid
    finally:
        stop_server()


def gone(within: float = 15) -> bool:
    """Whether the server of this test's folder ends within `within` seconds."""
    deadline = time.monotonic() + within
    while control.holder(server_folder()) is not None and time.monotonic() < deadline:
        time.sleep(0.2)
    return control.holder(server_folder()) is None


SCRIPT = "from helpers.runtime.embedded import ensure_server; print(ensure_server().pid)"


@pytest.mark.integration
@pytest.mark.parametrize("keep", [False, True], ids=["script", "kept"])
def test_a_scripts_server_leaves_with_it_unless_asked_to_stay(home, monkeypatch, keep):
    """The pre-class check and the probe are such scripts: their server leaves with them, or stays when asked."""
    if keep:
        monkeypatch.setenv(control.KEEP_VARIABLE, "1")
    pid = int(subprocess.run([sys.executable, "-c", SCRIPT], cwd=CHECKOUT, capture_output=True, text=True,
                             check=True, timeout=120).stdout)
    try:
        if keep:
            time.sleep(2 * 2.0)  # twice the server's check of its owner
            assert control.holder(server_folder()) == pid, "the server did not stay as WORKSHOP_KEEP_SERVER asked"
            assert health(find_server()) is not None
        else:
            assert gone(), "the server outlived the script that started it"
    finally:
        stop_server()


@pytest.mark.integration
def test_the_server_leaves_with_the_lab_that_started_it(home, monkeypatch):
    lab = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setenv(control.OWNER_PID_VARIABLE, str(lab.pid))
    start_server()
    try:
        lab.kill()
        lab.wait()
        assert gone(), "the server outlived the process it was started for"
    finally:
        stop_server()


# A kernel's code: it believes it runs in Jupyter (as IPython says in a real kernel), starts the server, and ends.
KERNEL = """
import sys, types
shell = types.SimpleNamespace(kernel=object())
sys.modules["IPython"] = types.SimpleNamespace(get_ipython=lambda: shell)
from helpers.runtime.embedded import start_server
start_server()
"""


@pytest.mark.integration
def test_a_jupyter_started_by_hand_takes_its_server_with_it(home):
    """No `./workshop lab`, so no owner variable: the server a kernel starts stays while the Jupyter that ran the
    kernel lives (the kernel's end does not stop it: another notebook may use it), and leaves when that Jupyter
    stops."""
    jupyter = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time\n"
                                f"subprocess.run([sys.executable, '-c', {KERNEL!r}], check=True)\n"
                                "time.sleep(120)"], cwd=CHECKOUT)
    try:
        deadline = time.monotonic() + 60
        while find_server() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        server = find_server()
        assert server is not None, "the kernel did not start its server"
        time.sleep(1.5)
        assert health(server) is not None and jupyter.poll() is None
        jupyter.kill()
        jupyter.wait()
        assert gone(), "the server outlived the Jupyter its kernel ran in"
    finally:
        jupyter.kill()
        stop_server()
