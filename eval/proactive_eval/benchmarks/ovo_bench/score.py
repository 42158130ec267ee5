"""``proactive-eval score --benchmark ovo_bench``: the official numbers of an OVO-Bench results object, its blind
floor and speed (docs/ovo_bench.md).

    proactive-eval score --benchmark ovo_bench --annotations ovo_bench_new.json --predictions results.json --out r/

``DIR/results.json`` holds the official numbers, the blind floor (the best answerer that never looks, fitted on the
annotations and scored by the same scorer), the coverage (items of the annotations without an output), what the
results file held that was not scored (``ignored``) and, where the results file records call times (``cost``,
seconds), the per-call latency. The annotations are the only source of the gold: the results file gives responses,
matched to the annotations by id (`proactive_eval.benchmarks.ovo_bench.match`; docs/evaluation.md, "What the
scorers trust").
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from proactive_eval.benchmarks.ovo_bench.format import FORWARD_TASKS, OVOBench, check_ovo_records
from proactive_eval.benchmarks.ovo_bench.match import match_ovo
from proactive_eval.benchmarks.ovo_bench.metric import CATEGORY_NAMES, score_ovo_bench
from proactive_eval.common.speed import latency_summary, recorded_seconds


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


def _blind_floor(records: list[dict]) -> dict[str, Any]:
    floor = score_ovo_bench(ovo_blind_results(records))
    return {k: floor[k] for k in ("tasks", "categories", "overall")}


def ovo_blind_floor(bench: OVOBench) -> dict[str, Any]:
    """The official numbers (``tasks``, ``categories``, ``overall``) of `ovo_blind_results` on the annotations."""
    return _blind_floor(bench.records)


def ovo_bench_summary(records: list[dict], results: Any, file: str = "predictions") -> dict[str, Any]:
    """The ``results.json`` content of an OVO-Bench results object against the annotation `records`: the results
    are matched to the records by id (`match_ovo`), and only the records' gold is scored.

    Raises:
        `EpisodeError`: the annotations or the results file (named `file`) break their shape.
    """
    check_ovo_records(records, "annotations")
    matched = match_ovo(records, results, file)
    report = {"benchmark": "ovo_bench", **score_ovo_bench(matched.results)}
    expected = sum(len(r["test_info"]) if r["task"] in FORWARD_TASKS else 1 for r in records)
    report["coverage"] = {"expected": expected, "answered": matched.answered, "missing": expected - matched.answered}
    report["ignored"] = matched.ignored
    report["blind_floor"] = _blind_floor(records)
    report["speed"] = latency_summary(c for c in matched.costs if recorded_seconds(c))
    return report


def ovo_summary(bench: OVOBench, results: Any, file: str = "predictions", model: str | None = None) -> dict[str, Any]:
    """`ovo_bench_summary` against the loaded annotations (an OVO-Bench results object holds one model's answers:
    `model` is not used)."""
    return ovo_bench_summary(bench.records, results, file)


def ovo_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """What a training callback logs of a `ovo_bench_summary` (with the run's speed): per-task accuracy, the
    category means and overall present, and frames per second (0 without a run)."""
    metrics = dict(summary["tasks"])
    metrics.update({k: v for k, v in summary["categories"].items() if v is not None})
    if summary["overall"] is not None:
        metrics["overall"] = summary["overall"]
    metrics["frames_per_s"] = summary.get("speed", {}).get("frames_per_s") or 0.0
    return metrics
