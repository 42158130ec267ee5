"""The blind schedule: the best PRS a frame-independent schedule reaches on a task (docs/spec.md §4, §14).

A blind schedule is a fixed list of up to K responses, each ``(time, text)`` or ``(fraction of the episode's
duration, text)``, said in every episode of a task whatever its frames show (a response whose time is after an
episode's end is not said). Texts are drawn from the task's target texts (the most common first), times from a
grid (the frame step, at most `GRID_POINTS` points up to the longest episode) and fractions from
``0, 1/FRACTIONS, ..., 1``. K is the most targets any episode of the task has, at most `MAX_RESPONSES`.

It is fitted per task and per matching mode (PRS-U and PRS-B, with the redundancy penalty) either on a reference
split (``reference``, e.g. the training episodes) or, without one, by leave-one-out on the evaluated episodes
(each episode is scored with the schedule fitted on the others). The reported numbers come from
`proactive_eval.benchmarks.p3i.metric.score_prs` on the schedule's responses: the evaluator's own scorer, as for the model.

The search runs on a score matrix: for every candidate response and episode, the target it is matched to and its
pair score ``c · exp(-α d)`` (docs/spec.md §4). With the other responses of a schedule fixed, an episode's PRS with
one more response follows from its targets' best scores and ``|O_i|`` alone, so every candidate of one slot is
scored on every episode at once. The schedule is built by coordinate ascent over its slots: slots 1..K are filled
one after the other with the best candidate (or left empty when no candidate adds anything), then each slot is
re-chosen given the others until a full pass changes nothing (a local optimum of the grid; exact for K = 1, where
it is the argmax over the grid). Ties go to the current choice, then to an empty slot, then to the earlier
candidate (times before fractions, earlier times first, more common texts first). Leave-one-out follows the same
deterministic search for every held-out episode at once: episodes whose searches agree so far share one matrix,
and each takes the argmax of the column sums minus its own column.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from proactive_eval.benchmarks.p3i.metric import _prs_score, _question
from proactive_eval.common.content import content_scorers
from proactive_eval.episodes import episode_group
from proactive_rewards import ALPHA, Response, exact_match

GRID_POINTS = 400
FRACTIONS = 50
MAX_RESPONSES = 4
MAX_TEXTS = 8
MODES = ("U", "B")
_TOL = 1e-9
_PASSES = 6


@dataclass(frozen=True)
class ScheduleItem:
    """One response of a blind schedule: at ``value`` seconds (``kind="time"``) or at ``value`` × the episode's
    duration (``kind="fraction"``)."""

    kind: str
    value: float
    text: str

    def time_in(self, duration: float) -> float:
        return float(self.value) if self.kind == "time" else float(self.value) * float(duration)

    def to_dict(self) -> dict[str, Any]:
        return {self.kind: round(float(self.value), 6), "text": self.text}

    def describe(self) -> str:
        where = f"{self.value:g} s" if self.kind == "time" else f"{self.value:.2f} of the duration"
        return f"{self.text!r} at {where}"


@dataclass
class BlindSchedule:
    """The responses a blind schedule says in every episode of `task`, fitted for PRS-`mode`."""

    task: str
    mode: str
    items: tuple[ScheduleItem, ...] = ()

    def responses(self, episode) -> list[Response]:
        """Its responses in `episode`, in time order (those after the episode's end are not said)."""
        out = [(item.time_in(episode.duration), item.text) for item in self.items]
        return [Response(t, text) for t, text in sorted(out, key=lambda x: x[0]) if t <= episode.duration + 1e-9]

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, "mode": self.mode, "responses": [i.to_dict() for i in self.items]}

    def describe(self) -> str:
        return "; ".join(i.describe() for i in self.items) or "(silent)"


@dataclass
class BlindPRS:
    """Fitted blind schedules and the responses they say in each evaluated episode.

    Attributes:
        schedules (`dict`): ``(task, mode)`` → the `BlindSchedule` fitted on the whole fit set (the reference
            split, or all evaluated episodes of the task under leave-one-out).
        fit (`dict`): task → ``"reference"`` or ``"leave_one_out"``.
        predictions (`dict`): mode → episode id → the responses said in that episode (under leave-one-out, those
            of the schedule fitted on the other episodes).
        distinct (`dict`): ``(task, mode)`` → how many different schedules the leave-one-out fits found.
    """

    schedules: dict[tuple[str, str], BlindSchedule] = field(default_factory=dict)
    fit: dict[str, str] = field(default_factory=dict)
    predictions: dict[str, dict[str, list[Response]]] = field(default_factory=lambda: {m: {} for m in MODES})
    distinct: dict[tuple[str, str], int] = field(default_factory=dict)


