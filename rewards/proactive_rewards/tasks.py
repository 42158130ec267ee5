"""Trajectory rewards of the P³I tasks (docs/spec.md §7, P³I Appendix C): accident, count, compositional, intervention.

Each reward scores one trajectory given as plain Python values:

- ``completion``: the model's turns in any form :func:`~proactive_rewards.parsing.parse_turns` reads (a string
  with ``<t=..s>`` timestamps, chat messages, per-step strings, ``(time, text)`` pairs, or parsed `Turn` s);
- ``targets``: the ground-truth targets **inside the rollout window**, as `Target`, ``(time, text[, window])``
  tuples or ``{"time", "text", "window"}`` dicts;
- ``times`` (*optional*): the decision time of each assistant turn.

`M` counts every non-silent turn, malformed ones included (P³I: "including malformed outputs"). Malformed
turns enter the PRS denominators of count and intervention with content score 0. With ``components=True`` a
reward returns a dict with ``"overall"`` (the reward) and its parts, for logging.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from proactive_rewards.parsing import normalize_text, outputs_of, parse_int, parse_turns
from proactive_rewards.parsing import token_f1 as _token_f1
from proactive_rewards.temporal import ALPHA, _check_alpha, _decay, _sorted_targets, distance, prs_score
from proactive_rewards.types import Response

LAMBDA = 0.2


def _check_lam(lam: float) -> float:
    lam = float(lam)
    if not (math.isfinite(lam) and lam >= 0):
        raise ValueError(f"lam must be a finite number >= 0, got {lam!r}")
    return lam


def _result(components: bool, overall: float, **parts):
    return {"overall": overall, **parts} if components else overall


def accident_reward(
    completion,
    targets,
    times=None,
    *,
    signal: str = "Warning",
    alpha: float = ALPHA,
    lam: float = LAMBDA,
    components: bool = False,
):
    """Accident reward (docs/spec.md §7, P³I Appendix C).

    ``J`` = well-formed outputs whose normalised content equals `signal`; ``M`` = all non-silent outputs. If
    ``J ≠ ∅``: ``R = exp(-α·d(t_{j*}, τ)) - λ(M - 1)`` with ``j*`` the correct output closest to ``τ``; else
    ``R = -λ·M``. With several targets, ``(j*, τ)`` is the closest correct pair; with none, ``R = -λ·M``.

    Args:
        completion: the trajectory (see the module docstring).
        targets (`list`): the warning target(s) in the window.
        times (`list[float]`, *optional*): decision time of each assistant turn.
        signal (`str`, *optional*, defaults to `"Warning"`): the expected content.
        alpha (`float`, *optional*, defaults to `0.05`): temporal decay rate.
        lam (`float`, *optional*, defaults to `0.2`): penalty per unmatched non-silent output (``λ``).
        components (`bool`, *optional*, defaults to `False`): return ``{"overall", "temporal", "penalty",
            "outputs"}`` instead of the float.

    Example (P³I Figure 13(b): target 18.867 s, the only Warning at 40.200 s):

    >>> round(accident_reward("<t=39.2s></Silence><t=40.2s></Response> Warning", [(18.867, "Warning")]), 3)
    0.344
    """
    alpha, lam = _check_alpha(alpha), _check_lam(lam)
    outputs = outputs_of(parse_turns(completion, times))
    want = normalize_text(signal)
    correct = [o for o in outputs if not o.malformed and normalize_text(o.text) == want]
    targets = _sorted_targets(targets)
    m = len(outputs)
    if correct and targets:
        d = min((distance(o.time, g) for o in correct for g in targets), key=lambda x: x if x == x else math.inf)
        temporal, penalty = _decay(d, alpha), lam * (m - 1)
    else:
        temporal, penalty = 0.0, lam * m
    return _result(components, temporal - penalty, temporal=temporal, penalty=penalty, outputs=m)


def _count_match(response_text, target_text) -> float:
    """``c = 1`` iff both texts parse as the same integer (P³I: "predicted integer exactly matches")."""
    a = parse_int(response_text)
    return float(a is not None and a == parse_int(target_text))


def count_reward(completion, targets, times=None, *, alpha: float = ALPHA, components: bool = False):
    """Count reward for Atomic and Event Type (docs/spec.md §7): PRS-B with integer content matching.

    Every non-silent output (wrong, repeated or malformed) stays in its target's ``|O_i|`` denominator. No
    target in the window gives 0.

    Args:
        completion: the trajectory (see the module docstring).
        targets (`list`): the count targets in the window; their text is the running count.
        times (`list[float]`, *optional*): decision time of each assistant turn.
        alpha (`float`, *optional*, defaults to `0.05`): temporal decay rate.
        components (`bool`, *optional*, defaults to `False`): return ``{"overall", "no_penalty", "outputs"}``.

    Example (one target, the right count 1 s late, plus two repeats of it: the best score is divided by 3):

    >>> turns = [(11.0, "1"), (20.0, "1"), (30.0, "1")]
    >>> round(count_reward(turns, [(10.0, "1")]), 4) == round(math.exp(-0.05) / 3, 4)
    True
    """
    outputs = outputs_of(parse_turns(completion, times))
    scorer = _count_match
    overall = prs_score(outputs, targets, "B", alpha, scorer).score
    if not components:
        return overall
    no_penalty = prs_score(outputs, targets, "B", alpha, scorer, redundancy=False).score
    return _result(True, overall, no_penalty=no_penalty, outputs=len(outputs))


def compositional_reward(
    completion, targets, times=None, *, alpha: float = ALPHA, lam: float = LAMBDA, components: bool = False
):
    """Compositional reward (docs/spec.md §7, P³I Appendix C): ``R = (1/|A|) Σ_{l∈A} S_l - λ·N_inv``.

    A target's text is its boundary label (``start`` / ``end``); ``A`` is the set of labels of the targets in
    the window. An output whose normalised content names a label in ``A`` is assigned to it; ``S_l`` is the
    PRS-B of those outputs against that label's targets (content already matched, so ``c = 1``; repeats stay in
    the denominator). ``N_inv`` counts malformed outputs and outputs naming anything else (an inactive label
    included). With ``A = ∅``, ``R = -λ·N_inv``.

    Args:
        completion: the trajectory (see the module docstring).
        targets (`list`): the boundary targets in the window.
        times (`list[float]`, *optional*): decision time of each assistant turn.
        alpha (`float`, *optional*, defaults to `0.05`): temporal decay rate.
        lam (`float`, *optional*, defaults to `0.2`): penalty per invalid output (``λ``).
        components (`bool`, *optional*, defaults to `False`): return ``{"overall", "temporal", "penalty",
            "invalid"}``.

    Example (only ``start`` is active; an ``end`` output is invalid and costs λ):

    >>> r = compositional_reward([(12.0, "start"), (30.0, "end")], [(10.0, "start")])
    >>> round(r, 4) == round(math.exp(-0.1) - 0.2, 4)
    True
    """
    alpha, lam = _check_alpha(alpha), _check_lam(lam)
    outputs = outputs_of(parse_turns(completion, times))
    by_label: dict[str, list] = {}
    for g in _sorted_targets(targets):
        by_label.setdefault(normalize_text(g.text), []).append(g)
    assigned: dict[str, list[Response]] = {label: [] for label in by_label}
    invalid = 0
    for o in outputs:
        label = normalize_text(o.text)
        if o.malformed or label not in assigned:
            invalid += 1
        else:
            assigned[label].append(o)
    temporal = 0.0
    if by_label:
        scores = [prs_score(assigned[label], gs, "B", alpha, _always_correct).score for label, gs in by_label.items()]
        temporal = sum(scores) / len(scores)
    penalty = lam * invalid
    return _result(components, temporal - penalty, temporal=temporal, penalty=penalty, invalid=invalid)


def _always_correct(response_text, target_text) -> float:
    return 1.0


def intervention_reward(
    completion,
    targets,
    times=None,
    *,
    alpha: float = ALPHA,
    content_scorer: Callable[[str, str], float] | None = None,
    components: bool = False,
):
    """Intervention reward (docs/spec.md §7): PRS-B with windowed targets and a pluggable content scorer ``c ∈ [0, 1]``.

    Args:
        completion: the trajectory (see the module docstring).
        targets (`list`): intervention targets, usually with a ``window``.
        times (`list[float]`, *optional*): decision time of each assistant turn.
        alpha (`float`, *optional*, defaults to `0.05`): temporal decay rate.
        content_scorer (`Callable[[str, str], float]`, *optional*): ``c(response, target)``; defaults to
            :func:`~proactive_rewards.parsing.token_f1`, a judge-free stand-in for the paper's LLM judge.
        components (`bool`, *optional*, defaults to `False`): return ``{"overall", "no_penalty", "outputs"}``.

    Example (inside the window, the full content scores 1):

    >>> intervention_reward([(41.0, "Turn off the stove")], [{"time": 40.0, "text": "turn off the stove",
    ...                                                       "window": [40.0, 44.0]}])
    1.0
    """
    outputs = outputs_of(parse_turns(completion, times))
    scorer = content_scorer or _token_f1
    overall = prs_score(outputs, targets, "B", alpha, scorer).score
    if not components:
        return overall
    no_penalty = prs_score(outputs, targets, "B", alpha, scorer, redundancy=False).score
    return _result(True, overall, no_penalty=no_penalty, outputs=len(outputs))


__all__ = [
    "LAMBDA",
    "accident_reward",
    "compositional_reward",
    "count_reward",
    "intervention_reward",
]
