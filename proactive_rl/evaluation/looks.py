"""Does the model look? The blind row and the frame counterfactuals of the streaming evaluators (docs/spec.md §14).

Every PRS / PAUC evaluation reports, beside the model's numbers:

- the blind schedule (`proactive_eval.benchmarks.p3i.blind`, `proactive_eval.benchmarks.pvqa.blind`): the best frame-independent
  schedule, fitted on ``baseline_episodes`` when given and by leave-one-out otherwise, scored by the evaluator's
  own scorer: ``blind_<metric>`` (overall and ``<task>/blind_<metric>``);
- with ``counterfactual: [swap, freeze]`` (`proactive_eval.common.counterfactual`), the model played again on the same
  episodes with another episode's frames or the first frame frozen: ``<metric>_swap`` / ``<metric>_freeze`` and
  ``vision_gain_<metric> = metric - <metric>_swap``, over the episodes both runs scored.

A counterfactual run is stored under ``<episode id>#<kind>`` (before the episode's own run, so a resumed
evaluation that has an episode has its counterfactuals too) in ``predictions_counterfactual.jsonl``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from proactive_eval import streaming  # module attribute: tests patch run_episode
from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.benchmarks.proactivebench.blind import blind_mcqa_summary, blind_oeg_summary
from proactive_eval.benchmarks.proactivebench.metric import oeg_summary, proactivebench_summary
from proactive_eval.benchmarks.pvqa.metric import score_pauc
from proactive_eval.commands.blind import blind_floor
from proactive_eval.common.counterfactual import (
    NoPartner,
    counterfactual_id,
    counterfactual_source,
    split_counterfactual_id,
    with_vision_gain,
)
from proactive_eval.predictions import atomic_write_text, prediction_line
from proactive_rewards import Response

logger = logging.getLogger(__name__)

COUNTERFACTUAL_PREDICTIONS = "predictions_counterfactual.jsonl"


def blind_key(metric: str) -> str:
    """The key of a metric's blind baseline: ``prs/accident/prs_b`` → ``prs/accident/blind_prs_b``."""
    head, sep, tail = metric.rpartition("/")
    return f"{head}{sep}blind_{tail}"


def is_blind(metric: str) -> bool:
    return metric.rpartition("/")[2].startswith("blind_")


def counterfactual_sources(evaluator, frame_source) -> dict[str, Any]:
    """``kind -> frame source`` of the evaluator's counterfactuals, paired over all its items (every rank alike)."""
    kinds = evaluator.config.counterfactual or []
    return {kind: counterfactual_source(kind, evaluator.items(), frame_source) for kind in kinds}


def play_counterfactuals(evaluator, policy, episode, sources: dict, unplayable, writer=None) -> list[dict]:
    """The records of `episode` played under each counterfactual (`NoPartner` and unplayable videos are skipped)."""
    records = []
    for kind, source in sources.items():
        try:
            outputs = streaming.run_episode(
                policy, episode, frame_source=source, max_frames=evaluator.config.max_frames
            )
        except NoPartner as err:
            logger.info("evaluator %r: %s", evaluator.name, err)
            continue
        except unplayable as err:
            logger.warning("evaluator %r: episode %r not played under %s: %s", evaluator.name, episode.id, kind, err)
            continue
        rid = counterfactual_id(episode.id, kind)
        if writer is not None:
            writer.write(rid, outputs)
        records.append({"id": rid, "responses": [(r.time, r.text, r.malformed) for r in outputs]})
    return records


def split_counterfactuals(records: list[dict]) -> tuple[list[dict], dict[str, dict[str, list]]]:
    """``(the episodes' own records, kind -> episode id -> outputs)`` of gathered (or resumed) records."""
    own, runs = [], {}
    for record in records:
        eid, kind = split_counterfactual_id(record["id"])
        if kind is None:
            own.append(record)
        elif "failed" not in record:
            responses = [Response(float(t), text, bool(m)) for t, text, m in record["responses"]]
            runs.setdefault(kind, {})[eid] = responses
    return own, runs


