"""Where the workshop reads a setting: the environment, then the `.env` file at the checkout's root, then Colab's
Secrets panel; and the errors that say which setting to change.

A setting the reader typed and the workshop cannot use is a `SettingError` that names it, where it was read and what
to set instead (`as_set`); keys are read here too, and never shown.
"""
from __future__ import annotations

import os
import sys


class ShortTraceback:
    """An error whose message says everything: IPython shows the message, not a traceback through library code."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: {self}"]


class BackendError(ShortTraceback, RuntimeError):
    """The backend cannot be used as configured; the message says what to change."""


class SettingError(BackendError, ValueError):
    """A setting the reader typed has a value the workshop cannot use; the message names it, where it was read,
    and what to set instead."""


def _dotenv(name: str) -> str | None:
    """A setting from the `.env` file at the checkout's root, and nowhere else: looked up through the parent folders,
    a checkout under /tmp would read a `.env` any user can plant there, and send prompts and keys where it says."""
    try:
        from dotenv import dotenv_values
    except ImportError:
        return None
    from helpers.runtime.paths import ROOT

    path = ROOT / ".env"
    return dotenv_values(path).get(name) if path.is_file() else None


def _colab_secret(name: str) -> str | None:
    if "google.colab" not in sys.modules:
        return None
    try:
        from google.colab import userdata
        return userdata.get(name)
    except Exception:  # secret absent or access not granted: both simply mean "not set"
        return None


def setting_with_origin(name: str) -> tuple[str, str] | None:
    """A setting's value and where it was read: the environment, the `.env` file (its path) or Colab's secrets."""
    from helpers.runtime.paths import ROOT

    for where, source in (("the environment", os.environ.get), (str(ROOT / ".env"), _dotenv),
                          ("Colab's Secrets panel", _colab_secret)):
        value = source(name)
        if value:
            return value.strip(), where
    return None


def setting(name: str) -> str | None:
    """A setting or secret from the environment, else a `.env` file, else Colab's secrets panel."""
    found = setting_with_origin(name)
    return found[0] if found else None


def as_set(name: str) -> str:
    """A setting as an error message shows it, with where it was read, so that the reader knows what to change.
    Never for a key."""
    value, where = setting_with_origin(name) or ("", "nowhere")
    return f"{name}={value!r} (from {where})"
