"""The embedded model's OpenAI-compatible server: infrastructure, not a lesson.

The notebooks talk to it exactly as they would talk to NVIDIA NIM or vLLM: over HTTP, through
the official `openai` client. Start it with `python -m helpers.server --port 8765`, or from
Python with `helpers.server.control.ensure_server()` (what `helpers.runtime.backends.connect()` does).

| module         | holds                                                                       |
|----------------|-----------------------------------------------------------------------------|
| `app`          | the HTTP layer: routes, limits, the queue's answers (429), streaming        |
| `protocol`     | the request and response bodies as Pydantic models, and `RequestError`       |
| `engine`       | the model: prompt, decoding under the grammar's mask, cancellation          |
| `request_queue`| the bounded first-in, first-out line of requests waiting for the one model  |
| `guidance`     | a request's constraint as an llguidance grammar, or a 400 naming the problem |
| `sampling`     | temperature, top-p and the seeded draw                                      |
| `stop_strings` | cutting the reply at a stop string, also across tokens                      |
| `control`      | start, find again and stop a server from Python or the shell                |
| `bench`        | `python -m helpers.server.bench`: guided vs unguided, and a flood of clients |

This file holds the facts both sides need (the model id, the address, the server's name), so
that importing them never loads the model.
"""
from __future__ import annotations

import os
from pathlib import Path

MODEL_ID = "smollm2-135m-instruct"
HOST = "127.0.0.1"
SERVER_NAME = "helpers.server"
CHECKOUT = str(Path(__file__).resolve().parents[2])


class MissingDependency(RuntimeError):
    """The embedded model cannot run because a package is not installed."""


def code_version() -> str:
    """A fingerprint of the server's code, so a client can tell a server left running from older code."""
    import hashlib

    here = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted([*here.glob("*.py"), here.parent / "runtime" / "dialects.py"]):
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