def write_counterfactuals(out_dir: Path | None, runs: dict[str, dict[str, list]], order: list[str]) -> None:
    """``predictions_counterfactual.jsonl``: every counterfactual run, in episode order."""
    if out_dir is None or not runs:
        return

    lines = [
        prediction_line(counterfactual_id(eid, kind), runs[kind][eid])
        for kind in runs
        for eid in order
        if eid in runs[kind]
    ]
    atomic_write_text(Path(out_dir) / COUNTERFACTUAL_PREDICTIONS, "".join(lines))


def _blind(evaluator, items: list, fit):
    """`fit()` once per set of scored items: the blind baseline never depends on the model, so the evaluations of
    a training run (the same held-out items each time) reuse it."""
    key = tuple(i["id"] if isinstance(i, dict) else i.id for i in items)
    cache = evaluator.__dict__.setdefault("_blind_rows", {})
    if key not in cache:
        cache[key] = fit()
    return cache[key]


def _flat(summary: dict[str, Any], keys: tuple[str, ...], suffix: str = "", prefix: str = "") -> dict[str, float]:
    """``{prefix + key + suffix}`` overall and ``{task}/...`` per group, for the keys present."""
    out = {f"{prefix}{k}{suffix}": float(summary["overall"][k]) for k in keys if summary["overall"].get(k) is not None}
    for group, row in summary.get("groups", {}).items():
        for k in keys:
            if row.get(k) is not None:
                out[f"{group}/{prefix}{k}{suffix}"] = float(row[k])
    return out


def prs_looks(evaluator, episodes: list, predictions: dict, runs: dict, scorers) -> tuple[dict, dict]:
    """``(metrics, summary)`` of the blind row and the counterfactuals of a PRS evaluation (module docstring); each
    counterfactual's per-episode scores, and the blind schedule's (kind ``blind``), go to
    ``evaluator.counterfactual_episodes`` (kind → rows of ``prs_episodes_<kind>.jsonl``)."""
    alpha, keys = evaluator.config.alpha, ("prs_u", "prs_b")
    reference = evaluator.baseline_items()

    def fit():
        rows: list = []
        return blind_floor("prs", episodes, reference, alpha=alpha, content_scorer=scorers, per_episode=rows), rows

    blind, blind_rows = _blind(evaluator, episodes, fit)
    evaluator.counterfactual_episodes = {"blind": blind_rows}
    metrics = _flat(blind, keys, prefix="blind_")
    summary: dict[str, Any] = {"blind": blind}
    for kind, outputs in runs.items():
        played = [e for e in episodes if e.id in outputs]
        if not played:
            continue
        cf_report = score_prs(played, outputs, alpha=alpha, content_scorer=scorers)
        evaluator.counterfactual_episodes[kind] = [e.to_dict() for e in cf_report.episodes]
        cf = cf_report.summary()
        own = score_prs(played, predictions, alpha=alpha, content_scorer=scorers).summary()
        entry = {**with_vision_gain(cf, own, keys), "num_episodes": len(played)}
        metrics.update(_flat(cf, keys, suffix=f"_{kind}"))
        if kind == "swap":  # vision_gain_<metric> is defined against the swapped frames
            metrics.update(_flat(entry["vision_gain"], keys, prefix="vision_gain_"))
        summary.setdefault("counterfactual", {})[kind] = entry
    return metrics, summary


def pauc_looks(evaluator, episodes: list, predictions: dict, runs: dict, judge, omegas) -> tuple[dict, dict]:
    """``(metrics, summary)`` of the blind answer and the counterfactuals of a PAUC evaluation: ``blind_pauc_wω``,
    ``pauc_wω_swap``, ``vision_gain_pauc_wω`` (module docstring); the blind answer's per-turn scores go to
    ``evaluator.blind_turns`` (``pauc_turns_blind.jsonl``)."""
    keys = tuple(f"omega={o}" for o in omegas)

    def named(summary: dict, prefix: str = "", suffix: str = "") -> dict[str, float]:
        flat = _flat(summary, keys, prefix=prefix, suffix=suffix)
        return {k.replace("omega=", "pauc_w"): v for k, v in flat.items()}

    def fit():
        turns: list = []
        reference = evaluator.baseline_items()
        return blind_floor("pauc", episodes, reference, judge=judge, omegas=omegas, per_episode=turns), turns

    blind, evaluator.blind_turns = _blind(evaluator, episodes, fit)
    metrics, summary = named(blind, prefix="blind_"), {"blind": blind}
    for kind, outputs in runs.items():
        played = [e for e in episodes if e.id in outputs]
        if not played:
            continue
        cf = score_pauc(played, outputs, judge, omegas=omegas, progress=False).summary()
        own = score_pauc(played, predictions, judge, omegas=omegas, progress=False).summary()
        entry = {**with_vision_gain(cf, own, keys), "num_episodes": len(played)}
        metrics.update(named(cf, suffix=f"_{kind}"))
        if kind == "swap":
            metrics.update(named(entry["vision_gain"], prefix="vision_gain_"))
        summary.setdefault("counterfactual", {})[kind] = entry
    return metrics, summary


