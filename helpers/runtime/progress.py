"""Progress as plain lines of text, not a widget: a notebook read on GitHub shows how far a run got and how long it took.

A tqdm widget saved in a notebook shows a bar frozen at 0 % wherever the widget state is not rendered
(GitHub, nbviewer) and adds its state to the file; a printed line reads the same everywhere.

    for question in progress(QUESTIONS, desc="questions"):
        ...

It takes tqdm's first arguments (`iterable`, `desc`, `total`), so it fits wherever a `progress=` callable
like tqdm is expected, e.g. `helpers.compare.run_grid(..., progress=progress)`.
"""
from __future__ import annotations

import math
import re
import sys
import time
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

T = TypeVar("T")
LINES = 10  # about one line per tenth of the way: enough to see it move, few enough to read
UNSIZED_EVERY = 10  # without a total there are no tenths; a line every this many items
# The lines this module prints, as `said_by_progress` recognises them (slides leave them out: they are about waiting).
PROGRESS_LINE = re.compile(r"^(?:.*: )?\d+(?:/\d+)?(?:, \d+\.\d s| done in \d+\.\d s)$|^waiting for .* \.\.\.$")


def progress(iterable: Iterable[T], desc: str = "", total: int | None = None, every: int | None = None,
             file: TextIO | None = None) -> Iterator[T]:
    """Yield each item; print a line about every tenth of the way (or every `every` items), then the count and time."""
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)
    every = every or (max(1, math.ceil(total / LINES)) if total else UNSIZED_EVERY)
    label = f"{desc}: " if desc else ""
    of_total = f"/{total}" if total is not None else ""
    started = time.perf_counter()
    done = 0
    for item in iterable:
        yield item
        done += 1
        if done % every == 0 and done != total:
            print(f"{label}{done}{of_total}, {time.perf_counter() - started:.1f} s", file=file or sys.stdout,
                  flush=True)
    print(f"{label}{done}{of_total} done in {time.perf_counter() - started:.1f} s", file=file or sys.stdout,
          flush=True)


def waiting(what: str, file: TextIO | None = None) -> None:
    """Say, before a call that keeps the room waiting, what it waits for: a silent cell reads as a stuck one."""
    print(f"waiting for {what} ...", file=file or sys.stdout, flush=True)


def said_by_progress(line: str) -> bool:
    """Whether `line` is one of this module's lines: how far a run got, or what it waits for."""
    return bool(PROGRESS_LINE.match(line))
