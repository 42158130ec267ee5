"""Evaluate one model of the demo: streaming PRS-U/B per task, PAUC (rule judge), ProactiveBench MCQA acc / ps.

- PRS (docs/spec.md §4) and PAUC (docs/spec.md §5): the evaluators of `proactive_rl.evaluation` (the ones a training callback and
  ``proactive-rl eval`` run): greedy decoding through the KV-cache `HFStreamingPolicy`, `proactive_eval`'s streaming
  loop over the exported mp4 episodes of the test split, and `proactive_eval`'s scorers and report (tables, timelines,
  PAUC curves).
- MCQA (docs/spec.md §6): the held-out environments of the test split, played greedily by the MCQA evaluator of
  `proactive_rl.evaluation` (the prompt the suggestion trainer trains on), with the tiny suggestion recipe's
  ``answer_letters_only`` decoding (only option letters may be generated: a tiny model otherwise never writes an
  option); the same decoding at every stage, so the numbers compare.

All three go through `proactive_rl.evaluation.evaluate_model`, which writes ``results.json`` and the reports.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from proactive_rl.data import load_mixture
from proactive_rl.data.mcqa import proactivebench_environments
from proactive_rl.demo.plan import env_file, task_file
from proactive_rl.demo.settings import PAUC_TASK, DemoSettings, suggestion_environments
from proactive_rl.evaluation import EvaluatorConfig, MCQAEvaluator, PAUCEvaluator, PRSEvaluator, evaluate_model
from proactive_rl.models import load_model
from proactive_rl.synthetic.captions import GROUNDING_TASK
from proactive_rl.synthetic.export import DATASET_RULES

logger = logging.getLogger(__name__)


def _looks(settings: DemoSettings) -> dict[str, Any]:
    # Does the model look? Every evaluator also reports the best frame-blind policy fitted on the training split
    # (the "blind schedule" row) and the model's score with each held-out episode's frames swapped for another's
    # (``<metric>_swap``, ``vision_gain_<metric>``; docs/spec.md §14).
    return {"counterfactual": ["swap"]} if settings.counterfactual else {}


def prs_evaluator(data: Path, settings: DemoSettings, progress: bool = False) -> PRSEvaluator:
    """The demo's PRS-U / PRS-B evaluator: the first ``settings.eval_episodes`` held-out episodes of each streaming
    task (one file each), greedy turns of at most ``settings.prs_max_new_tokens`` tokens."""
    prs = {
        "type": "prs",
        "episodes": [{"source": str(task_file(data, "test", t))} for t in settings.tasks],
        "baseline_episodes": [{"source": str(task_file(data, "train", t))} for t in settings.tasks],
        "max_new_tokens": settings.prs_max_new_tokens,
        "batch_size": settings.eval_batch_size,
        **_looks(settings),
    }
    prs = EvaluatorConfig.from_dict(prs, "demo.prs")
    # The first N episodes of each task (one file each), not the first N of the concatenation.
    episodes = [e for src in prs.episodes for e in load_mixture([src])[0][: settings.eval_episodes]]
    return PRSEvaluator(prs, progress=progress, items=episodes)


def _evaluators(data: Path, settings: DemoSettings, progress: bool) -> list:
    looks = _looks(settings)
    pauc = {
        "type": "pauc",
        "episodes": [{"source": str(task_file(data, "test", PAUC_TASK))}],
        "baseline_episodes": [{"source": str(task_file(data, "train", PAUC_TASK))}],
        **looks,
        "max_items": settings.eval_pauc_episodes,
        "max_new_tokens": settings.max_new_tokens,
        "batch_size": settings.eval_batch_size,
        "judge": {"type": "rule", "kind": "token_f1"},
    }
    kinds = suggestion_environments()[0]
    mcqa = {
        "type": "mcqa",
        "environments": [{"path": str(env_file(data, "test", k)), "dataset": DATASET_RULES[k]} for k in kinds],
        "baseline_environments": [
            {"path": str(env_file(data, "train", k)), "dataset": DATASET_RULES[k]} for k in kinds
        ],
        **looks,
        "max_new_tokens": 1,
        "answer_letters_only": True,
        "protocol": "unfiltered",  # synthetic exports, not the benchmark's files
    }
    pauc, mcqa = (EvaluatorConfig.from_dict(c, f"demo.{c['type']}") for c in (pauc, mcqa))
    # The first N environments of each kind (one file each), not the first N of the concatenation.
    envs = [
        e
        for spec in mcqa.environments
        for e in proactivebench_environments(spec["path"], spec["dataset"])[: settings.eval_envs]
    ]
    return [
        prs_evaluator(data, settings, progress),
        PAUCEvaluator(pauc, progress=progress),
        MCQAEvaluator(mcqa, progress=progress, items=envs),
    ]


def evaluate_stage(
    model_dir: Path, data: Path, settings: DemoSettings, out: Path, progress: bool = True, label: str = ""
) -> dict[str, Any]:
    """Evaluate the model saved in `model_dir` (`evaluate_model`: ``out/results.json``, one folder of reports per
    evaluator); returns the metrics: ``{"<task>/prs_u", "<task>/prs_b", "<task>/prs_b_timing", "prs_u", "prs_b",
    "pauc", "acc", "ps"}`` (× 100 except ps), each task's ``num_targets``, ``missed_targets``, ``repeated_targets``,
    ``median_latency_b`` (docs/spec.md §12), ``outputs`` and ``malformed_outputs`` (§13), plus ``"predictions"``
    (episode id -> ``[(time, text)]``) for the timelines."""
    # deferred: keeps torch/transformers out of light import paths
    import torch

    torch.manual_seed(settings.seed)
    model, processor = load_model(str(model_dir))
    model.eval()
    if progress:
        logger.info("evaluating %s", label or model_dir)
    results = evaluate_model(
        model, processor, _evaluators(data, settings, progress), out_dir=out, fail_fast=True, meta={"stage": label}
    )
    entries = results["evaluators"]
    prs = entries["prs"]["summary"]
    metrics: dict[str, Any] = {"prs_u": prs["overall"]["prs_u"], "prs_b": prs["overall"]["prs_b"]}
    for task in settings.tasks:
        group = prs["groups"].get(task, {})
        metrics[f"{task}/prs_u"], metrics[f"{task}/prs_b"] = group.get("prs_u"), group.get("prs_b")
        metrics[f"{task}/prs_b_timing"] = group.get("prs_b_timing")
        for key in ("num_targets", "missed_targets", "repeated_targets", "median_latency_b", "outputs",
                    "malformed_outputs"):  # fmt: skip
            metrics[f"{task}/{key}"] = group.get(key)
    metrics["pauc"] = entries["pauc"]["metrics"].get("pauc_w0.5")
    metrics["acc"], metrics["ps"] = entries["mcqa"]["summary"]["acc"], entries["mcqa"]["summary"]["ps"]
    metrics.update(looks_metrics(entries))
    return {**metrics, "predictions": read_predictions(out, ("prs", "pauc"))}


def read_predictions(out: Path, evaluators) -> dict[str, list]:
    """Episode id -> ``[(time, text)]`` from ``<out>/<evaluator>/predictions.jsonl`` of each of `evaluators` (for the
    timelines); an evaluator that wrote no file adds nothing."""
    predictions = {}
    for name in evaluators:
        path = out / name / "predictions.jsonl"
        for line in path.read_text().splitlines() if path.is_file() else []:
            record = json.loads(line)
            predictions[record["id"]] = [(r["time"], r["text"]) for r in record["responses"]]
    return predictions


def evaluate_grounding(
    model_dir: Path, data: Path, settings: DemoSettings, out: Path, progress: bool = True, label: str = ""
) -> dict[str, Any]:
    """Score the grounding stage's model on held-out captions (`proactive_rl.synthetic.captions`): PRS-B of its
    per-frame captions (token-F1 content, docs/spec.md §4) on the first `eval_caption_episodes` test episodes of
    each grounding task, with their own frames and swapped (``caption/prs_b``, ``caption/prs_b_swap``,
    ``caption/vision_gain_prs_b``; docs/spec.md §14). Its proactive scores would say nothing: it captions every
    frame."""
    # deferred: keeps torch/transformers out of light import paths
    import torch

    torch.manual_seed(settings.seed)
    config = EvaluatorConfig.from_dict(
        {
            "type": "prs",
            "name": "caption",
            "episodes": [{"source": str(task_file(data, "test", GROUNDING_TASK))}],
            "max_new_tokens": 16,
            "batch_size": settings.eval_batch_size,
            "counterfactual": ["swap"] if settings.counterfactual else [],
        },
        "demo.caption",
    )
    episodes = load_mixture(config.episodes)[0]
    n = settings.eval_caption_episodes
    items = [e for t in settings.tasks for e in [e for e in episodes if e.meta.get("grounded_task") == t][:n]]
    model, processor = load_model(str(model_dir))
    results = evaluate_model(
        model.eval(), processor, [PRSEvaluator(config, progress=progress, items=items)], out_dir=out, fail_fast=True
    )
    metrics = results["evaluators"]["caption"]["metrics"]
    scores = {f"caption/{k}": metrics.get(k) for k in ("prs_b", "prs_b_swap", "vision_gain_prs_b")}
    return {**scores, "predictions": read_predictions(out, ("caption",))}


LOOKS_MARKERS = ("blind_", "_swap", "vision_gain_")


def looks_metrics(entries: dict[str, Any]) -> dict[str, float]:
    """The blind-schedule and swapped-frames numbers of each evaluator (docs/spec.md §14), under the demo's metric
    names: ``<task>/blind_prs_b``, ``<task>/prs_b_swap``, ``<task>/vision_gain_prs_b``, ``blind_pauc``,
    ``pauc_swap``, ``blind_acc``, ``acc_swap``, ``vision_gain_acc``, ... (PAUC at ω = 0.5, as in the table)."""
    out: dict[str, float] = {}
    for name in ("prs", "pauc", "mcqa"):
        for key, value in (entries.get(name, {}).get("metrics") or {}).items():
            if value is None or not any(m in key for m in LOOKS_MARKERS):
                continue
            if name == "pauc":
                if "w0.5" not in key:
                    continue
                key = key.replace("pauc_w0.5", "pauc")
            out[key] = float(value)
    return out
