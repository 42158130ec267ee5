"""``proactive-eval score|run --benchmark pvqa``: PAUC of a predictions file beside the blind answer, with the 95 %
paired interval of the gain over it at ω = 0.5 (docs/spec.md §5, §14, §15; docs/evaluation.md).

The judge is the rule judge (token-F1, `JUDGE`), for the model and the blind answer alike, so the command needs no
server; ``score --episodes --judge openai:MODEL@URL`` scores with an LLM judge, as the authors do, and adds the
counterfactual rows.
"""

from __future__ import annotations

from typing import Any

from proactive_eval.benchmarks.episode_run import file_name, matched_predictions
from proactive_eval.benchmarks.pvqa.blind import FIT_OMEGA, blind_pauc_summary
from proactive_eval.benchmarks.pvqa.metric import score_pauc
from proactive_eval.intervals import paired_interval

JUDGE = "token_f1"
KEY = f"omega={FIT_OMEGA}"


def pvqa_summary(episodes, official, file="predictions", model=None) -> dict[str, Any]:
    """``results.json`` of a ProactiveVideoQA predictions object: ``pauc`` (`PAUCResult.summary`), ``blind_floor``
    (`blind_pauc_summary`, leave-one-out), ``gain_over_blind`` (PAUC at ω = 0.5, model − blind, × 100, with its 95 %
    paired interval over the turns), ``judge`` and ``coverage``."""
    # deferred: the judges package pulls the judge stack only where a file is scored
    from proactive_eval.judges import RuleJudge

    matched, coverage = matched_predictions(episodes, official, file)
    judge = RuleJudge(JUDGE)
    result = score_pauc(episodes, matched, judge, progress=False)
    blind_turns: list = []
    blind = blind_pauc_summary(episodes, judge, per_turn=blind_turns)
    own = {(t.episode_id, t.turn): t.pauc[FIT_OMEGA] for t in result.turns}
    pairs = [(own[(t.episode_id, t.turn)], t.pauc[FIT_OMEGA]) for t in blind_turns if (t.episode_id, t.turn) in own]
    gain = paired_interval([100 * a for a, _ in pairs], [100 * b for _, b in pairs])
    return {
        "benchmark": "pvqa",
        "predictions": file_name(file),
        "judge": f"rule:{JUDGE}",
        "pauc": result.summary(),
        "blind_floor": blind,
        "gain_over_blind": {KEY: gain.as_dict()},
        "coverage": coverage,
    }


def pvqa_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """What a training callback logs: PAUC at ω = 0.5, the blind floor's and the gain (× 100)."""
    return {
        "pauc": float(summary["pauc"]["overall"][KEY]),
        "blind_pauc": float(summary["blind_floor"]["overall"][KEY]),
        "gain_pauc": float(summary["gain_over_blind"][KEY]["diff"]),
    }


def pvqa_report_text(summary: dict[str, Any]) -> str:
    """The short table ``score`` and ``run`` print: model, blind answer, gain with its interval, coverage."""
    gain = summary["gain_over_blind"][KEY]
    cov = summary["coverage"]
    return "\n".join(
        [
            f"| ProactiveVideoQA ({summary['judge']}) | PAUC ω=0.5 |",
            "|---|---|",
            f"| model | {summary['pauc']['overall'][KEY]:.1f} |",
            f"| blind answer | {summary['blind_floor']['overall'][KEY]:.1f} |",
            f"| model − blind (95 % CI) | {gain['diff']:+.1f} [{gain['low']:+.1f}, {gain['high']:+.1f}] |",
            f"coverage: {cov['with_predictions']} of {cov['episodes']} episodes have predictions",
        ]
    )


def pvqa_blind_floor(episodes) -> dict[str, Any]:
    """The blind answer of `episodes` (leave-one-out) under the rule judge: ``baseline --benchmark pvqa``."""
    # deferred: the judges package pulls the judge stack only where a file is scored
    from proactive_eval.judges import RuleJudge

    return blind_pauc_summary(episodes, RuleJudge(JUDGE))
