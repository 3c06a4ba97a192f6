"""Pick the next token from logits: penalties, an optional grammar mask, temperature, nucleus (top-p), a seeded generator.

Sampling is done here in numpy rather than inside llama.cpp so that the mask, the
candidates before and after it, and the seed are all visible and reproducible.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

NUCLEUS_POOL = 256  # top-p only ever needs the head of the distribution


def allowed_tokens(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """llguidance's packed int32 bitmask as one bool per vocabulary token (a view of unpacked bytes, not a copy)."""
    return np.unpackbits(bitmask.view(np.uint8), count=vocab_size, bitorder="little").view(bool)


def only_allowed(bitmask: np.ndarray) -> int | None:
    """The token when the mask allows exactly one, else None; reads the packed words, never all of the vocabulary."""
    words = np.flatnonzero(bitmask)
    if words.size != 1:
        return None
    word = int(bitmask[words[0]]) & 0xFFFFFFFF
    if word & (word - 1):
        return None
    return int(words[0]) * 32 + word.bit_length() - 1


def mask_allows(bitmask: np.ndarray, token: int) -> bool:
    """Whether the packed bitmask allows `token`: one bit, read without unpacking the others."""
    return bool((int(bitmask[token >> 5]) >> (token & 31)) & 1)


def apply_mask(logits: np.ndarray, bitmask: np.ndarray) -> None:
    """Set every token the mask forbids to -inf, in place."""
    np.copyto(logits, -np.inf, where=~allowed_tokens(bitmask, logits.size))


@dataclass
class Penalties:
    """vLLM's order and meaning: repetition divides a positive logit (multiplies a negative one) of every token
    seen in the prompt or the reply; then frequency subtracts per occurrence in the reply and presence once per
    token the reply holds (OpenAI's definition)."""

    frequency: float = 0.0
    presence: float = 0.0
    repetition: float = 1.0
    prompt_tokens: list[int] = field(default_factory=list)
    _counts: dict[int, int] = field(default_factory=dict, init=False)
    _seen: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self._seen = np.unique(np.asarray(self.prompt_tokens, dtype=np.intp)) if self.repetition != 1.0 \
            else np.empty(0, dtype=np.intp)

    @property
    def active(self) -> bool:
        return self.frequency != 0.0 or self.presence != 0.0 or self.repetition != 1.0

    def record(self, token: int) -> None:
        """One more token in the reply."""
        if token not in self._counts and self.repetition != 1.0:
            self._seen = np.union1d(self._seen, [token])
        self._counts[token] = self._counts.get(token, 0) + 1

    def apply(self, logits: np.ndarray) -> None:
        """Adjust `logits` in place, touching only the tokens seen so far."""
        if self._seen.size:
            seen = logits[self._seen]
            logits[self._seen] = np.where(seen > 0, seen / self.repetition, seen * self.repetition)
        if self._counts and (self.frequency or self.presence):
            tokens = np.fromiter(self._counts, dtype=np.intp, count=len(self._counts))
            counts = np.fromiter(self._counts.values(), dtype=np.float32, count=len(self._counts))
            logits[tokens] -= counts * self.frequency + self.presence


def probabilities(logits: np.ndarray, temperature: float) -> np.ndarray:
    scaled = logits / max(temperature, 1e-6)
    scaled = scaled - scaled.max()
    weights = np.exp(scaled)
    return weights / weights.sum()


def sample(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator) -> int:
    """Greedy at temperature 0; otherwise a draw from the top-p nucleus, reproducible through `rng`."""
    if temperature == 0.0:
        return int(np.argmax(logits))
    probs = probabilities(logits, temperature)
    if top_p < 1.0:
        pool = min(NUCLEUS_POOL, probs.size)
        head = np.argpartition(probs, -pool)[-pool:]
        head = head[np.argsort(probs[head])[::-1]]
        keep = int(np.searchsorted(np.cumsum(probs[head]), top_p)) + 1
        candidates, weights = head[:keep], probs[head[:keep]]
    else:
        candidates, weights = None, probs
    cumulative = np.cumsum(weights)
    index = int(np.searchsorted(cumulative, rng.random() * cumulative[-1], side="right"))
    index = min(index, cumulative.size - 1)
    return int(candidates[index]) if candidates is not None else index


def can_check_after_drawing(temperature: float, top_p: float) -> bool:
    """Whether `sample_then_check` draws from exactly the masked distribution for these settings.

    A nucleus is cut from the distribution it is drawn from, and the masked one has a different nucleus
    than the unmasked one; without a nucleus (or at temperature 0) there is nothing to cut.
    """
    return temperature == 0.0 or top_p >= 1.0


def sample_then_check(logits: np.ndarray, temperature: float, top_p: float, rng: np.random.Generator,
                      allows: Callable[[int], bool], restrict: Callable[[np.ndarray], None]) -> int:
    """Draw from `logits` as they are; keep the draw if `allows` it, else `restrict` them (mask in place) and redraw.

    Checking one token costs a few microseconds, computing a whole mask a hundred or more, and the first
    draw usually stands. The result follows the masked distribution exactly (when
    `can_check_after_drawing`): greedy, the most likely token is the most likely allowed one whenever
    it is allowed; sampled, an allowed token `a` comes out with probability
    p(a) + (1 - P) * p(a) / P = p(a) / P, where P is the allowed tokens' share, which is what drawing
    from the masked logits gives.
    """
    token = sample(logits, temperature, top_p, rng)
    if allows(token):
        return token
    restrict(logits)
    return sample(logits, temperature, top_p, rng)


def top_candidates(logits: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
    """The k most likely tokens at temperature 1, as (token id, probability)."""
    probs = probabilities(logits, 1.0)
    head = np.argpartition(probs, -k)[-k:]
    head = head[np.argsort(probs[head])[::-1]]
    return [(int(t), float(probs[t])) for t in head]
