"""Benchmark metrics: PAUC (docs/spec.md §5), PRS-U / PRS-B (docs/spec.md §4) and ProactiveBench acc / ps / agg (docs/spec.md §6)."""

from proactive_eval.metrics.pauc import (
    OMEGAS,
    PAUCResult,
    TurnScore,
    kept_predictions,
    parse_judge_level,
    pauc_area,
    pauc_turn,
    score_pauc,
)
from proactive_eval.metrics.proactivebench import (
    oeg_judgment,
    oeg_summary,
    proactivebench_outcome,
    proactivebench_summary,
)
from proactive_eval.metrics.prs import EpisodePRS, PRSReport, score_prs

__all__ = [
    "OMEGAS",
    "EpisodePRS",
    "PAUCResult",
    "PRSReport",
    "TurnScore",
    "kept_predictions",
    "parse_judge_level",
    "pauc_area",
    "pauc_turn",
    "oeg_judgment",
    "oeg_summary",
    "proactivebench_outcome",
    "proactivebench_summary",
    "score_pauc",
    "score_prs",
]
