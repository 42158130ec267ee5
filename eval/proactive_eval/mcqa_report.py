"""ProactiveBench MCQA reports: acc / ps per dataset under a named protocol (docs/spec.md §6, §12).

A report always says which benchmark it scored: the protocol (the paper's filtered benchmark, or the unfiltered
one; `proactive_eval.formats.proactivebench_protocol`) and how many samples per dataset. ``avg`` is the paper's
last column (Table 1: the mean of the per-dataset numbers); ``pooled`` weighs every environment alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from proactive_eval.formats.proactivebench_protocol import protocol_line, protocol_summary
from proactive_eval.metrics.proactivebench import DATASETS, proactivebench_summary


def _dataset_of(outcome: Any) -> str:
    return outcome["dataset"] if isinstance(outcome, Mapping) else getattr(outcome, "dataset", "")


def mcqa_results(
    outcomes: Iterable[Any], protocol: str | None, skip: Mapping[str, Any] | None = None, meta: dict | None = None
) -> dict[str, Any]:
    """``{"protocol", "datasets", "avg", "pooled", "meta"}`` from played environments.

    Args:
        outcomes (iterable): dicts (or objects) with ``dataset``, ``success`` and ``turns``.
        protocol (`str`): ``"filtered"`` or ``"unfiltered"``; `None` for environments that are not ProactiveBench
            samples (synthetic ones): the report then says so.
        skip (`dict`, *optional*): the skip arguments the samples were loaded with.

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
    return {
        "protocol": protocol_summary(protocol, counts, skip) if protocol is not None else {"protocol": None},
        "datasets": datasets,
        "avg": avg,
        "pooled": proactivebench_summary(o for k in order for o in groups[k]),
        "meta": dict(meta or {}),
    }


def mcqa_markdown(results: Mapping[str, Any], title: str = "ProactiveBench MCQA") -> str:
    """The report: the protocol line, then acc / ps / n per dataset, the paper's avg and the pooled numbers."""
    proto = results["protocol"]
    head = protocol_line(proto) if proto.get("protocol") else "Not ProactiveBench samples (synthetic environments)."
    lines = [f"# {title}", "", head, "", "| dataset | n | acc | ps |", "|---|---|---|---|"]
    for key, s in results["datasets"].items():
        lines.append(f"| {key} | {s['n']} | {s['acc']:.1f} | {s['ps']:.2f} |")
    for name in ("avg", "pooled"):
        s = results[name]
        lines.append(f"| {name} | {s['n']} | {s['acc']:.1f} | {s['ps']:.2f} |")
    return "\n".join(lines) + "\n"
