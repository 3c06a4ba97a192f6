"""How long a notebook's long measurements run: in full, unless WORKSHOP_QUICK asks for short runs.

A class in a hurry sets WORKSHOP_QUICK=1 (in the shell, a `.env` file or Colab's Secrets panel) and the going-further
measurements run fewer cases; so does the test suite, in every pass over the notebooks (the same code, fewer cases).
A notebook is committed executed in full (CONTRIBUTING says how).
"""
from __future__ import annotations

from typing import TypeVar

from helpers.runtime.settings import setting

T = TypeVar("T")
QUICK = "WORKSHOP_QUICK"
YES = ("1", "yes", "true")


def quick() -> bool:
    """Whether the environment asks for short runs."""
    return (setting(QUICK) or "").lower() in YES


def sized(full: T, quick_run: T) -> T:
    """`full` for a full run, `quick_run` when WORKSHOP_QUICK is set."""
    return quick_run if quick() else full
