"""``proactive-eval score --benchmark ovo-bench|streamingbench-po``: the official numbers, a blind floor, speed.

    proactive-eval score --benchmark ovo-bench --annotations ovo_bench_new.json --predictions results.json --out r/
    proactive-eval score --benchmark streamingbench-po --annotations questions_proactive.json \\
        --predictions MiniCPM-V_proactive.json --out r/

``DIR/results.json`` holds the official numbers (docs/ovo_bench.md, docs/streamingbench.md), the blind floor (the
best answerer that never looks, fitted on the annotations and scored by the same scorer), the coverage (items of
the annotations without an output) and, where the results file records call times (``cost``, seconds), the
per-call latency and the time from the event to the response.
"""

from __future__ import annotations

import copy
import json
import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from proactive_eval.errors import InputError
from proactive_eval.formats.ovo_bench import FORWARD_TASKS, load_ovo_bench
from proactive_eval.formats.streamingbench import (
    POLL_AFTER_GROUND_TRUTH,
    hms_seconds,
    load_streamingbench_po,
    model_keys,
)
from proactive_eval.metrics.ovo_bench import CATEGORY_NAMES, score_ovo_bench
from proactive_eval.metrics.streamingbench import score_streamingbench_po
from proactive_eval.records import read_text
from proactive_eval.speed import latency_summary

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


def _ovo_items(results: dict) -> tuple[set, list[float]]:
    """The (id, probe) keys answered in a results file, and its recorded call times."""
    keys, costs = set(), []
    for name in CATEGORY_NAMES:
        for item in results.get(name) or []:
            if not isinstance(item, dict):
                continue
            if name == "forward" and isinstance(item.get("test_info"), list):
                for j, p in enumerate(item["test_info"]):
                    if isinstance(p, dict) and "response" in p:
                        keys.add((item.get("id"), j))
                        costs.append(p.get("cost"))
            elif "response" in item:
                keys.add((item.get("id"), None))
                costs.append(item.get("cost"))
    return keys, costs


def ovo_bench_summary(records: list[dict], results: dict) -> dict[str, Any]:
    """The ``results.json`` content of an OVO-Bench results object against the annotation `records`."""
    if not isinstance(results, dict) or not any(k in results for k in CATEGORY_NAMES):
        raise InputError("expected the official {'backward', 'realtime', 'forward'} results object")
    report = {"benchmark": "ovo-bench", **score_ovo_bench(results)}
    expected = {(r["id"], j) for r in records if r["task"] in FORWARD_TASKS for j in range(len(r["test_info"]))}
    expected |= {(r["id"], None) for r in records if r["task"] not in FORWARD_TASKS}
    answered, costs = _ovo_items(results)
    missing = len(expected - answered)
    report["coverage"] = {"expected": len(expected), "answered": len(expected) - missing, "missing": missing}
    floor = score_ovo_bench(ovo_blind_results(records))
    report["blind_floor"] = {k: floor[k] for k in ("tasks", "categories", "overall")}
    report["speed"] = latency_summary(costs)
    return report


def ovo_bench_report(annotations: str | Path, predictions: str | Path, video_root=None) -> dict[str, Any]:
    """The ``results.json`` of an OVO-Bench results file (see the module docstring)."""
    bench = load_ovo_bench(annotations, video_root=video_root)
    try:
        return ovo_bench_summary(bench.records, _read_json(predictions))
    except InputError as err:
        raise InputError(f"{predictions}: {err}") from None


# ---- StreamingBench Proactive Output -----------------------------------------------------------------


def po_blind_results(entries: list[dict], delay: int, model: str = "blind") -> list[dict]:
    """Answers that never look: "yes" at the poll `delay` seconds after the question, then the output quoted in
    the poll's own query (the official query names it); a question whose polls end first is never answered."""
    out = copy.deepcopy(entries)
    for entry in out:
        for q in entry["questions"]:
            start = hms_seconds(q["time_stamp"])
            last = hms_seconds(q["ground_truth_time_stamp"]) + POLL_AFTER_GROUND_TRUTH
            said = start + delay
            if said <= last:
                history = [{"role": "assistant", "content": q["ground_truth_output"], "time": said}]
                q[model] = {"answered": said, "dialog_history": history}
            else:
                q[model] = {
                    "answered": False,
                    "dialog_history": [{"role": "assistant", "content": "No", "time": last}],
                }
    return out


