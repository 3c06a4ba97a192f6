import numpy as np
import pytest

from helpers.server.sampling import (
    Penalties,
    allowed_tokens,
    apply_mask,
    can_check_after_drawing,
    mask_allows,
    only_allowed,
    probabilities,
    sample,
    sample_then_check,
    top_candidates,
)


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


def packed(allowed: list[int], vocab_size: int = 96) -> np.ndarray:
    bits = np.zeros(vocab_size, dtype=bool)
    bits[allowed] = True
    return np.packbits(bits, bitorder="little").view(np.int32).copy()


@pytest.mark.parametrize("token", [0, 31, 32, 63, 95])
def test_a_mask_allowing_one_token_names_it(token):
    assert only_allowed(packed([token])) == token


@pytest.mark.parametrize("allowed", [[], [3, 4], [3, 40], [31, 95]])
def test_a_mask_allowing_none_or_several_names_no_token(allowed):
    assert only_allowed(packed(allowed)) is None


@pytest.mark.parametrize("seed", range(5))
def test_one_bit_read_agrees_with_the_unpacked_mask(seed):
    allowed = sorted(np.random.default_rng(seed).choice(96, size=9, replace=False).tolist()) + [31, 63, 95]
    bitmask = packed(allowed)
    assert [token for token in range(96) if mask_allows(bitmask, token)] == sorted(set(allowed))


def test_apply_mask_leaves_allowed_logits_alone_and_forbids_the_rest():
    logits = np.arange(96, dtype=np.float32)
    apply_mask(logits, packed([2, 33, 90]))
    assert list(np.flatnonzero(np.isfinite(logits))) == [2, 33, 90]
    assert logits[[2, 33, 90]].tolist() == [2.0, 33.0, 90.0] and np.all(logits[np.isinf(logits)] < 0)


def test_no_penalty_changes_nothing():
    penalties = Penalties(prompt_tokens=[1, 2])
    logits = np.array([1.0, -1.0, 4.0], dtype=np.float32)
    penalties.record(2)
    penalties.apply(logits)
    assert not penalties.active and logits.tolist() == [1.0, -1.0, 4.0]


def test_frequency_counts_each_occurrence_and_presence_counts_once():
    penalties = Penalties(frequency=0.5, presence=0.25)
    for token in (1, 1, 1, 2):
        penalties.record(token)
    logits = np.zeros(4, dtype=np.float32)
    penalties.apply(logits)
    assert logits.tolist() == [0.0, -1.75, -0.75, 0.0]


def test_a_negative_presence_penalty_encourages_repeats():
    penalties = Penalties(presence=-1.0)
    penalties.record(0)
    logits = np.zeros(2, dtype=np.float32)
    penalties.apply(logits)
    assert logits.tolist() == [1.0, 0.0]


def test_repetition_scales_toward_less_likely_for_prompt_and_reply_tokens_alike():
    penalties = Penalties(repetition=2.0, prompt_tokens=[0, 1])
    penalties.record(2)
    logits = np.array([4.0, -4.0, 4.0, 4.0], dtype=np.float32)
    penalties.apply(logits)
    assert logits.tolist() == [2.0, -8.0, 2.0, 4.0]


def test_repetition_comes_before_frequency_as_in_vllm():
    penalties = Penalties(frequency=1.0, repetition=2.0)
    penalties.record(0)
    logits = np.array([4.0], dtype=np.float32)
    penalties.apply(logits)
    assert logits.tolist() == [1.0]  # 4 / 2 - 1, not (4 - 1) / 2


def masked_copy(logits: np.ndarray, allowed: list[int]) -> np.ndarray:
    masked = np.full_like(logits, -np.inf)
    masked[allowed] = logits[allowed]
    return masked


def checked_draw(logits, allowed, temperature, rng, restricted):
    def restrict(values):
        restricted.append(True)
        values[:] = masked_copy(values, allowed)

    return sample_then_check(logits.copy(), temperature, 1.0, rng, lambda token: token in allowed, restrict)


def test_a_draw_the_grammar_allows_stands_without_a_mask():
    logits = np.array([0.0, 5.0, 1.0], dtype=np.float32)
    restricted = []
    assert checked_draw(logits, [1, 2], 0.0, np.random.default_rng(0), restricted) == 1 and not restricted


@pytest.mark.parametrize("seed", range(20))
def test_greedy_checked_after_drawing_is_greedy_over_the_allowed_tokens(seed):
    logits = np.random.default_rng(seed).normal(size=64).astype(np.float32)
    allowed = sorted(np.random.default_rng(seed + 100).choice(64, size=5, replace=False).tolist())
    expected = sample(masked_copy(logits, allowed), 0.0, 1.0, np.random.default_rng(0))
    assert checked_draw(logits, allowed, 0.0, np.random.default_rng(0), []) == expected


def test_sampling_checked_after_drawing_follows_the_masked_distribution():
    """p(a) + (1 - P) p(a) / P = p(a) / P: with P = 0.3 most first draws are refused, and the counts must still
    match the masked distribution (a chi-squared bound that a draw from the unmasked one fails by far)."""
    probs = np.array([0.5, 0.2, 0.1, 0.15, 0.05])
    logits, allowed = np.log(probs).astype(np.float32), [2, 3, 4]
    expected = probs[allowed] / probs[allowed].sum()
    rng, draws = np.random.default_rng(7), 30_000
    counts = np.bincount([checked_draw(logits, allowed, 1.0, rng, []) for _ in range(draws)], minlength=5)
    assert counts[[0, 1]].sum() == 0
    chi_squared = float((((counts[allowed] - draws * expected) ** 2) / (draws * expected)).sum())
    assert chi_squared < 13.8  # p = 0.001 with 2 degrees of freedom
    # The bound has power: had a refused draw fallen back to the likeliest allowed token instead of a redraw,
    # the counts would sit near [0.1, 0.85, 0.05] and the statistic would be in the thousands.
    fallback = probs[allowed] + (1 - probs[allowed].sum()) * np.array([0.0, 1.0, 0.0])
    assert float((((counts[allowed] - draws * fallback) ** 2) / (draws * fallback)).sum()) > 1000


@pytest.mark.parametrize("temperature, top_p, expected", [(0.0, 0.5, True), (0.7, 1.0, True), (0.7, 0.9, False)])
def test_a_nucleus_needs_the_whole_mask_first(temperature, top_p, expected):
    assert can_check_after_drawing(temperature, top_p) is expected
