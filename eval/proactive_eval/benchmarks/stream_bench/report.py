"""The short table ``proactive-eval score|run --benchmark`` prints of a ``results.json`` of OVO-Bench or
StreamingBench Proactive Output: the scores beside the blind floor, the coverage and the speed (docs/ovo_bench.md,
docs/streamingbench.md)."""

from __future__ import annotations

from typing import Any


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
