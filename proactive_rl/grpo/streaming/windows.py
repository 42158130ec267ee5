"""Rollout windows: the training rows of streaming GRPO (docs/spec.md §8, P³I Appendix C).

A window ``[w0, w1]`` of an episode is where the policy acts, one decision per frame step. Everything before
``w0`` is a *prefix* rendered from ground truth and never optimised; it starts at ``w0 - prefix_s`` (bounded
history: accident, compositional, intervention, ...) or at 0 for the tasks whose `TaskSpec.history_from_start` is
set: the count tasks, which need the whole history to know how many events already happened (P³I: "For Atomic and
Event Type, the historical context begins at the start of the video"). Which reward scores a task's windows is its
`TaskSpec.reward` (`proactive_rewards.task_table`, docs/spec.md §7).

Windows are built around targets. A window opens ``lead_s`` before its first target and closes ``tail_s`` after
its last one; later targets join the same window while it stays within ``max_window_s`` seconds. This is how the
paper's compositional windows arise: a short start→end process fits one window (191 of its videos), a long one is
split into a start-oriented and an end-oriented window (86 videos → 172 windows).
"""

from __future__ import annotations

import bisect
import logging
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from proactive_eval.episodes import Episode, EpisodeError
from proactive_eval.video import sample_times
from proactive_rewards.registry import task_rewards
from proactive_rewards.task_table import get_task
from proactive_rewards.types import Target

logger = logging.getLogger(__name__)

# A target at τ is due at the first frame step with time >= τ (same rule as `proactive_rl.chat`).
_EPS = 1e-6


@dataclass(frozen=True)
class RolloutWindow:
    """One training row of streaming GRPO.

    Args:
        episode (`Episode`): the source episode.
        index (`int`): the window's number within its episode.
        start (`float`): ``w0``, the time of the first step the policy acts on.
        end (`float`): ``w1``, the time of the last step the policy acts on.
        prefix_start (`float`): the first frame time of the ground-truth prefix (``start`` = no prefix).
        targets (`tuple[Target, ...]`): the targets due inside the window (what the reward scores).
    """

    episode: Episode
    index: int
    start: float
    end: float
    prefix_start: float
    targets: tuple[Target, ...]

    @property
    def id(self) -> str:
        """A unique, readable name: ``{episode id}#{index}@{w0}-{w1}``."""
        return f"{self.episode.id}#{self.index}@{self.start:g}-{self.end:g}"

    @property
    def task(self) -> str:
        return self.episode.task

    def row(self) -> dict:
        """The dataset row TRL sees: ``prompt`` (the window id), and the reward columns of `proactive_rewards.trl`
        (``task``, ``targets``)."""
        targets = [
            {"time": t.time, "text": t.text, "window": list(t.window) if t.window else None} for t in self.targets
        ]
        return {"prompt": self.id, "task": self.task, "targets": targets}


