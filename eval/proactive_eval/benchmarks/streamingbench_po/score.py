"""``proactive-eval score --benchmark streamingbench_po``: the official numbers of a StreamingBench Proactive Output
results file, its blind floor and speed (docs/streamingbench.md).

    proactive-eval score --benchmark streamingbench_po --annotations questions_proactive.json \\
        --predictions MiniCPM-V_proactive.json --out r/

``DIR/results.json`` holds the official time and answer accuracy per task type, the blind floor (the best fixed
delay, never looking, scored by the same scorer), the coverage, what the results file held that was not scored
(``ignored``) and, where the results file records call times (``cost``, seconds), the per-call latency and the time
from the event to the response. The question file is the only source of the gold: the results file gives outputs,
matched to its questions (`proactive_eval.benchmarks.streamingbench_po.match`; docs/evaluation.md, "What the scorers
trust").
"""

from __future__ import annotations

import statistics
from collections import Counter
from typing import Any

from proactive_eval.benchmarks.streamingbench_po.format import StreamingBenchPO, check_po_entries
from proactive_eval.benchmarks.streamingbench_po.match import match_po
from proactive_eval.benchmarks.streamingbench_po.metric import (
    POLL_AFTER_GROUND_TRUTH,
    hms_seconds,
    score_streamingbench_po,
)
from proactive_eval.common.speed import latency_summary, recorded_seconds
from proactive_eval.common.stream_files import shown
from proactive_eval.errors import InputError


def po_blind_results(entries: list[dict], delay: int, model: str = "blind") -> list[dict]:
    """Answers that never look: "yes" at the poll `delay` seconds after the question, then the output quoted in
    the poll's own query (the official query names it); a question whose polls end first is never answered."""
    out = []
    for entry in entries:
        questions = []
        for q in entry["questions"]:
            start = hms_seconds(q["time_stamp"])
            last = hms_seconds(q["ground_truth_time_stamp"]) + POLL_AFTER_GROUND_TRUTH
            said = start + delay
            if said <= last:
                history = [{"role": "assistant", "content": q["ground_truth_output"], "time": said}]
                output = {"answered": said, "dialog_history": history}
            else:
                output = {"answered": False, "dialog_history": [{"role": "assistant", "content": "No", "time": last}]}
            questions.append({**q, model: output})
        out.append({**entry, "questions": questions})
    return out


def po_blind_floor(entries: list[dict]) -> dict[str, Any]:
    """The fixed delay with the best time accuracy (ties: the shortest), and its scores.

    A blind answer `d` seconds after a question asked at ``s`` and due at ``g`` is on time when
    ``|s + d - g| <= 2`` (its text is the expected output, so its answer is right exactly when its time is), so
    the best delay is found by counting, for each question, the delays ``g - s - 2 .. g - s + 2`` (at least 1)
    that put it on time; the chosen delay is then scored by the official scorer. Equal to trying every delay
    from 1 s to the longest span + 4 s (``tests/eval/test_stream_bench_trust.py``), at any span length.
    """
    spans = [
        hms_seconds(q["ground_truth_time_stamp"]) - hms_seconds(q["time_stamp"])
        for e in entries
        for q in e["questions"]
    ]
    on_time: Counter = Counter(d for s in spans for d in range(max(1, s - 2), s + 3))
    best = max(on_time.values(), default=0)
    delay = min((d for d, n in on_time.items() if n == best), default=1)
    stats = score_streamingbench_po(po_blind_results(entries, delay), "blind")
    tasks = {k: {m: v[m] for m in ("time_accuracy", "answer_accuracy")} for k, v in stats["tasks"].items()}
    return {"delay_s": delay, "tasks": tasks}


def _po_speed(entries: list[dict], model: str) -> dict[str, Any]:
    costs, delays = [], []
    for entry in entries:
        for q in entry["questions"]:
            output = q.get(model)
            if not isinstance(output, dict) or not isinstance(output.get("dialog_history"), list):
                continue
            costs += [
                t.get("cost") for t in output["dialog_history"] if isinstance(t, dict) and t.get("role") != "user"
            ]
            answered = output.get("answered")
            if recorded_seconds(answered):
                delays.append(answered - hms_seconds(q["ground_truth_time_stamp"]))
    speed = latency_summary(c for c in costs if recorded_seconds(c))
    speed["event_to_response_median_s"] = statistics.median(delays) if delays else None
    return speed


def streamingbench_summary(
    entries: list[dict], results: Any, model: str | None = None, file: str = "predictions"
) -> dict[str, Any]:
    """The ``results.json`` content of a Proactive Output results list against the question file's `entries`: the
    results are matched to the questions (`match_po`), and only the question file's gold is scored.

    Raises:
        `EpisodeError`: the question file or the results file (named `file`) break their shape.
        `InputError`: no model, several models without `model`, or a `model` the file does not hold.
    """
    check_po_entries(entries, "annotations")
    matched = match_po(entries, results, file)
    names = matched.models
    if model is None:
        if len(names) != 1:
            raise InputError(f"{file}: name the model with --model (its outputs' key); found {names or 'none'}")
        model = names[0]
    elif names and model not in names:
        raise InputError(f"{file}: --model {shown(model)!r} holds no output here; found {names}")
    stats = score_streamingbench_po(matched.results, model)
    tasks = {k: {m: v[m] for m in ("time_accuracy", "answer_accuracy")} for k, v in stats["tasks"].items()}
    report = {"benchmark": "streamingbench_po", "model": model, "tasks": tasks, "stats": stats["tasks"]}
    expected = sum(len(e["questions"]) for e in entries)
    report["coverage"] = {"expected": expected, "answered": stats["total"], "missing": expected - stats["total"]}
    report["malformed"] = stats["malformed"]
    report["ignored"] = {k: v for k, v in matched.ignored.items() if k != "extra_probes"}
    report["blind_floor"] = po_blind_floor(entries)
    report["speed"] = _po_speed(matched.results, model)
    return report


def streamingbench_blind_floor(bench: StreamingBenchPO) -> dict[str, Any]:
    """`po_blind_floor` of the loaded question file."""
    return po_blind_floor(bench.entries)


def po_summary(
    bench: StreamingBenchPO, results: Any, file: str = "predictions", model: str | None = None
) -> dict[str, Any]:
    """`streamingbench_summary` against the loaded question file."""
    return streamingbench_summary(bench.entries, results, model, file)


def po_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """What a training callback logs of a `streamingbench_summary` (with the run's speed): ``<task>/time_accuracy``
    and ``<task>/answer_accuracy`` per task type, and frames per second (0 without a run)."""
    metrics = {}
    for task, stats in summary["tasks"].items():
        metrics[f"{task}/time_accuracy"] = stats["time_accuracy"]
        metrics[f"{task}/answer_accuracy"] = stats["answer_accuracy"]
    metrics["frames_per_s"] = summary.get("speed", {}).get("frames_per_s") or 0.0
    return metrics
