"""Pick the next token from logits: temperature, nucleus (top-p), an optional grammar mask, a seeded generator.

Sampling is done here in numpy rather than inside llama.cpp so that the mask, the
candidates before and after it, and the seed are all visible and reproducible.
"""
from __future__ import annotations

import numpy as np

NUCLEUS_POOL = 256  # top-p only ever needs the head of the distribution


def allowed_tokens(bitmask: np.ndarray, vocab_size: int) -> np.ndarray:
    """llguidance's packed int32 bitmask as one bool per vocabulary token."""
    bits = np.unpackbits(bitmask.view(np.uint8), bitorder="little")
    return bits[:vocab_size].astype(bool)


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


def top_candidates(logits: np.ndarray, k: int = 5) -> list[tuple[int, float]]:
    """The k most likely tokens at temperature 1, as (token id, probability)."""
    probs = probabilities(logits, 1.0)
    head = np.argpartition(probs, -k)[-k:]
    head = head[np.argsort(probs[head])[::-1]]
    return [(int(t), float(probs[t])) for t in head]