def po_blind_floor(entries: list[dict]) -> dict[str, Any]:
    """The fixed delay with the best time accuracy (ties: the shortest), and its scores."""
    spans = [
        hms_seconds(q["ground_truth_time_stamp"]) - hms_seconds(q["time_stamp"])
        for e in entries
        for q in e["questions"]
    ]
    best = None
    for delay in range(1, max(spans + [0]) + 5):
        stats = score_streamingbench_po(po_blind_results(entries, delay), "blind")
        correct = sum(s["time_correct"] for s in stats["tasks"].values())
        if best is None or correct > best[0]:
            best = (correct, delay, stats)
    if best is None:
        return {"delay_s": None, "tasks": {}}
    tasks = {k: {m: v[m] for m in ("time_accuracy", "answer_accuracy")} for k, v in best[2]["tasks"].items()}
    return {"delay_s": best[1], "tasks": tasks}


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
            if isinstance(answered, (int, float)) and not isinstance(answered, bool):
                delays.append(answered - hms_seconds(q["ground_truth_time_stamp"]))
    speed = latency_summary(costs)
    speed["event_to_response_median_s"] = statistics.median(delays) if delays else None
    return speed


def streamingbench_summary(entries: list[dict], results: list, model: str | None = None) -> dict[str, Any]:
    """The ``results.json`` content of a Proactive Output results list against the question file's `entries`."""
    if not isinstance(results, list) or not all(isinstance(e, dict) and "questions" in e for e in results):
        raise InputError("expected the official question file with the model's outputs in it")
    names = model_keys(results)
    if model is None:
        if len(names) != 1:
            raise InputError(f"name the model with --model (its outputs' key); found {names or 'none'}")
        model = names[0]
    stats = score_streamingbench_po(results, model)
    tasks = {k: {m: v[m] for m in ("time_accuracy", "answer_accuracy")} for k, v in stats["tasks"].items()}
    report = {"benchmark": "streamingbench-po", "model": model, "tasks": tasks, "stats": stats["tasks"]}
    expected = sum(len(e["questions"]) for e in entries)
    report["coverage"] = {"expected": expected, "answered": stats["total"], "missing": expected - stats["total"]}
    report["malformed"] = stats["malformed"]
    report["blind_floor"] = po_blind_floor(entries)
    report["speed"] = _po_speed(results, model)
    return report


def streamingbench_report(
    annotations: str | Path, predictions: str | Path, model: str | None = None, video_root=None
) -> dict[str, Any]:
    """The ``results.json`` of a StreamingBench Proactive Output results file (see the module docstring)."""
    bench = load_streamingbench_po(annotations, video_root=video_root)
    try:
        return streamingbench_summary(bench.entries, _read_json(predictions), model)
    except InputError as err:
        raise InputError(f"{predictions}: {err}") from None


# ---- entry point -------------------------------------------------------------------------------------


def _read_json(path: str | Path) -> Any:
    if not Path(path).is_file():
        raise InputError(f"predictions file not found: {path}")
    try:
        return json.loads(read_text(Path(path)))
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: invalid JSON: {err}") from None


def score_benchmark(
    benchmark: str, annotations, predictions, out=None, model: str | None = None, video_root=None
) -> dict[str, Any]:
    """Score one of `BENCHMARKS`; write ``out/results.json`` when `out` is given."""
    if benchmark not in BENCHMARKS:
        raise InputError(f"unknown benchmark {benchmark!r}; expected one of {', '.join(BENCHMARKS)}")
    if annotations is None or not Path(annotations).is_file():
        raise InputError(f"--annotations: file not found: {annotations} (the official annotation file)")
    if benchmark == "ovo-bench":
        report = ovo_bench_report(annotations, predictions, video_root)
    else:
        report = streamingbench_report(annotations, predictions, model, video_root)
    report["meta"] = {"annotations": str(annotations), "predictions": str(predictions)}
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        (Path(out) / "results.json").write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
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
    speed = report["speed"]
    if speed["calls"]:
        lines.append(
            f"speed: {speed['calls']} calls, latency median {speed['latency_median_s']:.3f} s, "
            f"p95 {speed['latency_p95_s']:.3f} s"
        )
    return "\n".join(lines)
