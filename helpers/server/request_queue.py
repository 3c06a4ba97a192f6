"""The line of requests waiting for the one model: first in, first out, and bounded.

One model with one KV cache decodes one request at a time. Requests that arrive meanwhile
wait here in arrival order. When the line is full, a newcomer is told so at once
(`QueueFull`, answered as 429 with `Retry-After`) instead of waiting until its client gives up.
A waiting request whose client has gone, or whose deadline has passed, leaves the line.
"""
from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

DEFAULT_LIMIT = 32
POLL_SECONDS = 0.25
MAX_RETRY_AFTER_S = 60


class QueueFull(Exception):
    def __init__(self, waiting: int, retry_after: int):
        super().__init__(f"{waiting} requests are already waiting for the model")
        self.waiting, self.retry_after = waiting, retry_after


class LeftTheLine(Exception):
    """A waiting request stopped waiting: its client went away, or its deadline passed."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


class RequestQueue:
    def __init__(self, limit: int = DEFAULT_LIMIT):
        if limit < 0:
            raise ValueError("the queue limit cannot be negative")
        self.limit = limit
        self._line: deque[object] = deque()
        self._busy = False
        self._changed = threading.Condition()
        self._mean_seconds = 1.0  # a first guess for Retry-After, replaced by measured turns

    @property
    def waiting(self) -> int:
        return len(self._line)

    @property
    def busy(self) -> bool:
        return self._busy

    def retry_after(self) -> int:
        """Seconds until the line has probably moved enough for one more request."""
        return max(1, min(MAX_RETRY_AFTER_S, math.ceil(self._mean_seconds * (self.waiting + 1))))

    def check_room(self) -> None:
        """Raise `QueueFull` now when a new request would have to wait in a full line."""
        with self._changed:
            self._check_room()

    def _check_room(self) -> None:
        if (self._busy or self._line) and len(self._line) >= self.limit:
            raise QueueFull(len(self._line), self.retry_after())

    @contextmanager
    def turn(self, should_leave: Callable[[], str | None] = lambda: None) -> Iterator[None]:
        """Wait in line, then hold the model for the body of the `with`; `should_leave` says why to give up."""
        ticket = object()
        with self._changed:
            self._check_room()
            self._line.append(ticket)
            try:
                while self._busy or self._line[0] is not ticket:
                    self._changed.wait(POLL_SECONDS)
                    if reason := should_leave():
                        raise LeftTheLine(reason)
            except BaseException:
                self._line.remove(ticket)
                self._changed.notify_all()
                raise
            self._line.popleft()
            self._busy = True
        started = time.monotonic()
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._mean_seconds = 0.8 * self._mean_seconds + 0.2 * (time.monotonic() - started)
                self._changed.notify_all()
