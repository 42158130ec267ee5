"""Scoring a run: PAUC for ``pvqa`` episodes, PRS for the rest, tables printed and the report written
(docs/spec.md §4, §5, §12). Shared by ``proactive-eval score`` and ``proactive-eval run``.

The one ``--judge`` spec serves both metrics: the PAUC judge, and the PRS content scorer of free-text tasks
(intervention; `proactive_eval.common.content`). Episodes that could not be played are left out of every metric,
listed in ``results["failures"]`` and counted in each row's coverage.

The episodes are the only truth: predictions are matched to their ids, and only the responses of a matched id are
scored. Ids that match no episode, records that repeat an id (`proactive_eval.predictions.Predictions`) and
responses outside their video (`proactive_eval.common.malformed.flag_outside_video`: scored as malformed) are counted in
``results["meta"]`` and in the printed report.
"""

from __future__ import annotations

import datetime as _dt
import logging
import os
from pathlib import Path
from typing import Any

from proactive_eval.errors import InputError
from proactive_eval.records import shown

logger = logging.getLogger("proactive_eval")

JUDGE_HELP = "rule:token_f1 | rule:rouge_l | openai:MODEL@BASE_URL (API key from $OPENAI_API_KEY)"


def make_judge(spec: str, cache_path: str | Path | None = None, concurrency: int = 8):
    """A judge from ``rule:token_f1``, ``rule:rouge_l`` or ``openai:MODEL@BASE_URL``."""
    kind, _, rest = spec.partition(":")
    # deferred: keeps `proactive-eval --help` light (judges, metrics, report pull numpy/tqdm)
    if kind == "rule" and rest in ("token_f1", "rouge_l"):
        from proactive_eval.judges import RuleJudge

        return RuleJudge(rest)
    if kind == "openai" and "@" in rest:
        from proactive_eval.judges import OpenAIJudge

        model, _, base_url = rest.partition("@")
        return OpenAIJudge(
            base_url=base_url,
            model=model,
            api_key=os.environ.get("OPENAI_API_KEY"),
            concurrency=concurrency,
            cache_path=cache_path,
        )
    raise InputError(f"unknown judge {spec!r}; expected {JUDGE_HELP}")


def prs_content_scorers(judge_spec: str, judge_factory=None) -> dict:
    """PRS content scorers for `judge_spec` (docs/spec.md §4): ``rule:token_f1`` / ``rule:rouge_l`` score free-text
    tasks (intervention) by that similarity, an ``openai:`` judge by its rating; exact match elsewhere."""
    # deferred: keeps `proactive-eval --help` light (judges, metrics, report pull numpy/tqdm)
    from proactive_eval.common.content import JudgeScorer, content_scorers

    if judge_spec.startswith("rule:"):
        try:
            return content_scorers(judge_spec)
        except ValueError as err:
            raise InputError(f"{err}; --judge expects {JUDGE_HELP}") from None
    judge = judge_factory() if judge_factory is not None else make_judge(judge_spec)
    return content_scorers(JudgeScorer(judge, judge_spec))