class _Candidates:
    """The candidate responses of one task: times of a grid and fractions of the duration, times texts."""

    def __init__(self, fit_episodes: Sequence, max_texts: int = MAX_TEXTS):
        counts = Counter(t.text for e in fit_episodes for t in e.targets)
        self.texts = [text for text, _ in counts.most_common(max_texts)]
        longest = max(float(e.duration) for e in fit_episodes)
        step = max(min(1.0 / float(e.fps) for e in fit_episodes), longest / GRID_POINTS)
        times = np.round(np.arange(0.0, longest + step / 2, step), 6)
        fractions = np.linspace(0.0, 1.0, FRACTIONS + 1)
        values = np.concatenate([times, fractions])
        kinds = np.array([0] * len(times) + [1] * len(fractions))  # 0: seconds, 1: fraction of the duration
        n_text = len(self.texts)
        self.value = np.repeat(values, n_text)
        self.is_fraction = np.repeat(kinds, n_text).astype(bool)
        self.text = np.tile(np.arange(n_text), len(values))

    def __len__(self) -> int:
        return len(self.value)

    def item(self, index: int) -> ScheduleItem:
        kind = "fraction" if self.is_fraction[index] else "time"
        return ScheduleItem(kind, float(self.value[index]), self.texts[int(self.text[index])])


