"""ProactiveBench MCQA reports: acc / ps per dataset under a named protocol (docs/spec.md §6, §12).

A report always says which benchmark it scored: the protocol (the paper's filtered benchmark, or the unfiltered
one; `proactive_eval.benchmarks.proactivebench.protocol`) and how many samples per dataset. ``avg`` is the paper's
last column (Table 1: the mean of the per-dataset numbers); ``pooled`` weighs every environment alike. Beside
the accuracy, every row shows the speed of the run (`proactive_eval.common.speed.step_speed`: answers per second and
per-answer latency, from the outcomes' ``step_seconds``), ``n/a (no model run)`` when the outcomes were not timed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from proactive_eval.benchmarks.proactivebench.metric import DATASETS, proactivebench_summary
from proactive_eval.benchmarks.proactivebench.protocol import protocol_line, protocol_summary
from proactive_eval.common.speed import NO_RUN, step_speed


def _dataset_of(outcome: Any) -> str:
    return outcome["dataset"] if isinstance(outcome, Mapping) else getattr(outcome, "dataset", "")


def mcqa_results(
    outcomes: Iterable[Any],
    protocol: str | None,
    skip: Mapping[str, Any] | None = None,
    meta: dict | None = None,
    blind_floor: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``{"protocol", "datasets", "avg", "pooled", "speed", "meta"}`` (and ``blind_floor``) from played
    environments.

    Args:
        outcomes (iterable): dicts (or objects) with ``dataset``, ``success`` and ``turns``.
        protocol (`str`): ``"filtered"`` or ``"unfiltered"``; `None` for environments that are not ProactiveBench
            samples (synthetic ones): the report then says so.
        skip (`dict`, *optional*): the skip arguments the samples were loaded with.
        meta (`dict`, *optional*): what the report records about the run.
        blind_floor (`dict`, *optional*): the image-blind policy's summary
            (`proactive_eval.benchmarks.proactivebench.blind.blind_mcqa_summary`), shown as the table's blind-floor row.

    >>> r = mcqa_results([{"dataset": "QD", "success": True, "turns": 2}, {"dataset": "ROD", "success": False, "turns": 1}], "filtered")
    >>> r["protocol"]["samples"], r["avg"]
    ({'ROD': 1, 'QD': 1}, {'acc': 50.0, 'ps': 0.5, 'n': 2})
    """
    groups: dict[str, list] = {}
    for outcome in outcomes:
        groups.setdefault(_dataset_of(outcome) or "all", []).append(outcome)
    order = [k for k in DATASETS if k in groups] + sorted(k for k in groups if k not in DATASETS)
    datasets = {k: proactivebench_summary(groups[k]) for k in order}
    counts = {k: s["n"] for k, s in datasets.items()}
    avg = {"acc": float("nan"), "ps": float("nan"), "n": 0}
    if datasets:
        avg = {m: sum(s[m] for s in datasets.values()) / len(datasets) for m in ("acc", "ps")}
        avg["n"] = sum(counts.values())
    speed = {k: step_speed(step_seconds_of(groups[k])) for k in order}
    speed["pooled"] = step_speed(step_seconds_of([o for k in order for o in groups[k]]))
    out = {
        "protocol": protocol_summary(protocol, counts, skip) if protocol is not None else {"protocol": None},
        "datasets": datasets,
        "avg": avg,
        "pooled": proactivebench_summary(o for k in order for o in groups[k]),
        "speed": speed,
        "meta": dict(meta or {}),
    }
    if blind_floor is not None:
        out["blind_floor"] = {k: blind_floor[k] for k in ("acc", "ps", "n", "policies") if k in blind_floor}
    return out


def step_seconds_of(outcomes: list) -> list[float] | None:
    """The per-step seconds of `outcomes`, or `None` when none was timed (predictions scored without a run)."""
    timed = [o.get("step_seconds") if isinstance(o, Mapping) else getattr(o, "step_seconds", None) for o in outcomes]
    if all(t is None for t in timed):
        return None
    return [c for t in timed for c in t or ()]


def speed_text(speed: Mapping[str, Any] | None) -> str:
    """The three speed cells of a `step_speed` row (``n/a (no model run)`` when nothing was timed)."""
    if not speed or speed.get("steps") is None:
        return f"{NO_RUN} | {NO_RUN} | {NO_RUN}"
    return " | ".join("–" if speed[k] is None else f"{speed[k]:.3f}" for k in _SPEED)


_SPEED = ("steps_per_s", "latency_median_s", "latency_p95_s")


def mcqa_markdown(results: Mapping[str, Any], title: str = "ProactiveBench MCQA") -> str:
    """The report: the protocol line, then acc / ps / n per dataset, the paper's avg and the pooled numbers."""
    proto = results["protocol"]
    head = protocol_line(proto) if proto.get("protocol") else "Not ProactiveBench samples (synthetic environments)."
    header = "| dataset | n | acc | ps | steps/s | latency median (s) | latency p95 (s) |"
    lines = [f"# {title}", "", head, "", header, "|---|---|---|---|---|---|---|"]
    speed = results.get("speed") or {}
    for key, s in results["datasets"].items():
        lines.append(f"| {key} | {s['n']} | {s['acc']:.1f} | {s['ps']:.2f} | {speed_text(speed.get(key))} |")
    for name in ("avg", "pooled"):
        s = results[name]
        cells = speed_text(speed.get(name)) if name == "pooled" else "– | – | –"
        lines.append(f"| {name} | {s['n']} | {s['acc']:.1f} | {s['ps']:.2f} | {cells} |")
    blind = results.get("blind_floor")
    if blind is not None:
        lines.append(
            f"| blind floor (never looks) | {blind['n']} | {blind['acc']:.1f} | {blind['ps']:.2f} | – | – | – |"
        )
        policies = blind.get("policies", {})
        lines += [""] * bool(policies) + [f"- blind policy of {k}: {p['described']}" for k, p in policies.items()]
    return "\n".join(lines) + "\n"
