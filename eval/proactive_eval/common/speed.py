"""Speed beside accuracy: frames per second, per-frame latency (median / p95) and the time from an event to the
response, one set of helpers for every benchmark's report (docs/evaluation.md).

A streaming run times each policy step (`time.perf_counter` around it, `proactive_eval.streaming.run_episode`);
the seconds of a step that decided several frames at once (a look-ahead call, a batched lockstep step) are divided
evenly among those frames. Predictions scored without a model run have no timings: their frames/s and latency
are `None`, shown as ``n/a (no model run)``; the event → response time is computed from the predictions alone.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Iterable, Sequence
from typing import Any

NO_RUN = "n/a (no model run)"
# the per-row keys `speed_row` writes, in the order of the report's columns
SPEED_KEYS = ("frames_per_s", "latency_median_s", "latency_p95_s", "event_to_response_median_s")


def recorded_seconds(value: Any) -> bool:
    """Whether `value`, a time a results file recorded (a call's ``cost``, an answer's time), is a finite number
    of seconds >= 0 (not a bool).

    Example:
        >>> [recorded_seconds(v) for v in (0.5, -1, True, float("nan"), "2")]
        [True, False, False, False, False]
    """
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def latency_summary(costs: Iterable) -> dict[str, Any]:
    """Median and p95 (nearest rank) of per-call seconds; `None` without any (non-numbers are skipped)."""
    costs = sorted(c for c in costs if isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c))
    if not costs:
        return {"calls": 0, "latency_median_s": None, "latency_p95_s": None}
    p95 = costs[min(len(costs) - 1, max(0, -(-95 * len(costs) // 100) - 1))]
    return {"calls": len(costs), "latency_median_s": statistics.median(costs), "latency_p95_s": p95}


def event_to_response(episode, responses: Sequence) -> list[float]:
    """Seconds from each answered target of `episode` to its response.

    A target at ``τ`` is answered by the first well-formed response at or after ``τ`` and before the next target's
    time (the last target: before the episode's end); unanswered targets give nothing.

    Example:
        >>> from types import SimpleNamespace as NS
        >>> ep = NS(duration=10.0, targets=[NS(time=2.0), NS(time=5.0), NS(time=8.0)])
        >>> event_to_response(ep, [NS(time=3.0, malformed=False), NS(time=4.0, malformed=False)])
        [1.0]
    """
    times = sorted(float(r.time) for r in responses if not getattr(r, "malformed", False))
    targets = sorted(float(t.time) for t in episode.targets)
    out = []
    for i, tau in enumerate(targets):
        end = targets[i + 1] if i + 1 < len(targets) else float(episode.duration)
        first = next((t for t in times if tau <= t < end), None)
        if first is not None:
            out.append(first - tau)
    return out


def speed_row(
    episodes: Sequence, predictions: dict[str, Sequence], step_seconds: dict[str, Sequence[float]] | None
) -> dict[str, Any]:
    """The speed keys of one report row over `episodes`: ``frames``, ``seconds``, ``frames_per_s``,
    ``latency_median_s``, ``latency_p95_s`` (per frame) and ``event_to_response_median_s`` (over answered
    targets). Without `step_seconds` (no model run) the first five are `None`."""
    delays = [d for e in episodes for d in event_to_response(e, predictions.get(e.id, ()))]
    row: dict[str, Any] = {"event_to_response_median_s": round(statistics.median(delays), 4) if delays else None}
    if step_seconds is None:
        return {**dict.fromkeys(("frames", "seconds", "frames_per_s", "latency_median_s", "latency_p95_s")), **row}
    costs = [c for e in episodes for c in step_seconds.get(e.id, ())]
    latency = latency_summary(costs)
    seconds = sum(costs)
    row.update(
        frames=len(costs),
        seconds=round(seconds, 6),
        frames_per_s=round(len(costs) / seconds, 4) if seconds > 0 else None,
        latency_median_s=latency["latency_median_s"],
        latency_p95_s=latency["latency_p95_s"],
    )
    return row


def add_speed(
    summary: dict[str, Any],
    episodes: Sequence,
    predictions: dict[str, Sequence],
    step_seconds: dict[str, Sequence[float]] | None,
    group_of,
) -> dict[str, Any]:
    """Write `speed_row` into the ``overall`` row and every group row of a metric's `summary` (in place, also
    returned); `group_of(episode)` names an episode's row."""
    summary["overall"].update(speed_row(episodes, predictions, step_seconds))
    for name, row in summary["groups"].items():
        row.update(speed_row([e for e in episodes if group_of(e) == name], predictions, step_seconds))
    summary["timed"] = step_seconds is not None
    return summary


def speed_cells(row: dict[str, Any], timed: bool) -> list[Any]:
    """The report's speed cells of a summary row, ``n/a (no model run)`` where nothing was timed."""
    cells: list[Any] = [row.get(k) for k in SPEED_KEYS]
    cells[1:3] = [c if c is None else f"{c:.3f}" for c in cells[1:3]]  # milliseconds stay visible
    if not timed:
        cells[:3] = [NO_RUN] * 3
    return cells


def step_speed(costs: Sequence[float] | None) -> dict[str, Any]:
    """``steps``, ``steps_per_s`` and per-step ``latency_median_s`` / ``latency_p95_s`` of an MCQA run (one step =
    one answer of the policy); all `None` when nothing was timed (`costs` is `None`)."""
    if costs is None:
        return dict.fromkeys(("steps", "steps_per_s", "latency_median_s", "latency_p95_s"))
    latency, seconds = latency_summary(costs), sum(costs)
    return {
        "steps": len(costs),
        "steps_per_s": round(len(costs) / seconds, 4) if seconds > 0 else None,
        "latency_median_s": latency["latency_median_s"],
        "latency_p95_s": latency["latency_p95_s"],
    }


def timed(fn, seconds: list[float]):
    """`fn`, appending the wall seconds of each call to `seconds`."""

    def call(*args, **kwargs):
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds.append(time.perf_counter() - start)

    return call