class _ScoreTable:
    """For each (episode, candidate): the target the candidate response is matched to (-1: not said) and its pair
    score ``c · exp(-α d)`` (0 for a PRS-U response before the first target), docs/spec.md §4."""

    def __init__(self, episodes: Sequence, cands: _Candidates, mode: str, alpha: float, content: Callable):
        n, width = len(episodes), max(len(e.targets) for e in episodes)
        self.n_targets = np.array([len(e.targets) for e in episodes], dtype=float)
        self.target = np.full((n, len(cands)), -1, dtype=np.int32)
        self.score = np.zeros((n, len(cands)))
        self.width = width
        self._flat = self._said = None
        self._cache: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = {}  # others -> (matrix, column sums)
        for row, episode in enumerate(episodes):
            times = np.where(cands.is_fraction, cands.value * float(episode.duration), cands.value)
            said = times <= float(episode.duration) + 1e-9
            lo = np.array([t.window[0] if t.window is not None else t.time for t in episode.targets])
            hi = np.array([t.window[1] if t.window is not None else t.time for t in episode.targets])
            taus = np.array([t.time for t in episode.targets])
            dist = np.maximum(0.0, np.maximum(lo[None, :] - times[:, None], times[:, None] - hi[None, :]))
            if mode == "B":  # nearest target, ties to the earlier one (argmin keeps the first)
                target, early = dist.argmin(axis=1), np.zeros(len(cands), dtype=bool)
            else:  # the latest target at or before the response; before the first one: target 0, score 0
                latest = (taus[None, :] <= times[:, None]).sum(axis=1) - 1
                target, early = np.maximum(latest, 0), latest < 0
            c = np.array([[content(episode, text, t.text) for t in episode.targets] for text in cands.texts])
            pair = c[cands.text, target] * np.exp(-alpha * dist[np.arange(len(cands)), target])
            self.target[row] = np.where(said, target, -1)
            self.score[row] = np.where(said & ~early, pair, 0.0)

    def cached(self, others: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """`slot_scores` and its column sums, kept for the most recent schedules (the fit on every episode and
        the leave-one-out fits walk mostly the same path)."""
        if others not in self._cache:
            if len(self._cache) >= 32:
                self._cache.pop(next(iter(self._cache)))
            matrix = self.slot_scores(others)
            self._cache[others] = (matrix, matrix.sum(axis=0))
        return self._cache[others]

    def slot_scores(self, others: tuple[int, ...]) -> np.ndarray:
        """``(episodes, 1 + candidates)``: each episode's PRS with `others` plus nothing (column 0) or plus one
        candidate (column 1 + j)."""
        n, width = len(self.n_targets), self.width + 1  # one more target column: where unsaid candidates go
        if self._flat is None:  # each candidate's target in a flattened (episodes × targets) array
            self._said = self.target >= 0
            rows = np.arange(n)[:, None] * width
            self._flat = rows + np.where(self._said, self.target, self.width)
        best, count = np.zeros((n, width)), np.zeros((n, width))
        for c in others:
            rows = np.nonzero(self._said[:, c])[0]
            cols = self.target[rows, c]
            count[rows, cols] += 1
            best[rows, cols] = np.maximum(best[rows, cols], self.score[rows, c])
        terms = np.divide(best, count, out=np.zeros_like(best), where=count > 0)  # S_i; 0 in the spare column
        base = terms.sum(axis=1)
        out = np.empty((n, 1 + self.score.shape[1]))
        out[:, 0] = base
        new = out[:, 1:]
        # with candidate j matched to target i: S_i becomes max(best_i, s_j) / (|O_i| + 1); unsaid: i is the spare
        np.maximum(best.ravel()[self._flat], self.score, out=new)
        new /= count.ravel()[self._flat] + 1
        new -= terms.ravel()[self._flat]
        new += base[:, None]
        out /= self.n_targets[:, None]
        return out


def _choose(values: np.ndarray, current: int) -> np.ndarray:
    """Per row of `values` (rows × options): the option kept, `current` unless another is better by more than the
    tolerance, then the first option within the tolerance of the best."""
    best = values.max(axis=1, keepdims=True)
    tol = _TOL * np.maximum(1.0, np.abs(best))
    first = (values >= best - tol).argmax(axis=1)
    keep = values[:, current] >= best[:, 0] - tol[:, 0]
    return np.where(keep, current, first)


def _search(table: _ScoreTable, k_max: int, held_out: np.ndarray | None) -> list[tuple[tuple[int, ...], np.ndarray]]:
    """Coordinate ascent over the slots of a schedule (module docstring). ``held_out=None``: one schedule fitted on
    every episode of `table`; else one per held-out row, fitted on the other rows. Returns ``[(schedule, rows)]``."""
    groups: dict[tuple[int, ...], np.ndarray] = {(): held_out if held_out is not None else np.array([-1])}
    pass_changed = False
    for step in range(k_max * (1 + _PASSES)):
        slot = step % k_max
        pass_changed = pass_changed and slot != 0
        new_groups: dict[tuple[int, ...], np.ndarray] = {}
        for schedule, rows in groups.items():
            current = schedule[slot] + 1 if slot < len(schedule) else 0
            others = schedule[:slot] + schedule[slot + 1 :]
            matrix, total = table.cached(others)
            values = total[None, :] if held_out is None else total[None, :] - matrix[rows]
            picks = _choose(values, current)
            for pick in np.unique(picks):
                chosen = others if pick == 0 else others[:slot] + (int(pick) - 1,) + others[slot:]
                members = rows if held_out is None else rows[picks == pick]
                pass_changed = pass_changed or chosen != schedule
                previous = new_groups.get(chosen)
                new_groups[chosen] = members if previous is None else np.concatenate([previous, members])
        groups = new_groups
        if slot == k_max - 1 and step >= k_max and not pass_changed:  # a full re-choosing pass changed nothing
            break
    return list(groups.items())


def _content_fn(content_scorer) -> Callable:
    """``content(episode, response_text, target_text)``: the PRS content scorer of the episode's task (bound to its
    question for a judge), cached per distinct pair."""
    scorers = content_scorer if content_scorer is not None else content_scorers()
    cache: dict[tuple, float] = {}

    def content(episode, text: str, target_text: str) -> float:
        scorer = scorers.get(episode.task) if isinstance(scorers, dict) else scorers
        binds = hasattr(scorer, "bind")
        key = (id(scorer), _question(episode) if binds else "", text, target_text)
        if key not in cache:
            fn = scorer.bind(key[1]) if binds else scorer
            value = (fn or _exact())(text, target_text)
            try:
                value = float(value)
            except (TypeError, ValueError):
                value = 0.0
            cache[key] = 0.0 if value != value else min(1.0, max(0.0, value))  # clamped, nan → 0 (docs/spec.md §4)
        return cache[key]

    return content


def _prefetch(content_scorer, episodes: Sequence, texts: list[str]) -> None:
    """A judge-backed content scorer is asked for every (candidate text, target) pair in one batch."""
    for episode in episodes:
        scorer = content_scorer.get(episode.task) if isinstance(content_scorer, dict) else content_scorer
        if hasattr(scorer, "prefetch"):
            pairs = dict.fromkeys(
                (_question(e), t.text) for e in episodes if e.task == episode.task for t in e.targets
            )
            scorer.prefetch([(q, g, text) for q, g in pairs for text in texts])
            return


def _exact():
    return exact_match


def fit_blind_prs(
    episodes: Sequence,
    reference: Sequence | None = None,
    alpha: float = ALPHA,
    content_scorer=None,
    max_responses: int = MAX_RESPONSES,
) -> BlindPRS:
    """Fit the blind schedule of every task of `episodes` for PRS-U and PRS-B (see the module docstring).

    Args:
        episodes (`Sequence[Episode]`): the evaluated episodes (those without targets are left out, as by PRS).
        reference (`Sequence[Episode]`, *optional*): the split to fit on (e.g. the training episodes); a task it
            lacks, or no reference at all, is fitted by leave-one-out on `episodes`.
        alpha (`float`, *optional*, defaults to `0.05`): the PRS decay rate of the evaluation.
        content_scorer (`Callable` or `dict`, *optional*): the evaluation's content scorer(s), as for `score_prs`.
        max_responses (`int`, *optional*, defaults to `MAX_RESPONSES`): the bound on K.
    """
    content = _content_fn(content_scorer)
    out = BlindPRS()
    scored = [e for e in episodes if e.targets]
    fit_pool = [e for e in reference or () if e.targets]
    for task in dict.fromkeys(e.task for e in scored):
        evaluated = [e for e in scored if e.task == task]
        fit_set = [e for e in fit_pool if e.task == task]
        out.fit[task] = "reference" if fit_set else "leave_one_out"
        fit_set = fit_set or evaluated
        cands = _Candidates(fit_set)
        _prefetch(content_scorer, [*fit_set, *evaluated], cands.texts)
        k_max = max(1, min(int(max_responses), max(len(e.targets) for e in fit_set)))
        for mode in MODES:
            table = _ScoreTable(fit_set, cands, mode, alpha, content)
            (schedule, _), *_ = _search(table, k_max, None)
            out.schedules[(task, mode)] = _schedule(task, mode, schedule, cands)
            if out.fit[task] == "reference":
                fitted = out.schedules[(task, mode)]
                out.predictions[mode].update({e.id: fitted.responses(e) for e in evaluated})
                continue
            found = _search(table, k_max, np.arange(len(evaluated)))
            out.distinct[(task, mode)] = len(found)
            for indices, rows in found:
                held_out = _schedule(task, mode, indices, cands)
                out.predictions[mode].update({evaluated[r].id: held_out.responses(evaluated[r]) for r in rows})
    return out


def _schedule(task: str, mode: str, indices: tuple[int, ...], cands: _Candidates) -> BlindSchedule:
    items = sorted((cands.item(i) for i in indices), key=lambda i: (i.kind, i.value, i.text))
    return BlindSchedule(task, mode, tuple(items))


def _mean100(scores: list[float]) -> float:
    """100 × the mean, rounded as `PRSReport` rounds its rows."""
    return round(100 * sum(scores) / len(scores), 4) if scores else 0.0


def blind_prs_summary(
    episodes: Sequence,
    reference: Sequence | None = None,
    alpha: float = ALPHA,
    content_scorer=None,
    max_responses: int = MAX_RESPONSES,
    per_episode: list | None = None,
) -> dict[str, Any]:
    """The blind row of a PRS evaluation: `fit_blind_prs`, then the blind responses scored as `score_prs` scores
    (`proactive_rewards.prs_score` with the evaluation's content scorers, 100 × the mean per group and overall),
    PRS-U from the PRS-U schedules and PRS-B from the PRS-B ones. With `per_episode` (a list), each scored
    episode's ``{"episode_id", "group", "prs_u", "prs_b"}`` (0-1, as `EpisodePRS.to_dict`) is appended to it, for
    paired intervals against a model's scores (docs/spec.md §15).

    Returns:
        `dict`: ``{"overall": {"prs_u", "prs_b", "num_episodes"}, "groups": {group: {...}}, "fit": {task: how},
        "schedules": {task: {"prs_u": schedule, "prs_b": schedule}}, "distinct_schedules": {...}}`` (× 100).
    """
    prs_score, content = _prs_score(), _content_fn(content_scorer)
    blind = fit_blind_prs(episodes, reference, alpha, content_scorer, max_responses)
    summary: dict[str, Any] = {"overall": {}, "groups": {}, "fit": blind.fit, "schedules": {}}
    scored = [e for e in episodes if e.targets]
    rows = {e.id: {"episode_id": e.id, "group": episode_group(e)} for e in scored}
    for mode in MODES:
        # `score_prs`'s per-episode scorer, for the one variant this schedule was fitted for (PRS-<mode>, penalised)
        scores: dict[str, list[float]] = {}
        for e in scored:
            score = prs_score(
                blind.predictions[mode].get(e.id, []),
                e.targets,
                mode=mode,
                alpha=alpha,
                content_scorer=lambda r, t, e=e: content(e, r, t),
            ).score
            scores.setdefault(episode_group(e), []).append(score)
            rows[e.id][f"prs_{mode.lower()}"] = score
        key = f"prs_{mode.lower()}"
        every = [x for group in scores.values() for x in group]
        summary["overall"].update({key: _mean100(every), "num_episodes": len(every)})
        for group, values in sorted(scores.items()):
            summary["groups"].setdefault(group, {"num_episodes": len(values)})[key] = _mean100(values)
    for (task, mode), schedule in blind.schedules.items():
        entry = summary["schedules"].setdefault(task, {})
        entry[f"prs_{mode.lower()}"] = {**schedule.to_dict(), "described": schedule.describe()}
    if blind.distinct:
        summary["distinct_schedules"] = {f"{t}/prs_{m.lower()}": n for (t, m), n in blind.distinct.items()}
    if per_episode is not None:
        per_episode.extend(rows.values())
    return summary
