"""Benchmark PRS-U / PRS-B (docs/spec.md §4, P³I §4), computed by the same scorer the rewards use.

Each episode is scored by `proactive_rewards.prs_score` (one scorer for reward and benchmark)
in both matching modes, with and without the redundancy penalty, and once more in B mode with every response's words
counted right (``prs_b_timing``: *when* the model spoke, whatever it said; its gap to ``prs_b`` is what wrong words
cost, docs/spec.md §4). Benchmark PRS = 100 × the mean of the
episode scores, per task and overall. Also reported: responses per target (the mean ``|O_i|``), the
median latency ``t_j - τ_i`` of each target's best-scoring matched response, the malformed outputs (docs/spec.md
§13: counted in ``|O_i|``, credited 0, as in the rewards) and the content scorer behind each task's numbers
(`proactive_eval.common.content`: exact match, or token-F1 / a judge for free-text tasks).
"""

from __future__ import annotations

import logging
import statistics
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import proactive_rewards
from proactive_eval.common.content import content_scorers, scorer_name
from proactive_eval.common.malformed import count_malformed
from proactive_eval.episodes import episode_group
from proactive_rewards.temporal import ALPHA, prs_score

logger = logging.getLogger(__name__)

#: result key → (matching mode, redundancy penalty, timing only: every response's content scored 1)
VARIANTS = {
    "U": ("U", True, False),
    "B": ("B", True, False),
    "U_nopenalty": ("U", False, False),
    "B_nopenalty": ("B", False, False),
    "B_timing": ("B", True, True),
}


def any_words(response_text: str, target_text: str) -> float:
    """The content score of a timing-only PRS: every response's words count as right."""
    return 1.0


@dataclass
class EpisodePRS:
    """The four PRS variants of one episode (`proactive_rewards.PRSResult` each)."""

    episode_id: str
    group: str
    results: dict[str, Any]
    #: the episode's non-silent outputs, and how many of them are malformed (docs/spec.md §13)
    outputs: int = 0
    malformed: int = 0

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"episode_id": self.episode_id, "group": self.group}
        for key, res in self.results.items():
            out[f"prs_{key.lower()}"] = res.score
        out["per_target_b"] = [
            {
                "time": t.target.time,
                "text": t.target.text,
                "matched": len(t.matched),
                "score": t.score,
                "latency": t.latency,
            }
            for t in self.results["B"].per_target
        ]
        return out


@dataclass
class PRSReport:
    """PRS over a benchmark. `summary()` gives the tables; `episodes` keeps every per-target detail."""

    episodes: list[EpisodePRS] = field(default_factory=list)
    no_targets: list[str] = field(default_factory=list)
    unknown_ids: list[str] = field(default_factory=list)
    #: group → the name of the content scorer its numbers come from
    scorers: dict[str, str] = field(default_factory=dict)

    def responses_per_target(self, mode: str = "B") -> list[int]:
        """``|O_i|`` of every target, for the histogram."""
        return [len(t.matched) for e in self.episodes for t in e.results[mode].per_target]

    def _stats(self, episodes: list[EpisodePRS]) -> dict[str, Any]:
        out: dict[str, Any] = {"num_episodes": len(episodes)}
        names = sorted({self.scorers.get(e.group, "exact_match") for e in episodes})
        out["content_scorer"] = " + ".join(names) if names else None
        for key in VARIANTS:
            scores = [e.results[key].score for e in episodes]
            out[f"prs_{key.lower()}"] = round(100 * sum(scores) / len(scores), 4) if scores else 0.0
        for mode in ("U", "B"):
            targets = [t for e in episodes for t in e.results[mode].per_target]
            counts = [len(t.matched) for t in targets]
            latencies = [t.latency for t in targets if t.latency is not None]
            out[f"resp_per_target_{mode.lower()}"] = round(sum(counts) / len(counts), 4) if counts else 0.0
            out[f"median_latency_{mode.lower()}"] = round(statistics.median(latencies), 4) if latencies else None
        out["num_targets"] = sum(len(e.results["B"].per_target) for e in episodes)
        out["answered_targets"] = sum(bool(t.matched) for e in episodes for t in e.results["B"].per_target)
        out["missed_targets"] = out["num_targets"] - out["answered_targets"]
        out["repeated_targets"] = sum(len(t.matched) > 1 for e in episodes for t in e.results["B"].per_target)
        out["outputs"] = sum(e.outputs for e in episodes)
        out["malformed_outputs"] = sum(e.malformed for e in episodes)
        return out

    def summary(self) -> dict[str, Any]:
        """``{"overall": {...}, "groups": {task: {...}}}``: ``prs_u``, ``prs_b``, ``prs_u_nopenalty``,
        ``prs_b_nopenalty``, ``prs_b_timing`` (× 100), ``resp_per_target_{u,b}``, ``median_latency_{u,b}`` (seconds),
        ``num_targets``, ``answered_targets``, ``missed_targets`` and ``repeated_targets`` (PRS-B matching: a response
        or more, none, more than one), ``outputs`` and ``malformed_outputs`` (the model's non-silent outputs)."""
        groups: dict[str, list[EpisodePRS]] = defaultdict(list)
        for e in self.episodes:
            groups[e.group].append(e)
        return {
            "overall": self._stats(self.episodes),
            "groups": {g: self._stats(es) for g, es in sorted(groups.items())},
            "episodes_without_targets": len(self.no_targets),
            "unknown_prediction_ids": len(self.unknown_ids),
        }