def score(
    episodes,
    predictions: dict,
    judge_spec: str = "rule:token_f1",
    out: str | Path | None = None,
    omegas=(0, 0.5, 1),
    plots: bool = True,
    progress: bool = True,
    meta: dict[str, Any] | None = None,
    judge_concurrency: int = 8,
    failed: dict[str, str] | None = None,
    fit_episodes=None,
    counterfactuals: dict[str, dict] | None = None,
    step_seconds: dict[str, list[float]] | None = None,
) -> dict[str, Any]:
    """Score `predictions` against `episodes` (PAUC for ``pvqa``, PRS for the rest), print the tables and
    write the report into `out` (when given). Returns the results dict.

    `failed` (episode id → reason) are episodes that could not be played: they are left out of every metric,
    listed in ``results["failures"]`` and counted in each row's coverage.

    Every table also gets its blind row (docs/spec.md §14), fitted on `fit_episodes` when given, else by
    leave-one-out; `counterfactuals` (kind → episode id → outputs, e.g. ``{"swap": ...}``) add the rows of the
    same policy played with other frames and ``vision_gain`` (metric − metric with swapped frames).

    Every row shows the speed columns (`proactive_eval.common.speed`): frames/s and per-frame latency from
    `step_seconds` (episode id → seconds per frame step, from a model run) or ``n/a (no model run)`` without it,
    and the event → response time computed from the predictions."""
    # deferred: keeps `proactive-eval --help` light (judges, metrics, report pull numpy/tqdm)
    from proactive_eval.benchmarks.p3i.metric import score_prs
    from proactive_eval.benchmarks.pvqa.metric import score_pauc
    from proactive_eval.commands.report import build_results, failure_rows, markdown_report, write_report

    failed = dict(failed or {})
    failures = failure_rows(failed, episodes)
    playable = [e for e in episodes if e.id not in failed]
    pvqa = [e for e in playable if e.task == "pvqa"]
    other = [e for e in playable if e.task != "pvqa"]
    pvqa_ids, other_ids = {e.id for e in pvqa}, {e.id for e in other}
    unknown = sorted(set(predictions) - pvqa_ids - other_ids)
    if unknown:
        logger.warning("%d prediction ids match no episode (e.g. %s)", len(unknown), shown(unknown[0]))
    meta = dict(meta or {})
    meta.update(
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        episodes_scored=len(playable),
        episodes_total=len(episodes),
    )
    meta["prediction_ids_matching_no_episode"] = len(unknown)
    meta["prediction_duplicates_ignored"] = len(getattr(predictions, "duplicates", ()))
    predictions, meta["responses_outside_video"] = _matched(playable, predictions)

    pauc = prs = judge = None

    def the_judge():
        nonlocal judge
        if judge is None:
            cache = Path(out) / "judge_cache.sqlite" if out is not None and judge_spec.startswith("openai:") else None
            judge = make_judge(judge_spec, cache_path=cache, concurrency=judge_concurrency)
        return judge

    if pvqa:
        preds = {k: v for k, v in predictions.items() if k in pvqa_ids}
        pauc = score_pauc(pvqa, preds, the_judge(), omegas=omegas, progress=progress)
        meta["judge"] = judge_spec
    if other:
        preds = {k: v for k, v in predictions.items() if k in other_ids}
        prs = score_prs(other, preds, content_scorer=prs_content_scorers(judge_spec, the_judge), progress=progress)
    if judge is not None and getattr(judge, "stats", None) is not None and hasattr(judge.stats, "as_dict"):
        meta["judge_stats"] = judge.stats.as_dict()

    results = build_results(pauc, prs, meta, failures, playable, predictions, step_seconds)
    looks = _looks(pvqa, other, predictions, counterfactuals or {}, fit_episodes, judge_spec, the_judge, omegas)
    for key, extra in looks.items():
        results[key].update(extra)
    print(markdown_report(results))
    if out is not None:
        written = write_report(
            out, results, pauc=pauc, prs=prs, episodes=episodes, predictions=predictions, plots=plots
        )
        print("wrote " + ", ".join(str(p) for p in written.values()))
    return results


def _matched(episodes, predictions: dict) -> tuple[dict, int]:
    """The predictions of `episodes` only, each response outside its video flagged malformed, and how many were."""
    # deferred: keeps `proactive-eval --help` light
    from proactive_eval.common.malformed import matched_outputs

    matched, outside = matched_outputs(episodes, predictions)
    if outside:
        logger.warning(
            "%d responses are before 0 s or after their episode's video ends: counted as malformed, never scored",
            outside,
        )
    return matched, outside


def _looks(pvqa, other, predictions, counterfactuals, fit_episodes, judge_spec, the_judge, omegas) -> dict:
    """The blind rows and counterfactual rows of `score` (docs/spec.md §14): ``{"prs": {...}, "pauc": {...}}``."""
    # deferred: keeps `proactive-eval --help` light (judges, metrics, report pull numpy/tqdm)
    from proactive_eval.benchmarks.p3i.metric import score_prs
    from proactive_eval.benchmarks.pvqa.metric import score_pauc
    from proactive_eval.commands.blind import blind_floor
    from proactive_eval.common.counterfactual import with_vision_gain

    out: dict[str, dict] = {}
    if other:
        scorers = prs_content_scorers(judge_spec, the_judge)
        out["prs"] = {"blind": blind_floor("prs", other, fit_episodes, content_scorer=scorers)}
        for kind, outputs in counterfactuals.items():
            played = [e for e in other if e.id in outputs]
            if played:
                cf = score_prs(played, outputs, content_scorer=scorers).summary()
                own = score_prs(played, predictions, content_scorer=scorers).summary()
                out["prs"].setdefault("counterfactual", {})[kind] = with_vision_gain(cf, own, ("prs_u", "prs_b"))
    if pvqa:
        out["pauc"] = {"blind": blind_floor("pauc", pvqa, fit_episodes, judge=the_judge(), omegas=omegas)}
        keys = tuple(f"omega={o}" for o in omegas)
        for kind, outputs in counterfactuals.items():
            played = [e for e in pvqa if e.id in outputs]
            if played:
                cf = score_pauc(played, outputs, the_judge(), omegas=omegas, progress=False).summary()
                own = score_pauc(played, predictions, the_judge(), omegas=omegas, progress=False).summary()
                out["pauc"].setdefault("counterfactual", {})[kind] = with_vision_gain(cf, own, keys)
    return out
