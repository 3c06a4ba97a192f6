import numpy as np

from helpers.server.sampling import allowed_tokens, probabilities, sample, top_candidates


def test_temperature_zero_is_greedy():
    assert sample(np.array([0.1, 3.0, 2.9], dtype=np.float32), 0.0, 1.0, np.random.default_rng(0)) == 1


def test_same_seed_same_draws():
    logits = np.random.default_rng(1).normal(size=500).astype(np.float32)
    draws = [[sample(logits, 1.0, 0.9, rng) for _ in range(20)] for rng in
             (np.random.default_rng(5), np.random.default_rng(5))]
    assert draws[0] == draws[1]


def test_top_p_keeps_only_the_nucleus():
    logits = np.log(np.array([0.6, 0.3, 0.05, 0.05], dtype=np.float32))
    rng = np.random.default_rng(0)
    assert {sample(logits, 1.0, 0.5, rng) for _ in range(200)} == {0}
    assert {sample(logits, 1.0, 0.8, rng) for _ in range(200)} == {0, 1}


def test_masked_tokens_are_never_drawn():
    logits = np.zeros(10, dtype=np.float32)
    logits[[0, 1, 2]] = -np.inf
    rng = np.random.default_rng(0)
    assert not {sample(logits, 1.5, 1.0, rng) for _ in range(300)} & {0, 1, 2}


def test_bitmask_unpacks_little_endian_per_word():
    mask = np.array([0b101, -(1 << 31)], dtype=np.int32)
    assert list(np.flatnonzero(allowed_tokens(mask, 64))) == [0, 2, 63]
    assert list(np.flatnonzero(allowed_tokens(mask, 40))) == [0, 2]


def test_probabilities_and_top_candidates():
    logits = np.log(np.array([0.5, 0.25, 0.25], dtype=np.float32))
    assert np.allclose(probabilities(logits, 1.0), [0.5, 0.25, 0.25])
    assert top_candidates(logits, 1) == [(0, top_candidates(logits, 1)[0][1])]
    assert abs(top_candidates(logits, 1)[0][1] - 0.5) < 1e-6