def score_prs(
    episodes: Sequence,
    predictions: dict[str, Sequence],
    alpha: float = ALPHA,
    content_scorer: Callable[[str, str], float] | dict[str, Callable] | None = None,
    progress: bool = False,
) -> PRSReport:
    """PRS-U / PRS-B (with and without the redundancy penalty) of every episode (docs/spec.md §4).

    Args:
        episodes (`Sequence[Episode]`): episodes with targets; those without targets are skipped and listed in
            `no_targets` (PRS is a mean over targets, undefined without one).
        predictions (`dict[str, Sequence]`): episode id → responses; a missing id means "never spoke".
        alpha (`float`, *optional*, defaults to `0.05`): temporal decay rate.
        content_scorer (`Callable` or `dict[str, Callable]`, *optional*): ``c(response_text, target_text)`` in
            [0, 1], or one per task (a task missing from the dict gets exact match); defaults to
            `proactive_eval.common.content.content_scorers()`: token-F1 for intervention, the intervention reward's
            scorer, and exact match for the rest (docs/spec.md §4). A `JudgeScorer` is asked for all its pairs in one
            batch before scoring.
        progress (`bool`, *optional*): show a progress bar.
    """
    # deferred: tqdm.auto costs ~0.5 s to import; keeps `proactive-eval --help` fast
    from tqdm.auto import tqdm

    prs_score = _prs_score()
    if content_scorer is None:
        content_scorer = content_scorers()

    def scorer_of(episode):
        scorer = content_scorer.get(episode.task) if isinstance(content_scorer, dict) else content_scorer
        return scorer

    def bound(episode):
        scorer = scorer_of(episode)
        return scorer.bind(_question(episode)) if hasattr(scorer, "bind") else scorer

    known = {e.id for e in episodes}
    report = PRSReport(unknown_ids=sorted(set(predictions) - known))
    if report.unknown_ids:
        logger.warning("%d prediction ids match no episode (e.g. %s)", len(report.unknown_ids), report.unknown_ids[0])
    scored = [e for e in episodes if e.targets]
    report.no_targets = [e.id for e in episodes if not e.targets]
    _prefetch_judged(scored, predictions, scorer_of, alpha, progress)
    for episode in tqdm(scored, desc="PRS", disable=not progress):
        scorer = bound(episode)
        responses = predictions.get(episode.id, [])
        results = {
            key: prs_score(
                responses,
                episode.targets,
                mode=mode,
                alpha=alpha,
                content_scorer=any_words if timing else scorer,
                redundancy=penalty,
            )
            for key, (mode, penalty, timing) in VARIANTS.items()
        }
        group = episode_group(episode)
        report.episodes.append(EpisodePRS(episode.id, group, results, *count_malformed(responses)))
        report.scorers[group] = scorer_name(scorer_of(episode))
    return report


def _question(episode) -> str:
    return str(episode.meta.get("question", episode.instruction)) if episode.meta else episode.instruction


def _prefetch_judged(episodes, predictions, scorer_of, alpha: float, progress: bool) -> None:
    """Send every pair a judge-backed scorer will be asked for in one batch: a dry pass records the pairs PRS
    asks (both matching modes), then the judge rates them all concurrently."""
    prs_score = _prs_score()
    requests: dict[int, tuple[Any, list]] = {}
    for episode in episodes:
        scorer = scorer_of(episode)
        if not hasattr(scorer, "prefetch"):
            continue
        question = _question(episode)
        asked = requests.setdefault(id(scorer), (scorer, []))[1]

        def record(response_text, target_text, q=question, asked=asked):
            asked.append((q, target_text, response_text))
            return 0.0

        for mode in ("U", "B"):
            prs_score(predictions.get(episode.id, []), episode.targets, mode=mode, alpha=alpha, content_scorer=record)
    for scorer, asked in requests.values():
        scorer.prefetch(asked, progress=progress)


def _prs_score():
    if hasattr(proactive_rewards, "prs_score"):
        return proactive_rewards.prs_score

    return prs_score
