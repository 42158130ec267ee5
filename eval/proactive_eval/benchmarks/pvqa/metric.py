"""PAUC, the ProactiveVideoQA metric (docs/spec.md §5), faithful to the official scorer.

Per ground-truth turn with reply span ``[u, v]`` (and optional related span ``[r0, r1]``):

1. keep predictions with ``u ≤ t ≤ v`` in time order, dropping exact duplicate texts;
2. the p-th kept prediction is judged on the question, the gold text and the concatenation (joined by one
   space) of kept predictions 1..p; level 1..3 → ``y_p = level - 1`` (``S = 2``); an unparseable judge
   answer drops the point. Points are keyed by time, so of two predictions at the same time the later
   (cumulative) one wins, as in the official ``judge_scores`` dict;
3. with more than one point, points after ``r1`` (``v`` when no related span) scoring below the last score
   at or before ``r1`` are dropped (the official scorer starts "last" at 0);
4. ``x_p = (1 - ω)(t_p - u)``, start ``(0, 0.5)``, end ``(v - u, y_last)``; step area
   ``Σ (x_k - x_{k-1}) · y_{k-1}`` over ``(v - u) · S``. No point ⇒ ``0.5 / S = 0.25``.

The benchmark number is 100 × the mean over all turns (official, turn-weighted); the mean over videos of
their turn means is reported too.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proactive_eval.common.malformed import count_malformed
from proactive_eval.episodes import episode_group
from proactive_eval.judges import pauc_prompt
from proactive_eval.judges.prompts import parse_level
from proactive_rewards import Response, as_response

logger = logging.getLogger(__name__)

MAX_SCORE = 2  # S: judge levels 1..3 map to 0..2
START_SCORE = 0.5  # "no response is better than a wrong one" (ProactiveVideoQA §3)
OMEGAS = (0, 0.5, 1)

#: ``judge(question, gold, prediction_text) -> level 1..3 | None``
JudgeFn = Callable[[str, str, str], Any]


def kept_predictions(span: Sequence[float], predictions: Iterable) -> list[Response]:
    """Step 1: the predictions inside ``[u, v]`` (inclusive), in time order, exact duplicate texts dropped."""
    u, v = span
    inside = sorted((r for r in map(as_response, predictions) if u <= r.time <= v), key=lambda r: r.time)
    kept, seen = [], set()
    for r in inside:
        if r.text not in seen:
            seen.add(r.text)
            kept.append(r)
    return kept


def cumulative_texts(kept: Sequence[Response]) -> list[str]:
    """Step 2: what the judge sees for point p, the kept texts 1..p joined by a space."""
    return [" ".join(r.text for r in kept[: p + 1]) for p in range(len(kept))]


def parse_judge_level(value) -> int | None:
    """A judge level 1..3 read as the official scorer does: ``judges.parse_level(value, official=True)``.

    Kept as the metrics-side name of the one level parser (`proactive_eval.judges.prompts.parse_level`).
    PAUC stays faithful to the official scorer on judge answers that reach it as text (the first character
    decides); a `Judge` from `proactive_eval.judges` has already parsed its model's answer, more leniently,
    into an integer level, which both readings take as is.
    """
    return parse_level(value, official=True)


def judged_points(
    kept: Sequence[Response], levels: Sequence, related_end: float
) -> tuple[list[tuple[float, int]], int]:
    """Steps 2-3: ``(t_p, y_p)`` points from judge levels, and how many the related-span rule dropped."""
    scores: dict[float, int] = {}
    for response, level in zip(kept, levels):
        level = parse_judge_level(level)
        if level is not None:
            scores[response.time] = level - 1
    points = sorted(scores.items())
    if len(points) <= 1:
        return points, 0
    out, last_in_related = [], 0
    for t, y in points:
        if t <= related_end:
            last_in_related = y
        elif y < last_in_related:
            continue
        out.append((t, y))
    return out, len(points) - len(out)


def pauc_area(span: Sequence[float], points: Sequence[tuple[float, float]], omega: float = 0.5) -> float:
    """Step 4: the normalised step area of the judged-score curve, in [0, 1]; 0.25 without points.

    Example (a 10 s turn, one "mostly covered" answer at 4 s, ω = 0):

    ```python
    >>> pauc_area((0.0, 10.0), [(4.0, 2)], omega=0)  # (4·0.5 + 6·2) / (10·2)
    0.7

    ```
    """
    if not points:
        return START_SCORE / MAX_SCORE
    u, v = span
    max_x = v - u
    # sort on time alone (stable): at ω = 1 every x is 0 and the order of the points is what remains
    xs = [((t - u) * (1 - omega), y) for t, y in sorted(points, key=lambda p: p[0])]
    xs.append((max_x, xs[-1][1]))
    area, prev_x, prev_y = 0.0, 0.0, START_SCORE
    for x, y in xs:
        area += (x - prev_x) * prev_y
        prev_x, prev_y = x, y
    return area / (max_x * MAX_SCORE) if max_x > 0 else 0.0


def pauc_turn(
    span: Sequence[float],
    predictions: Iterable,
    judge: JudgeFn,
    omega: float = 0.5,
    related: Sequence[float] | None = None,
    question: str = "",
    gold: str = "",
) -> float:
    """PAUC of one ground-truth turn in [0, 1] (docs/spec.md §5).

    Args:
        span (`tuple[float, float]`): the reply span ``[u, v]``.
        predictions (`Iterable`): `Response`, ``(time, text)`` or ``{"time", "text"}`` items (any order).
        judge (`Callable`): ``judge(question, gold, prediction_text) -> int | None``, a level 1..3; anything
            else (``None``, out of range, unparseable text) drops the point. A `Judge` object (with
            ``score_many``) works too.
        omega (`float`, *optional*, defaults to `0.5`): 0 = timeliness matters fully, 1 = content only.
        related (`tuple[float, float]`, *optional*): the related span; its end drives the late-drop rule.
        question (`str`, *optional*): the question shown to the judge.
        gold (`str`, *optional*): the ground-truth answer shown to the judge.
    """
    kept = kept_predictions(span, predictions)
    texts = cumulative_texts(kept)
    levels = _judge_all(judge, [(question, gold, text) for text in texts], progress=False)
    points, _ = judged_points(kept, levels, related[1] if related is not None else span[1])
    return pauc_area(span, points, omega)


@dataclass
class TurnScore:
    """One scored ground-truth turn: what the judge saw, what it said, and the PAUC per ω."""

    episode_id: str
    turn: int
    group: str
    span: tuple[float, float]
    related: tuple[float, float] | None
    gold: str
    kept: list[Response]
    levels: list[int | None]
    points: list[tuple[float, int]]
    dropped_related: int
    pauc: dict[float, float]

    @property
    def unparseable(self) -> int:
        return sum(parse_judge_level(x) is None for x in self.levels)

    def to_dict(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "turn": self.turn,
            "group": self.group,
            "span": list(self.span),
            "related": list(self.related) if self.related else None,
            "gold": self.gold,
            "predictions": [{"time": r.time, "text": r.text} for r in self.kept],
            "levels": self.levels,
            "points": [list(p) for p in self.points],
            "dropped_related": self.dropped_related,
            "pauc": {str(o): s for o, s in self.pauc.items()},
        }


@dataclass
class PAUCResult:
    """PAUC over a benchmark: per-turn scores and the turn-/video-weighted means × 100 per ω."""

    omegas: tuple[float, ...]
    turns: list[TurnScore] = field(default_factory=list)
    judge_calls: int = 0
    unknown_ids: list[str] = field(default_factory=list)
    #: episode id → (non-silent outputs, malformed ones), docs/spec.md §13
    outputs: dict[str, tuple[int, int]] = field(default_factory=dict)

    def _means(self, turns: list[TurnScore]) -> dict[str, Any]:
        by_video: dict[str, list[TurnScore]] = defaultdict(list)
        for t in turns:
            by_video[t.episode_id].append(t)
        out: dict[str, Any] = {"num_videos": len(by_video), "num_turns": len(turns)}
        for o in self.omegas:
            turn_mean = sum(t.pauc[o] for t in turns) / len(turns) if turns else 0.0
            video_means = [sum(t.pauc[o] for t in ts) / len(ts) for ts in by_video.values()]
            video_mean = sum(video_means) / len(video_means) if video_means else 0.0
            out[f"omega={o}"] = round(100 * turn_mean, 4)
            out[f"video_omega={o}"] = round(100 * video_mean, 4)
        out["unparseable"] = sum(t.unparseable for t in turns)
        out["answered_turns"] = sum(bool(t.kept) for t in turns)
        counts = [self.outputs.get(video, (0, 0)) for video in by_video]
        out["outputs"], out["malformed_outputs"] = sum(c[0] for c in counts), sum(c[1] for c in counts)
        return out

    def summary(self) -> dict[str, Any]:
        """``{"overall": {...}, "groups": {group: {...}}}`` with ``omega=ω`` (turn-weighted, official) and
        ``video_omega=ω`` (mean of per-video means), both × 100; ``unparseable`` judge answers; the model's
        non-silent ``outputs`` and ``malformed_outputs`` (docs/spec.md §13)."""
        groups: dict[str, list[TurnScore]] = defaultdict(list)
        for t in self.turns:
            groups[t.group].append(t)
        return {
            "overall": self._means(self.turns),
            "groups": {g: self._means(ts) for g, ts in sorted(groups.items())},
            "judge_calls": self.judge_calls,
            "unknown_prediction_ids": len(self.unknown_ids),
        }


def score_pauc(
    episodes: Sequence,
    predictions: dict[str, Sequence],
    judge,
    omegas: Sequence[float] = OMEGAS,
    progress: bool = True,
) -> PAUCResult:
    """PAUC of every windowed target of every episode (docs/spec.md §5), judging all prompts in one batch.

    All cumulative prompts are built first, deduplicated, then sent through ``judge.score_many(prompts)``
    when the judge has it (concurrent and cached, `proactive_eval.judges`), else ``judge(question, gold,
    text)`` is called per prompt. An episode missing from `predictions` scores 0.25 on every turn, as in the
    official scorer. Malformed outputs (docs/spec.md §13) are not answers and are left out.

    Args:
        episodes (`Sequence[Episode]`): each target needs a `window` (the reply span); `related` is optional;
            the question is ``meta["question"]`` (else the instruction); the gold text is the target text.
        predictions (`dict[str, Sequence]`): episode id → responses (see `load_predictions`).
        judge: a `Judge` with ``score_many`` or a callable ``judge(question, gold, text)``.
        omegas (`Sequence[float]`, *optional*, defaults to `(0, 0.5, 1)`).
        progress (`bool`, *optional*): show a progress bar.
    """
    known = {e.id for e in episodes}
    result = PAUCResult(omegas=tuple(omegas), unknown_ids=sorted(set(predictions) - known))
    if result.unknown_ids:
        logger.warning("%d prediction ids match no episode (e.g. %s)", len(result.unknown_ids), result.unknown_ids[0])
    pending = []  # (episode, turn index, target, question, kept, texts)
    for episode in episodes:
        question = str(episode.meta.get("question", episode.instruction)) if episode.meta else episode.instruction
        # A malformed output (docs/spec.md §13) is not an answer: the judge never sees it; it is counted.
        outputs = list(map(as_response, predictions.get(episode.id, [])))
        result.outputs[episode.id] = count_malformed(outputs)
        responses = [r for r in outputs if not r.malformed]
        for i, target in enumerate(episode.targets):
            if target.window is None:
                raise ValueError(f"episode {episode.id!r}: targets[{i}] has no window (the PAUC reply span)")
            kept = kept_predictions(target.window, responses)
            pending.append((episode, i, target, question, kept, cumulative_texts(kept)))

    requests = list(dict.fromkeys((q, t.text, text) for _, _, t, q, _, texts in pending for text in texts))
    levels = dict(zip(requests, _judge_all(judge, requests, progress)))
    result.judge_calls = len(requests)

    for episode, i, target, question, kept, texts in pending:
        turn_levels = [levels[(question, target.text, text)] for text in texts]
        related_end = target.related[1] if target.related is not None else target.window[1]
        points, dropped = judged_points(kept, turn_levels, related_end)
        result.turns.append(
            TurnScore(
                episode_id=episode.id,
                turn=i,
                group=episode_group(episode),
                span=tuple(target.window),
                related=tuple(target.related) if target.related is not None else None,
                gold=target.text,
                kept=kept,
                levels=turn_levels,
                points=points,
                dropped_related=dropped,
                pauc={o: pauc_area(target.window, points, o) for o in result.omegas},
            )
        )
    return result


def _judge_all(judge, requests: list[tuple[str, str, str]], progress: bool) -> list:
    # deferred: tqdm.auto costs ~0.5 s to import; keeps `proactive-eval --help` fast
    from tqdm.auto import tqdm

    if not requests:
        return []
    if hasattr(judge, "score_many"):
        return list(judge.score_many([pauc_prompt(q, g, p) for q, g, p in requests], progress=progress))

    return [judge(q, g, p) for q, g, p in tqdm(requests, desc="PAUC judge", disable=not progress)]
