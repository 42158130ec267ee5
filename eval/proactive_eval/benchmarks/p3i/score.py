"""``proactive-eval score|run --benchmark p3i``: PRS-U / PRS-B of a predictions file beside the blind schedule, with
the 95 % paired interval of the gain over it (docs/spec.md §4, §14, §15; docs/evaluation.md).

The content scorers are the defaults of `proactive_eval.common.content.content_scorers` (token-F1 for intervention,
exact match for the rest), for the model and the blind schedule alike; ``score --episodes --judge ...`` scores with
an LLM judge and adds the counterfactual rows.
"""

from __future__ import annotations

from typing import Any

from proactive_eval.benchmarks.episode_run import file_name, matched_predictions
from proactive_eval.benchmarks.p3i.blind import blind_prs_summary
from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.intervals import paired_interval

KEYS = ("prs_u", "prs_b")


def p3i_summary(episodes, official, file="predictions", model=None) -> dict[str, Any]:
    """``results.json`` of a P³I predictions object: ``prs`` (`PRSReport.summary`), ``blind_floor``
    (`blind_prs_summary`, leave-one-out on these episodes), ``gain_over_blind`` (PRS-U / PRS-B, model − blind,
    × 100, with its 95 % paired interval over the episodes) and ``coverage``."""
    matched, coverage = matched_predictions(episodes, official, file)
    report = score_prs(episodes, matched)
    blind_rows: list[dict] = []
    blind = blind_prs_summary(episodes, per_episode=blind_rows)
    own = {e.episode_id: e.to_dict() for e in report.episodes}
    pairs = [(own[b["episode_id"]], b) for b in blind_rows if b["episode_id"] in own]
    gain = {}
    for key in KEYS:
        interval = paired_interval([100 * o[key] for o, _ in pairs], [100 * b[key] for _, b in pairs])
        gain[key] = interval.as_dict()
    return {
        "benchmark": "p3i",
        "predictions": file_name(file),
        "prs": report.summary(),
        "blind_floor": blind,
        "gain_over_blind": gain,
        "coverage": coverage,
    }


def p3i_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """What a training callback logs: PRS-U / PRS-B, the blind floor's and the gains (× 100)."""
    overall, blind = summary["prs"]["overall"], summary["blind_floor"]["overall"]
    out = {key: float(overall[key]) for key in KEYS}
    out.update({f"blind_{key}": float(blind[key]) for key in KEYS})
    out.update({f"gain_{key}": float(summary["gain_over_blind"][key]["diff"]) for key in KEYS})
    return out


def p3i_report_text(summary: dict[str, Any]) -> str:
    """The short table ``score`` and ``run`` print: model, blind floor, gain with its interval, coverage."""
    overall, blind, gain = summary["prs"]["overall"], summary["blind_floor"]["overall"], summary["gain_over_blind"]
    lines = ["| P³I-Bench | PRS-U | PRS-B |", "|---|---|---|"]
    lines.append(f"| model | {overall['prs_u']:.1f} | {overall['prs_b']:.1f} |")
    lines.append(f"| blind schedule | {blind['prs_u']:.1f} | {blind['prs_b']:.1f} |")
    cells = [f"{g['diff']:+.1f} [{g['low']:+.1f}, {g['high']:+.1f}]" for g in (gain[k] for k in KEYS)]
    lines.append(f"| model − blind (95 % CI) | {cells[0]} | {cells[1]} |")
    cov = summary["coverage"]
    lines.append(f"coverage: {cov['with_predictions']} of {cov['episodes']} episodes have predictions")
    return "\n".join(lines)