def mcqa_looks(evaluator, records: list[dict], swapped: list[dict]) -> tuple[dict, dict]:
    """``(metrics, summary)`` of the image-blind policy (``blind_acc``, ``blind_ps``) and of the swapped images
    (``acc_swap``, ``ps_swap``, ``vision_gain_acc``) of an MCQA evaluation (`proactive_eval.benchmarks.proactivebench.blind`)."""
    played = {r["id"] for r in records}
    envs = [e for e in evaluator.items() if e.id in played]
    blind = _blind(evaluator, envs, lambda: blind_mcqa_summary(envs, evaluator.baseline_items()))
    metrics = {"blind_acc": float(blind["acc"]), "blind_ps": float(blind["ps"])}
    summary: dict[str, Any] = {"blind": blind}
    if swapped:
        ids = {r["id"] for r in swapped}
        own = proactivebench_summary([r for r in records if r["id"] in ids])
        cf = proactivebench_summary(swapped)
        gain = {"acc": own["acc"] - cf["acc"], "ps": own["ps"] - cf["ps"]}
        summary["counterfactual"] = {"swap": {**cf, "vision_gain": gain}}
        metrics.update(acc_swap=float(cf["acc"]), ps_swap=float(cf["ps"]), vision_gain_acc=float(gain["acc"]))
    return metrics, summary


def mcqa_looks_markdown(summary: dict) -> str:
    """The blind-policy and swapped-images rows under an MCQA report (docs/spec.md §14)."""
    rows = [("model", summary)]
    if summary.get("blind"):
        rows.append(("blind policy", summary["blind"]))
    swap = (summary.get("counterfactual") or {}).get("swap")
    if swap:
        rows.append(("images swapped (swap)", swap))
    lines = ["", "## Does the model look? (docs/spec.md §14)", "", "| row | n | acc | ps |", "|---|---|---|---|"]
    lines += [f"| {name} | {r.get('n', '–')} | {r['acc']:.1f} | {r['ps']:.2f} |" for name, r in rows]
    if swap:
        lines.append(f"\nvision gain (acc − acc with swapped images): {swap['vision_gain']['acc']:.1f}")
    for dataset, policy in (summary.get("blind") or {}).get("policies", {}).items():
        how = summary["blind"]["fit"].get(dataset, "")
        lines.append(f"- blind policy of {dataset} ({how.replace('_', ' ')}): {policy['described']}")
    return "\n".join(lines) + "\n"


def oeg_looks(evaluator, rows: list[dict], swapped: list[dict], swapped_rows: list[dict], judge) -> tuple[dict, dict]:
    """``(metrics, summary)`` of the blind answer (``blind_agg``, ``blind_acc``, ``blind_ps``) and of the swapped
    images (``agg_swap``, ``vision_gain_agg``) of an OEG evaluation (`proactive_eval.benchmarks.proactivebench.blind`)."""
    keys = ("agg", "acc", "ps")
    blind = _blind(evaluator, rows, lambda: blind_oeg_summary(rows, judge, evaluator.baseline_items()))
    metrics = {f"blind_{k}": float(blind[k]) for k in keys}
    summary: dict[str, Any] = {"blind": blind}
    if swapped_rows:
        ids = {r["id"] for r in swapped}
        own, cf = oeg_summary([r for r in rows if r["id"] in ids]), oeg_summary(swapped_rows)
        gain = {k: own[k] - cf[k] for k in keys}
        summary["counterfactual"] = {"swap": {**cf, "vision_gain": gain}}
        metrics.update({f"{k}_swap": float(cf[k]) for k in keys})
        metrics.update({f"vision_gain_{k}": float(gain[k]) for k in keys})
    return metrics, summary
