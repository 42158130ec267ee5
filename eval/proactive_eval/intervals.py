"""95 % bootstrap intervals of a gain (docs/spec.md §15): paired over the held-out items of one evaluation, stratified
over seeds for pooled multi-seed comparisons.

A gain between two rows of a report (stage vs stage, own vs swapped frames, model vs blind floor) is a mean
difference over the same held-out items (episodes, PAUC turns, MCQA environments), so the items are resampled in
pairs: the interval reflects which items were drawn, not the spread between items that both rows share. Over seeds,
each seed's items are resampled within that seed (a stratified bootstrap, rliable's practice over runs) and the
statistic is the mean of the per-seed mean differences, every seed weighted alike. Both are `scipy.stats.bootstrap`
percentile intervals with a fixed generator, so a report is reproducible.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

#: resamples of every interval (docs/spec.md §15)
RESAMPLES = 10_000
CONFIDENCE = 0.95
#: the generator's seed: the same scores give the same interval
SEED = 0


@dataclass(frozen=True)
class Interval:
    """A mean difference and its bootstrap interval.

    Args:
        diff (`float`): the point estimate, mean(a − b) (pooled: the mean over seeds of each seed's mean).
        low (`float`), high (`float`): the interval's bounds.
        n (`int`): the paired items the estimate rests on (pooled: summed over the seeds).
    """

    diff: float
    low: float
    high: float
    n: int

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def _bootstrap(samples: tuple[np.ndarray, ...], statistic, resamples: int, seed: int) -> tuple[float, float]:
    # deferred: scipy is only needed when an interval is asked for
    from scipy.stats import bootstrap

    if all(np.ptp(s) == 0 for s in samples):  # every resample gives the point: scipy warns on a degenerate sample
        point = float(statistic(*samples, axis=-1))
        return point, point
    result = bootstrap(
        samples,
        statistic,
        n_resamples=resamples,
        confidence_level=CONFIDENCE,
        method="percentile",
        vectorized=True,
        rng=np.random.default_rng(seed),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def paired_interval(a: Sequence[float], b: Sequence[float], resamples: int = RESAMPLES, seed: int = SEED) -> Interval:
    """The mean of ``a[i] − b[i]`` over paired items and its 95 % percentile interval, the items resampled with
    replacement (docs/spec.md §15).

    Args:
        a (`Sequence[float]`), b (`Sequence[float]`): the two rows' scores of the same items, in the same order.
        resamples (`int`, *optional*, defaults to `RESAMPLES`): bootstrap resamples.
        seed (`int`, *optional*, defaults to `SEED`): the generator's seed.

    >>> paired_interval([3.0, 5.0, 4.0], [1.0, 3.0, 2.0])
    Interval(diff=2.0, low=2.0, high=2.0, n=3)
    """
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"paired_interval: expected two equally long non-empty lists, got {len(a)} and {len(b)}")
    diffs = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    low, high = _bootstrap((diffs,), np.mean, resamples, seed)
    return Interval(float(diffs.mean()), low, high, len(diffs))


def _mean_of_means(*samples, axis=-1):
    return np.mean([np.mean(s, axis=axis) for s in samples], axis=0)


def _seed_mean(diffs: tuple[np.ndarray, ...]):
    """The mean of per-seed means as a statistic of the seeds with two items or more (what scipy resamples); a
    seed with one item gives that item in every resample."""
    fixed = sum(float(d[0]) for d in diffs if len(d) == 1)

    def statistic(*samples, axis=-1):
        return (fixed + sum(np.mean(s, axis=axis) for s in samples)) / len(diffs)

    return statistic


def stratified_interval(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]], resamples: int = RESAMPLES, seed: int = SEED
) -> Interval:
    """Pooled over seeds: the mean over seeds of each seed's mean paired difference, and its 95 % percentile interval
    with every seed's items resampled within that seed (a stratified bootstrap; docs/spec.md §15).

    Args:
        pairs (`Sequence[tuple[Sequence[float], Sequence[float]]]`): per seed, the two rows' scores of its items.
        resamples (`int`, *optional*, defaults to `RESAMPLES`): bootstrap resamples.
        seed (`int`, *optional*, defaults to `SEED`): the generator's seed.

    >>> stratified_interval([([2.0, 2.0], [1.0, 1.0]), ([5.0], [2.0])])
    Interval(diff=2.0, low=2.0, high=2.0, n=3)
    """
    if not pairs or any(len(a) != len(b) or len(a) == 0 for a, b in pairs):
        raise ValueError("stratified_interval: expected, per seed, two equally long non-empty lists")
    diffs = tuple(np.asarray(a, dtype=float) - np.asarray(b, dtype=float) for a, b in pairs)
    point = float(_mean_of_means(*diffs))
    varying = tuple(d for d in diffs if len(d) > 1)
    low, high = _bootstrap(varying, _seed_mean(diffs), resamples, seed) if varying else (point, point)
    return Interval(point, low, high, sum(len(d) for d in diffs))