def build_windows(
    episodes: Iterable[Episode],
    *,
    lead_s: float,
    tail_s: float,
    max_window_s: float,
    prefix_s: float,
    tasks: Iterable[str] | None = None,
) -> list[RolloutWindow]:
    """Rollout windows around the targets of each episode (docs/spec.md §8). The four lengths have their defaults in
    one place, `StreamingGRPOScriptArguments` (a recipe overrides them).

    Args:
        episodes (`Iterable[Episode]`): the source episodes. Episodes without targets give no window.
        lead_s (`float`): a window opens this long before its first target (the policy must also learn to stay
            silent before the event).
        tail_s (`float`): and closes this long after its last target (or after the end of that target's window), so
            late and repeated answers are seen and penalised.
        max_window_s (`float`): the longest window; targets are grouped greedily into windows of at most this length
            ("windows of several targets").
        prefix_s (`float`): the bounded ground-truth prefix before ``w0``; count tasks
            (``TaskSpec.history_from_start``: ``atomic``, ``event_type``) always start their prefix at 0.
        tasks (`Iterable[str]`, *optional*): keep only these tasks; defaults to the tasks with a trajectory reward
            (`proactive_rewards.task_rewards()`, registered tasks included).

    Returns:
        `list[RolloutWindow]`, in episode order, then time order.
    """
    for name, value in (("lead_s", lead_s), ("tail_s", tail_s), ("prefix_s", prefix_s)):
        if not (math.isfinite(value) and value >= 0):
            raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
    if not (math.isfinite(max_window_s) and max_window_s > 0):
        raise ValueError(f"max_window_s: must be a finite number > 0, got {max_window_s!r}")
    rewarded = task_rewards()
    keep = frozenset(rewarded if tasks is None else tasks)
    unknown = keep - set(rewarded)
    if unknown:
        raise ValueError(
            f"tasks: no streaming-GRPO reward for {sorted(unknown)}; expected some of {sorted(rewarded)} "
            f"(a task's reward is its TaskSpec.reward, see proactive_rewards.register_task)"
        )
    windows, skipped, left_out = [], 0, Counter()
    for episode in episodes:
        if episode.task not in keep:
            left_out[episode.task] += 1
            continue
        if not episode.targets:
            skipped += 1
            continue
        windows.extend(_windows_of(episode, lead_s, tail_s, max_window_s, prefix_s))
    if skipped:
        logger.info("build_windows: %d episode(s) without targets give no window", skipped)
    if left_out:  # e.g. pvqa episodes in a mixture: no reward scores them, so no window trains them
        why = "not in `tasks`" if tasks is not None else "no trajectory reward (TaskSpec.reward)"
        logger.warning(
            "build_windows: left out %s: %s",
            ", ".join(f"{n} {task} episode(s)" for task, n in sorted(left_out.items())),
            why,
        )
    return windows


def _windows_of(episode: Episode, lead_s, tail_s, max_window_s, prefix_s) -> list[RolloutWindow]:
    times = sample_times(episode.duration, episode.fps)
    targets = sorted(episode.targets, key=lambda t: t.time)
    due = [_due_step(episode, times, t.time) for t in targets]
    groups: list[list[int]] = []
    for i, target in enumerate(targets):
        if groups:
            first = targets[groups[-1][0]]
            w0 = max(0.0, first.time - lead_s)
            if _reach(target) + tail_s - w0 <= max_window_s + _EPS:
                groups[-1].append(i)
                continue
        groups.append([i])
    out = []
    for index, group in enumerate(groups):
        w0 = max(0.0, targets[group[0]].time - lead_s)
        w1 = max(_reach(t) for t in (targets[i] for i in group)) + tail_s
        w1 = min(w1, w0 + max_window_s)
        # snap to frame steps: the first step at or after w0, the last step at or before w1 (never before a target)
        k0 = min(bisect.bisect_left(times, w0 - _EPS), due[group[0]])
        k1 = max(bisect.bisect_right(times, w1 + _EPS) - 1, due[group[-1]])
        start, end = times[k0], times[k1]
        prefix_from = 0.0 if get_task(episode.task).history_from_start else max(0.0, start - prefix_s)
        kp = bisect.bisect_left(times, prefix_from - _EPS)
        inside = tuple(t for t, k in zip(targets, due) if k0 <= k <= k1)
        out.append(RolloutWindow(episode, index, start, end, times[kp], inside))
    return out


def _reach(target: Target) -> float:
    """How late a target can still be answered well: its time, or the end of its window."""
    return max(target.time, target.window[1]) if target.window else target.time


def _due_step(episode: Episode, times: list[float], time: float) -> int:
    k = bisect.bisect_left(times, time - _EPS)
    if k == len(times):
        raise EpisodeError(
            f"target at {time}s comes after the last frame step ({times[-1]}s)", record=episode.id, field="targets"
        )
    return k


def composition(windows: Iterable[RolloutWindow]) -> dict[str, int]:
    """Windows per task (the P³I RL set: accident 300, atomic 100, event_type 100, compositional 363 = 863)."""
    counts: dict[str, int] = {}
    for w in windows:
        counts[w.task] = counts.get(w.task, 0) + 1
    return dict(sorted(counts.items()))
