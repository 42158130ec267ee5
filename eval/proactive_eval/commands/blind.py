"""The blind floor: the one "does it look?" number every command reports beside a model's (docs/spec.md §14).

`blind_floor` is what ``proactive-eval baseline`` prints, and the blind row of ``proactive-eval run`` / ``score``
and of the ``proactive-rl eval`` evaluators (``--model``, ``--watch`` and the training callback): the same number
for the same episodes, fit and scorer. It is the best frame-independent policy of the evaluated tasks, fitted on a
reference split (``reference``, e.g. the training episodes) or, without one, by leave-one-out on the evaluated
episodes (each scored with the policy fitted on the others), and scored by the evaluation's own scorer
(`proactive_eval.benchmarks.p3i.blind` for PRS, `proactive_eval.benchmarks.pvqa.blind` for PAUC).

Silence is a blind policy too, so the floor is never below it: silence scores 0 in PRS, where no schedule scores
less, and 25 in PAUC, where a task whose fitted answers score less falls back to silence.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from proactive_eval.benchmarks.p3i.blind import blind_prs_summary
from proactive_eval.benchmarks.pvqa.blind import SILENCE as PAUC_SILENCE
from proactive_eval.benchmarks.pvqa.blind import blind_pauc_summary
from proactive_eval.benchmarks.pvqa.metric import OMEGAS
from proactive_rewards import ALPHA

METRICS = ("prs", "pauc")
#: the score of silence, × 100, by metric (PAUC: every ω)
SILENCE = {"prs": 0.0, "pauc": PAUC_SILENCE}
FIT_LABELS = {
    "reference": "fitted on the reference split",
    "leave_one_out": "leave-one-out: each episode scored with the fit on the others; shown: the fit on all",
}


def blind_floor(
    metric: str,
    episodes: Sequence,
    reference: Sequence | None = None,
    *,
    alpha: float = ALPHA,
    content_scorer=None,
    judge=None,
    omegas: Sequence[float] = OMEGAS,
    per_episode: list | None = None,
) -> dict[str, Any]:
    """The blind row of `episodes` under `metric` (module docstring).

    Args:
        metric (`str`): ``"prs"`` (PRS-U / PRS-B) or ``"pauc"``.
        episodes (`Sequence[Episode]`): the evaluated (scored) episodes.
        reference (`Sequence[Episode]`, *optional*): the split to fit on; without it, leave-one-out.
        alpha (`float`, *optional*, defaults to `0.05`): PRS: the decay rate of the evaluation.
        content_scorer (`Callable` or `dict`, *optional*): PRS: the evaluation's content scorer(s).
        judge (*optional*): PAUC: the evaluation's judge (required).
        omegas (`Sequence[float]`, *optional*, defaults to `(0, 0.5, 1)`): PAUC: the reported ω.
        per_episode (`list`, *optional*): receives the blind scores of each episode (PRS, `blind_prs_summary`) or
            of each turn (PAUC, `blind_pauc_summary`'s ``per_turn``).

    Returns:
        `dict`: the summary of `proactive_eval.benchmarks.p3i.blind.blind_prs_summary` or
        `proactive_eval.benchmarks.pvqa.blind.blind_pauc_summary` (``overall``, ``groups``, ``fit`` per task,
        ``schedules``), × 100, never below `SILENCE`.
    """
    if metric == "prs":
        return blind_prs_summary(
            episodes, reference, alpha=alpha, content_scorer=content_scorer, per_episode=per_episode
        )
    if metric == "pauc":
        if judge is None:
            raise ValueError("blind_floor: PAUC needs the evaluation's judge")
        return blind_pauc_summary(episodes, judge, reference, omegas=omegas, per_turn=per_episode)
    raise ValueError(f"blind_floor: unknown metric {metric!r}; expected one of {', '.join(METRICS)}")


def fit_label(how: str) -> str:
    """How a blind row was fitted, in words (``reference`` or ``leave_one_out``)."""
    return FIT_LABELS.get(how, how.replace("_", " "))
