"""``proactive-eval score --benchmark ovo-bench|streamingbench-po``: the official numbers, a blind floor, speed.

    proactive-eval score --benchmark ovo-bench --annotations ovo_bench_new.json --predictions results.json --out r/
    proactive-eval score --benchmark streamingbench-po --annotations questions_proactive.json \\
        --predictions MiniCPM-V_proactive.json --out r/

``DIR/results.json`` holds the official numbers (docs/ovo_bench.md, docs/streamingbench.md), the blind floor (the
best answerer that never looks, fitted on the annotations and scored by the same scorer), the coverage (items of
the annotations without an output), what the results file held that was not scored (``ignored``) and, where the
results file records call times (``cost``, seconds), the per-call latency and the time from the event to the
response. The annotations are the only source of the gold: the results file gives responses, matched to the
annotations by `proactive_eval.stream_bench_match` (docs/evaluation.md, "What the scorers trust").
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from proactive_eval.errors import InputError
from proactive_eval.formats.ovo_bench import FORWARD_TASKS, check_ovo_records, load_ovo_bench
from proactive_eval.formats.stream_bench_files import read_json, shown
from proactive_eval.formats.streamingbench import (
    POLL_AFTER_GROUND_TRUTH,
    check_po_entries,
    hms_seconds,
    load_streamingbench_po,
)
from proactive_eval.metrics.ovo_bench import CATEGORY_NAMES, score_ovo_bench
from proactive_eval.metrics.streamingbench import score_streamingbench_po
from proactive_eval.speed import latency_summary
from proactive_eval.stream_bench_match import match_ovo, match_po

BENCHMARKS = ("ovo-bench", "streamingbench-po")


# ---- OVO-Bench ---------------------------------------------------------------------------------------


def ovo_blind_results(records: list[dict]) -> dict[str, list]:
    """The best never-looking answers, fitted on `records`: per multiple-choice task its most frequent gold
    letter, for REC the most frequent count, for SSR / CRR per task the more frequent of Yes / No."""
    letters: dict[str, Counter] = {}
    counts: Counter = Counter()
    kinds: dict[str, Counter] = {}
    for r in records:
        if r["task"] in FORWARD_TASKS:
            for p in r["test_info"]:
                if r["task"] == "REC":
                    counts[str(p["count"])] += 1
                else:
                    kinds.setdefault(r["task"], Counter())["No" if p["type"] == 0 else "Yes"] += 1
        else:
            letters.setdefault(r["task"], Counter())[chr(65 + r["gt"])] += 1
    out: dict[str, list] = {name: [] for name in CATEGORY_NAMES}
    for r in records:
        if r["task"] in FORWARD_TASKS:
            if r["task"] == "REC":
                answer = counts.most_common(1)[0][0]
            else:
                answer = kinds[r["task"]].most_common(1)[0][0]
            probes = [{**p, "response": answer} for p in r["test_info"]]
            out["forward"].append({**r, "test_info": probes})
        else:
            name = "backward" if r["task"] in ("EPM", "ASI", "HLD") else "realtime"
            answer = letters[r["task"]].most_common(1)[0][0]
            out[name].append({"id": r["id"], "task": r["task"], "response": answer, "ground_truth": chr(65 + r["gt"])})
    return out


def ovo_bench_summary(records: list[dict], results: Any, file: str = "predictions") -> dict[str, Any]:
    """The ``results.json`` content of an OVO-Bench results object against the annotation `records`: the results
    are matched to the records by id (`match_ovo`), and only the records' gold is scored.

    Raises:
        `EpisodeError`: the annotations or the results file (named `file`) break their shape.
    """
    check_ovo_records(records, "annotations")
    matched = match_ovo(records, results, file)
    report = {"benchmark": "ovo-bench", **score_ovo_bench(matched.results)}
    expected = sum(len(r["test_info"]) if r["task"] in FORWARD_TASKS else 1 for r in records)
    report["coverage"] = {"expected": expected, "answered": matched.answered, "missing": expected - matched.answered}
    report["ignored"] = matched.ignored
    floor = score_ovo_bench(ovo_blind_results(records))
    report["blind_floor"] = {k: floor[k] for k in ("tasks", "categories", "overall")}
    report["speed"] = latency_summary(c for c in matched.costs if _seconds(c))
    return report


def ovo_bench_report(annotations: str | Path, predictions: str | Path, video_root=None) -> dict[str, Any]:
    """The ``results.json`` of an OVO-Bench results file (see the module docstring)."""
    bench = load_ovo_bench(annotations, video_root=video_root)
    return ovo_bench_summary(bench.records, read_json(predictions, "--predictions"), shown(predictions))


# ---- StreamingBench Proactive Output -----------------------------------------------------------------


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


def _seconds(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


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
            if _seconds(answered):
                delays.append(answered - hms_seconds(q["ground_truth_time_stamp"]))
    speed = latency_summary(c for c in costs if _seconds(c))
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
    report = {"benchmark": "streamingbench-po", "model": model, "tasks": tasks, "stats": stats["tasks"]}
    expected = sum(len(e["questions"]) for e in entries)
    report["coverage"] = {"expected": expected, "answered": stats["total"], "missing": expected - stats["total"]}
    report["malformed"] = stats["malformed"]
    report["ignored"] = {k: v for k, v in matched.ignored.items() if k != "extra_probes"}
    report["blind_floor"] = po_blind_floor(entries)
    report["speed"] = _po_speed(matched.results, model)
    return report


def streamingbench_report(
    annotations: str | Path, predictions: str | Path, model: str | None = None, video_root=None
) -> dict[str, Any]:
    """The ``results.json`` of a StreamingBench Proactive Output results file (see the module docstring)."""
    bench = load_streamingbench_po(annotations, video_root=video_root)
    return streamingbench_summary(bench.entries, read_json(predictions, "--predictions"), model, shown(predictions))


# ---- entry point -------------------------------------------------------------------------------------


def score_benchmark(
    benchmark: str, annotations, predictions, out=None, model: str | None = None, video_root=None
) -> dict[str, Any]:
    """Score one of `BENCHMARKS`; write ``out/results.json`` when `out` is given."""
    if benchmark not in BENCHMARKS:
        raise InputError(f"unknown benchmark {benchmark!r}; expected one of {', '.join(BENCHMARKS)}")
    if annotations is None:
        raise InputError("--annotations is required with --benchmark (the official annotation file)")
    if benchmark == "ovo-bench":
        report = ovo_bench_report(annotations, predictions, video_root)
    else:
        report = streamingbench_report(annotations, predictions, model, video_root)
    report["meta"] = {"annotations": str(annotations), "predictions": str(predictions)}
    if out is not None:
        path = Path(out) / "results.json"
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            report["meta"]["results_json"] = str(path)
            path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        except OSError as err:
            raise InputError(f"--out: cannot write {shown(path)}: {err.strerror or err}") from None
    return report


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def report_text(report: dict[str, Any]) -> str:
    """A short table: the scores beside the blind floor, then the coverage and the speed."""
    lines = [f"{report['benchmark']}: score | blind floor"]
    floor = report["blind_floor"]["tasks"]
    for task, value in report["tasks"].items():
        if isinstance(value, dict):
            f = floor.get(task, {})
            lines.append(
                f"  {task}: time {value['time_accuracy']:.4f} | {f.get('time_accuracy', float('nan')):.4f}; "
                f"answer {value['answer_accuracy']:.4f} | {f.get('answer_accuracy', float('nan')):.4f}"
            )
        else:
            lines.append(f"  {task}: {value:.2f} | {_pct(floor.get(task))}")
    for name, value in (report.get("categories") or {}).items():
        lines.append(f"  {name}: {_pct(value)} | {_pct(report['blind_floor']['categories'][name])}")
    if "overall" in report:
        lines.append(f"  overall: {_pct(report['overall'])} | {_pct(report['blind_floor']['overall'])}")
    cov = report["coverage"]
    lines.append(f"coverage: {cov['answered']}/{cov['expected']} answered; malformed outputs: {report['malformed']}")
    ignored = {k: v for k, v in (report.get("ignored") or {}).items() if v}
    if ignored:
        said = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in ignored.items())
        lines.append(f"ignored in the results file (not scored; the gold is the annotations'): {said}")
    speed = report["speed"]
    if speed["calls"]:
        lines.append(
            f"speed: {speed['calls']} calls, latency median {speed['latency_median_s']:.3f} s, "
            f"p95 {speed['latency_p95_s']:.3f} s"
        )
    if (report.get("meta") or {}).get("results_json"):
        lines.append(f"wrote {report['meta']['results_json']}")
    return "\n".join(lines)
