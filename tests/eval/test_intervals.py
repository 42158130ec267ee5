"""The bootstrap intervals of `proactive_eval.intervals` against a plain-numpy percentile bootstrap loop and hand
cases (docs/spec.md §15)."""

import numpy as np
import pytest

from proactive_eval.intervals import paired_interval, stratified_interval


def _loop_percentile(samples: list[np.ndarray], resamples: int = 20_000, seed: int = 1) -> tuple[float, float]:
    """Reference: draw every sample's items with replacement, one resample at a time; the statistic is the mean of
    the samples' means; the 2.5 / 97.5 percentiles of the resampled statistics."""
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(resamples):
        stats.append(np.mean([s[rng.integers(0, len(s), len(s))].mean() for s in samples]))
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def test_paired_matches_a_plain_loop():
    rng = np.random.default_rng(7)
    a, b = rng.normal(60, 15, 40), rng.normal(55, 15, 40)
    got = paired_interval(a, b)
    low, high = _loop_percentile([a - b])
    se = (a - b).std(ddof=1) / np.sqrt(len(a))
    assert got.diff == pytest.approx((a - b).mean())
    assert got.n == 40
    assert got.low == pytest.approx(low, abs=0.1 * se) and got.high == pytest.approx(high, abs=0.1 * se)
    assert got.low < got.diff < got.high


def test_stratified_matches_a_plain_loop():
    rng = np.random.default_rng(3)
    pairs = [(rng.normal(m, 10, n), rng.normal(50, 10, n)) for m, n in ((55, 12), (60, 20), (48, 8))]
    got = stratified_interval(pairs)
    diffs = [a - b for a, b in pairs]
    low, high = _loop_percentile(diffs)
    assert got.diff == pytest.approx(np.mean([d.mean() for d in diffs]))  # seeds weighted alike, not items
    assert got.n == 40
    width = high - low
    assert got.low == pytest.approx(low, abs=0.04 * width) and got.high == pytest.approx(high, abs=0.04 * width)


def test_equal_differences_give_a_zero_width_interval():
    got = paired_interval([10.0, 30.0, 70.0, 20.0], [7.0, 27.0, 67.0, 17.0])
    assert (got.diff, got.low, got.high) == pytest.approx((3.0, 3.0, 3.0))
    pooled = stratified_interval([([2.0, 2.0], [1.0, 1.0]), ([4.0], [0.0])])
    assert (pooled.diff, pooled.low, pooled.high, pooled.n) == pytest.approx((2.5, 2.5, 2.5, 3))


def test_a_symmetric_sample_gives_an_interval_centred_on_its_mean():
    diffs = np.array([-3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0] * 5) + 4.0
    got = paired_interval(diffs, np.zeros_like(diffs))
    assert got.diff == pytest.approx(4.0)
    assert got.high - got.diff == pytest.approx(got.diff - got.low, abs=0.05)


def test_pairing_removes_the_spread_both_rows_share():
    # Item difficulty varies a lot and both rows share it; b is a little better on every item. The paired interval
    # excludes 0; resampling the two rows independently (unpaired) cannot tell them apart.
    rng = np.random.default_rng(0)
    difficulty = rng.uniform(0, 100, 30)
    a, b = difficulty, difficulty + 2.0 + rng.normal(0, 0.5, 30)
    paired = paired_interval(a, b)
    assert paired.high < 0
    low, high = _unpaired(a, b)
    assert low < 0 < high
    assert high - low > 10 * (paired.high - paired.low)


def _unpaired(a: np.ndarray, b: np.ndarray, resamples: int = 5000) -> tuple[float, float]:
    rng = np.random.default_rng(2)
    stats = [
        a[rng.integers(0, len(a), len(a))].mean() - b[rng.integers(0, len(b), len(b))].mean() for _ in range(resamples)
    ]
    return float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def test_same_scores_same_interval():
    a, b = [1.0, 4.0, 2.0, 8.0, 5.0], [0.0, 1.0, 3.0, 2.0, 2.0]
    assert paired_interval(a, b) == paired_interval(a, b)


def test_unequal_lengths_are_refused():
    with pytest.raises(ValueError, match="equally long"):
        paired_interval([1.0, 2.0], [1.0])
    with pytest.raises(ValueError, match="equally long"):
        stratified_interval([([1.0], [])])
