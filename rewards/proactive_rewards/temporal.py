"""Temporal decay, response-to-target matching and the Proactive Response Score (docs/spec.md §4, P³I §4).

    s(t, g_i) = c(ŷ, y_i) · exp(-α · d(t, g_i))
    S_i       = max_{j ∈ O_i} s(t_j, g_i) / |O_i|        (0 when O_i is empty)
    PRS       = mean_i S_i

Non-finite times are scored, not raised: a response or target whose time is `nan` or infinite has
temporal score 0 (it can never be "on time"), and still counts in the redundancy denominator. A target time
below 0 is treated the same way: a stream starts at 0, so such a target is broken ground truth (the dataset's, not
the model's doing) and earns no response any credit; it still counts in the mean over targets, and no response is
matched to it while a usable target exists.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from proactive_rewards.parsing import exact_match
from proactive_rewards.types import Response, Target, as_response, as_target

ALPHA = 0.05


def _check_alpha(alpha: float) -> float:
    alpha = float(alpha)
    if not (math.isfinite(alpha) and alpha >= 0):
        raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}")
    return alpha


def _usable(target: Target) -> bool:
    """A target a response can be on time for: a finite time ``τ >= 0`` (see the module docstring)."""
    return math.isfinite(target.time) and target.time >= 0


def distance(t: float, target: Target) -> float:
    """docs/spec.md §4 distance: ``|t - τ|``, or ``max(0, a - t, t - b)`` for a windowed target; `nan` if undefined,
    and for a target whose time is not finite or below 0.

    Example:

    >>> distance(12.0, Target(10.0, "x")), distance(12.0, Target(10.0, "x", window=(10.0, 14.0)))
    (2.0, 0.0)
    """
    if not _usable(target):
        return math.nan
    if target.window is not None:
        a, b = target.window
        d = max(a - t, t - b)
        return math.nan if math.isnan(d) else max(0.0, d)
    return abs(t - target.time)


def temporal_score(t: float, target_time: float, alpha: float = ALPHA, window=None) -> float:
    """Temporal decay ``exp(-α · d)`` of a response at ``t`` for a target at ``target_time`` (docs/spec.md §4).

    Args:
        t (`float`): response time in seconds.
        target_time (`float`): the target time ``τ``.
        alpha (`float`, *optional*, defaults to `0.05`): decay rate (P³I §4).
        window (`tuple[float, float]`, *optional*): ``[a, b]``; the distance is 0 inside it.

    Returns:
        `float` in ``[0, 1]``; 0 when the distance is not finite (and for a `target_time` below 0).

    Example (the P³I Figure 13(b) accident trace, a Warning 21.333 s late):

    >>> round(temporal_score(40.200, 18.867), 3)
    0.344
    """
    alpha = _check_alpha(alpha)
    d = distance(float(t), Target(float(target_time), "", tuple(window) if window is not None else None))
    return _decay(d, alpha)


def _decay(d: float, alpha: float) -> float:
    if not math.isfinite(d):
        return 0.0
    return math.exp(-alpha * d)


@dataclass
class TargetResult:
    """Per-target detail of a PRS computation.

    Args:
        target (`Target`): the ground-truth target ``g_i``.
        matched (`list[Response]`): ``O_i``, the responses assigned to it.
        best (`float`): ``max_j s(t_j, g_i)`` (0 when nothing matched).
        score (`float`): ``S_i`` (``best / |O_i|`` with the redundancy penalty, else ``best``).
        latency (`float`, *optional*): ``t_j - τ_i`` of the best-scoring matched response; `None` when nothing
            matched or its time is not finite.
    """

    target: Target
    matched: list[Response] = field(default_factory=list)
    best: float = 0.0
    score: float = 0.0
    latency: float | None = None


@dataclass
class PRSResult:
    """Episode PRS (docs/spec.md §4) with per-target details; `score` is in ``[0, 1]`` (0 when there is no target)."""

    score: float
    per_target: list[TargetResult]
    mode: str = "B"


def _sorted_targets(targets) -> list[Target]:
    # Stable sort by time with unusable times (non-finite, below 0) last, so "the earlier one" and "the first
    # target" are defined even for unsorted or garbage input, and name a usable target when there is one.
    ts = [as_target(t) for t in targets]
    return sorted(ts, key=lambda g: (not _usable(g), g.time if _usable(g) else 0.0))


def match_bidirectional(responses: list[Response], targets: list[Target]) -> list[int]:
    """PRS-B matching: each response goes to the temporally nearest target (ties: the earlier one).

    `targets` must be sorted (see :func:`prs_score`). A response at no finite distance from any target goes
    to the first target. Returns one target index per response.
    """
    out = []
    for r in responses:
        best, best_d = 0, math.inf
        for i, g in enumerate(targets):
            d = distance(r.time, g)
            if d < best_d:  # strict: a tie keeps the earlier target; nan never wins
                best, best_d = i, d
        out.append(best)
    return out


def match_unidirectional(responses: list[Response], targets: list[Target]) -> list[tuple[int, bool]]:
    """PRS-U matching: each response goes to the latest target with ``τ_i ≤ t_j``.

    A response before the first target (or with a `nan` time) goes to the first target and is flagged
    *early* (score 0, still counted); unusable targets (non-finite or negative time) are never the latest.
    Returns ``(target index, early)`` per response.
    """
    out = []
    for r in responses:
        index = None
        for i, g in enumerate(targets):
            if _usable(g) and g.time <= r.time:
                index = i
        out.append((0, True) if index is None else (index, False))
    return out


def prs_score(
    responses: Iterable,
    targets: Iterable,
    mode: str = "B",
    alpha: float = ALPHA,
    content_scorer: Callable[[str, str], float] | None = None,
    redundancy: bool = True,
) -> PRSResult:
    """Proactive Response Score of one episode (docs/spec.md §4, P³I §4).

    Args:
        responses (`list`): non-silent outputs as `Response`, ``(time, text)`` pairs or ``{"time", "text"}``
            dicts, in any order. A `Response` flagged ``malformed`` (docs/spec.md §13) is matched and counted in
            ``|O_i|`` like any output, with content score 0.
        targets (`list`): ground truth as `Target`, ``(time, text[, window])`` tuples or dicts.
        mode (`str`, *optional*, defaults to `"B"`): ``"B"`` (nearest target) or ``"U"`` (latest target at or
            before the response; earlier responses score 0 on the first target).
        alpha (`float`, *optional*, defaults to `0.05`): temporal decay rate.
        content_scorer (`Callable[[str, str], float]`, *optional*): ``c(response_text, target_text)`` in
            ``[0, 1]``; defaults to :func:`~proactive_rewards.parsing.exact_match`. Values are clamped to
            ``[0, 1]`` (`nan` counts as 0).
        redundancy (`bool`, *optional*, defaults to `True`): divide each target's best score by ``|O_i|``.

    Returns:
        `PRSResult`.

    Example (PRS-U: the response at 2 s precedes the first target, so it scores 0 there but still counts):

    >>> result = prs_score([(2.0, "1"), (11.0, "1"), (30.0, "2")], [(10.0, "1"), (30.0, "2")], mode="U")
    >>> [round(t.score, 4) for t in result.per_target], round(result.score, 4)
    ([0.4756, 1.0], 0.7378)
    """
    if mode not in ("B", "U"):
        raise ValueError(f"mode must be 'B' or 'U', got {mode!r}")
    alpha = _check_alpha(alpha)
    scorer = content_scorer or exact_match
    responses = [as_response(r) for r in responses]
    targets = _sorted_targets(targets)
    per_target = [TargetResult(g) for g in targets]
    if not targets:
        return PRSResult(0.0, [], mode)

    if mode == "B":
        assignment = [(i, False) for i in match_bidirectional(responses, targets)]
    else:
        assignment = match_unidirectional(responses, targets)

    best_key: list[tuple | None] = [None] * len(targets)
    for r, (i, early) in zip(responses, assignment):
        res, g = per_target[i], targets[i]
        res.matched.append(r)
        s = 0.0 if early else _pair_score(r, g, alpha, scorer)
        # The best response: highest score, then smallest |t - τ|, then the earliest in input order.
        d = distance(r.time, g)
        key = (s, -d if math.isfinite(d) else -math.inf)
        if best_key[i] is None or key > best_key[i]:
            best_key[i] = key
            res.best = s
            lat = r.time - g.time
            res.latency = lat if math.isfinite(lat) and _usable(g) else None

    for res in per_target:
        if res.matched:
            res.score = res.best / len(res.matched) if redundancy else res.best
    return PRSResult(sum(r.score for r in per_target) / len(per_target), per_target, mode)


def _pair_score(response: Response, target: Target, alpha: float, scorer) -> float:
    """``s(t_j, g_i) = c · exp(-α d)`` with ``c`` clamped to [0, 1]; a malformed output has ``c = 0``."""
    decay = _decay(distance(response.time, target), alpha)
    if decay == 0.0 or response.malformed:
        return 0.0
    c = scorer(response.text, target.text)
    try:
        c = float(c)
    except (TypeError, ValueError):
        c = 0.0
    c = 0.0 if math.isnan(c) else min(1.0, max(0.0, c))
    return c * decay
