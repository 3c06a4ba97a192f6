"""Cut generated text at the first stop string, also when the stop string arrives split across tokens."""
from __future__ import annotations


class StopScanner:
    """Feed text pieces in; get back only the text that can safely be shown."""

    def __init__(self, stops: list[str]):
        self.stops = stops
        self.text = ""
        self.shown = 0
        self.stopped = False

    def feed(self, piece: str) -> str:
        self.text += piece
        hits = [pos for pos in (self.text.find(s, max(0, self.shown - len(s))) for s in self.stops) if pos >= 0]
        if hits:
            self.text = self.text[:min(hits)]
            self.stopped = True
            return self.flush()
        held = max((k for s in self.stops for k in range(1, len(s)) if self.text.endswith(s[:k])), default=0)
        visible_end = len(self.text) - held
        out = self.text[self.shown:visible_end]
        self.shown = max(self.shown, visible_end)
        return out

    def flush(self) -> str:
        out = self.text[self.shown:]
        self.shown = len(self.text)
        return out
