"""StreamingBench Proactive Output scores, equal to the authors' ``count.py --task proactive`` (docs/streamingbench.md).

The results file is the question file whose questions gained the model's ``{"answered", "dialog_history"}`` under
its name. Only the **last** entry of ``dialog_history`` is read: its ``time`` is right when within ±2 s (inclusive)
of ``ground_truth_time_stamp``, its ``content`` is right when the time is right and ``ground_truth_output`` is a
case-sensitive substring of it. ``answered`` is not read (a model that never said "yes" is judged by its last poll,
at ground truth + 4 s: late). Questions without the model's key are left out; per ``task_type``, ``time_accuracy``
and ``answer_accuracy`` are fractions of the questions counted.

Where the authors' script would crash (an empty history, a null output, a non-numeric time, a missing field), the
question is counted and scored wrong on the part that cannot be read, and counted in ``malformed``. A time written
as the question file writes its own (``"H:MM:SS"``) is read as those seconds; a time outside the official window
(from ``time_stamp`` to the last poll at ground truth + 4 s: before the question was asked, or after the video the
protocol shows), not finite, or a bool, is scored wrong and counted in ``malformed``.
"""

from __future__ import annotations

import math
import re
from typing import Any

TIME_TOLERANCE = 2  # the official count: |last time - ground truth| <= 2 s
POLL_AFTER_GROUND_TRUTH = 4  # the official last poll is at ground truth + 4 s
_STAMP = re.compile(r"\s*[0-9]{1,7}(:[0-9]{1,2}){1,2}\s*")


def hms_seconds(stamp: str) -> int:
    """``"H:MM:SS"`` (or ``MM:SS``, ``SS``) → seconds, as the official scripts read it (integer fields only).

    Example:
        >>> hms_seconds("00:10:25")
        625
    """
    return sum(int(x) * 60**i for i, x in enumerate(reversed(stamp.split(":"))))


def response_time(value: Any) -> float | None:
    """The seconds of a dialog entry's ``time``: a finite number, or ``"H:MM:SS"`` / ``"MM:SS"`` text as the
    question file writes its times; None for anything else (a malformed output).

    Example:
        >>> response_time(29), response_time("00:00:29"), response_time("29"), response_time(float("nan"))
        (29, 29, None, None)
    """
    if isinstance(value, str) and _STAMP.fullmatch(value):
        return hms_seconds(value.strip())
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return value
    return None


def po_question_score(question: dict, model: str) -> tuple[bool, bool, bool] | None:
    """``(time_correct, answer_correct, malformed)`` of one question, or None when it has no `model` output."""
    if model not in question:
        return None
    truth = hms_seconds(question["ground_truth_time_stamp"])
    output = question[model]
    try:
        last = output["dialog_history"][-1]
        said, content = response_time(last["time"]), last["content"]
    except (KeyError, IndexError, TypeError):
        return False, False, True
    if said is None or not hms_seconds(question["time_stamp"]) <= said <= truth + POLL_AFTER_GROUND_TRUTH:
        return False, False, True
    if not -TIME_TOLERANCE <= said - truth <= TIME_TOLERANCE:
        return False, False, False
    try:
        return True, question["ground_truth_output"] in content, False
    except TypeError:  # a null (or non-text) output
        return True, False, True


def score_streamingbench_po(entries: list[dict], model: str) -> dict[str, Any]:
    """The official stats of a Proactive Output results file for `model` (its key in the questions).

    Returns:
        `dict`: ``tasks`` (task type → ``total``, ``time_correct``, ``time_accuracy``, ``answer_correct``,
        ``answer_accuracy``, in the file's order), ``total``, ``malformed`` and ``left_out`` (questions without
        the model's output).
    """
    tasks: dict[str, dict[str, Any]] = {}
    total = malformed = left_out = 0
    for entry in entries:
        for question in entry["questions"]:
            scored = po_question_score(question, model)
            if scored is None:
                left_out += 1
                continue
            time_ok, answer_ok, bad = scored
            stats = tasks.setdefault(str(question["task_type"]), {"total": 0, "time_correct": 0, "answer_correct": 0})
            stats["total"] += 1
            stats["time_correct"] += time_ok
            stats["answer_correct"] += answer_ok
            total += 1
            malformed += bad
    for stats in tasks.values():
        stats["time_accuracy"] = stats["time_correct"] / stats["total"]
        stats["answer_accuracy"] = stats["answer_correct"] / stats["total"]
    return {"tasks": tasks, "total": total, "malformed": malformed, "left_out": left_out}
