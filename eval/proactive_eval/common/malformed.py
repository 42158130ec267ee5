"""Malformed outputs (docs/spec.md §13): counted in every report, and a warning when most of a model's are.

A malformed output broke the state-token protocol: PRS counts it and credits it 0, PAUC never shows it to the
judge. A model whose outputs are mostly malformed therefore scores what a silent model scores (PAUC 25), which reads
like a number; the warning says it is not one.

An output at a time no stream has (before 0, or after the episode's video ends) is malformed too
(`flag_outside_video`): a predictions file that holds one was not written by a causal run over that video, so it is
counted, never scored as an answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proactive_rewards import Response, as_response

#: Slack on the video's end, in seconds, for times written with rounding.
END_TOLERANCE = 1e-6


def count_malformed(responses: Iterable) -> tuple[int, int]:
    """``(outputs, malformed outputs)`` of one episode's non-silent outputs."""
    items = [as_response(r) for r in responses]
    return len(items), sum(r.malformed for r in items)


def malformed_warning(row: dict[str, Any], what: str = "the model") -> str | None:
    """A one-line warning when most of the outputs a summary row counts (``outputs``, ``malformed_outputs``) are
    malformed, else `None`."""
    outputs, malformed = row.get("outputs") or 0, row.get("malformed_outputs") or 0
    if not outputs or 2 * malformed <= outputs:
        return None
    return (
        f"warning: {malformed} of {outputs} outputs of {what} are malformed (not </Silence> or </Response> + text, "
        "docs/spec.md §13), so its scores are those of a silent model; check its chat template and turn format"
    )


def video_end(episode) -> float:
    """The last time an output of `episode` can have: its duration, or a later annotated span end (a reply span
    that runs past the stated duration is the annotation's word on the video's length)."""
    ends = [episode.duration]
    for target in episode.targets:
        ends += [span[1] for span in (target.window, target.related) if span is not None]
    return max(ends)


def flag_outside_video(episode, responses: Iterable) -> tuple[list[Response], int]:
    """`responses` with every output outside ``[0, video_end(episode)]`` flagged malformed, and how many were.

    Example:

    ```python
    >>> from types import SimpleNamespace
    >>> episode = SimpleNamespace(duration=10.0, targets=[])
    >>> flagged, outside = flag_outside_video(episode, [Response(-1.0, "a"), Response(5.0, "b"), Response(99.0, "c")])
    >>> [r.malformed for r in flagged], outside
    ([True, False, True], 2)

    ```
    """
    end = video_end(episode) + END_TOLERANCE
    out, outside = [], 0
    for r in map(as_response, responses):
        if not 0 <= r.time <= end:
            outside += 1
            r = Response(r.time, r.text, True)
        out.append(r)
    return out, outside


def matched_outputs(episodes, predictions: dict) -> tuple[dict[str, list[Response]], int]:
    """The predictions of `episodes` only (episode id → responses, each outside its video flagged malformed by
    `flag_outside_video`), and how many were outside."""
    matched, outside = {}, 0
    for episode in episodes:
        if episode.id in predictions:
            matched[episode.id], n = flag_outside_video(episode, predictions[episode.id])
            outside += n
    return matched, outside
