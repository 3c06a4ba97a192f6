"""Cut generated text at the first stop string, also when the stop string arrives split across tokens.

Text that may be the beginning of a stop string is held back until the next piece decides. Each
stop string is followed by a Knuth-Morris-Pratt automaton, so each character produced costs a
constant amount of work per stop string, whatever the stop string's length: the server scans
inside the model's turn, where a scan that grew with the held-back text would stall every client.
"""
from __future__ import annotations


class _Follower:
    """How much of one stop string the text produced so far ends with."""

    def __init__(self, stop: str):
        self.stop = stop
        self.matched = 0
        # fallback[i]: the longest proper border of stop[:i + 1], where a failed match resumes.
        self.fallback = [0] * len(stop)
        border = 0
        for i in range(1, len(stop)):
            while border and stop[i] != stop[border]:
                border = self.fallback[border - 1]
            if stop[i] == stop[border]:
                border += 1
            self.fallback[i] = border

    def end_in(self, piece: str) -> int | None:
        """Read `piece`; the index in it just past the stop string's first occurrence, or None."""
        for index, char in enumerate(piece):
            while self.matched and char != self.stop[self.matched]:
                self.matched = self.fallback[self.matched - 1]
            if char == self.stop[self.matched]:
                self.matched += 1
            if self.matched == len(self.stop):
                return index + 1
        return None


class StopScanner:
    """Feed text pieces in; get back only the text that can safely be shown."""

    def __init__(self, stops: list[str] | tuple[str, ...]):
        self.followers = [_Follower(stop) for stop in stops]
        self.shown: list[str] = []
        self.held = ""  # produced, not yet shown: it may be the beginning of a stop string
        self.stopped = False

    @property
    def text(self) -> str:
        """Everything produced, cut before the stop string when one was found."""
        return "".join(self.shown) + self.held

    def feed(self, piece: str) -> str:
        if self.stopped:
            return ""
        window = self.held + piece
        cut = min((len(self.held) + end - len(f.stop) for f in self.followers
                   if (end := f.end_in(piece)) is not None), default=None)
        if cut is not None:
            self.stopped = True
            self.held = ""
            return self._show(window[:cut])
        # Every possible start of a stop string lies in the held part, so the held part is never longer than
        # the longest stop string.
        held = max((f.matched for f in self.followers), default=0)
        self.held = window[len(window) - held:] if held else ""
        return self._show(window[:len(window) - held])

    def flush(self) -> str:
        out, self.held = self.held, ""
        for follower in self.followers:
            follower.matched = 0
        return self._show(out)

    def _show(self, out: str) -> str:
        self.shown.append(out)
        return out
