"""Evaluate one model of the demo: streaming PRS-U/B per task, PAUC (rule judge), ProactiveBench MCQA acc / ps.

- PRS (docs/spec.md §4) and PAUC (docs/spec.md §5): the evaluators of `proactive_rl.evaluation` (the ones a training callback and
  ``proactive-rl eval`` run): greedy decoding through the KV-cache `HFStreamingPolicy`, `proactive_eval`'s streaming
  loop over the exported mp4 episodes of the test split, and `proactive_eval`'s scorers and report (tables, timelines,
  PAUC curves). The demo drives them one episode at a time to show a progress bar.
- MCQA (docs/spec.md §6): the held-out environments of the test split, played greedily through
  `proactive_eval.run_environment` by `proactive_rl.grpo.suggestion.main.evaluate`, with the tiny suggestion recipe's
  ``answer_letters_only`` decoding (only option letters may be generated: a tiny model otherwise never writes an
  option); the same decoding at every stage, so the numbers compare.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from proactive_rl.demo.settings import PAUC_TASK, DemoSettings, suggestion_environments
from proactive_rl.demo.stages import env_file, task_file

logger = logging.getLogger(__name__)


def _evaluators(data: Path, settings: DemoSettings):
    from proactive_rl.evaluation import EvaluatorConfig, build_evaluators

    prs = {
        "type": "prs",
        "episodes": [{"source": str(task_file(data, "test", t))} for t in settings.prs_tasks],
        "max_new_tokens": settings.prs_max_new_tokens,
    }
    pauc = {
        "type": "pauc",
        "episodes": [{"source": str(task_file(data, "test", PAUC_TASK))}],
        "max_items": settings.eval_pauc_episodes,
        "max_new_tokens": settings.max_new_tokens,
        "judge": {"type": "rule", "kind": "token_f1"},
    }
    evaluators = build_evaluators(
        [EvaluatorConfig.from_dict(prs, "demo.prs"), EvaluatorConfig.from_dict(pauc, "demo.pauc")]
    )
    # The first N episodes of each task (a test file holds one task), not the first N of the concatenation.
    items, per_task = [], {}
    for episode in evaluators[0].items():
        if per_task.setdefault(episode.task, 0) < settings.eval_episodes:
            per_task[episode.task] += 1
            items.append(episode)
    evaluators[0]._items = items
    return evaluators


def _streaming(model, processor, evaluators, out: Path, progress: bool, label: str) -> dict[str, dict]:
    from tqdm.auto import tqdm

    scored = {}
    for ev in evaluators:
        records = []
        for episode in tqdm(ev.items(), desc=f"eval {label}: {ev.name}", unit="episode", disable=not progress):
            records.extend(ev.generate(model, processor, [episode]))
        result = ev.score(records, out / ev.name, plots=True)
        scored[ev.name] = {"metrics": result.metrics, "summary": result.summary, "files": result.files}
    return scored


def _mcqa(model, processor, data: Path, settings: DemoSettings, progress: bool, label: str) -> dict[str, Any]:
    from tqdm.auto import tqdm

    from proactive_rl.data.mcqa import suppressed_tokens
    from proactive_rl.grpo.suggestion.main import EnvironmentSource, evaluate
    from proactive_rl.synthetic.export import DATASET_RULES

    sources = [
        EnvironmentSource.from_dict(
            {"source": str(env_file(data, "test", k)), "dataset": DATASET_RULES[k]}, f"demo.mcqa[{k}]"
        )
        for k in suggestion_environments()[0]
    ]
    envs = [env for src in sources for env in src.build()[: settings.eval_envs]]
    tokenizer = getattr(processor, "tokenizer", processor)
    suppress = suppressed_tokens(model, tokenizer, max(len(e.reset().options) for e in envs))

    class _Listed:  # `evaluate` takes sources; hand it the chosen environments one at a time for the progress bar
        def __init__(self, env):
            self.env = env

        def build(self, hint=False):
            return [self.env]

    outcomes, successes, turns = [], 0, 0
    for env in tqdm(envs, desc=f"eval {label}: mcqa", unit="env", disable=not progress):
        result = evaluate(model, processor, [_Listed(env)], suppress=suppress, max_new_tokens=1)
        outcomes.append({"id": env.id, "outcomes": result["outcomes"][0]})
        successes += result["acc"] / 100
        turns += result["ps"]
    n = len(envs)
    return {"acc": 100 * successes / n, "ps": turns / n, "n": n, "outcomes": outcomes}


def evaluate_stage(
    model_dir: Path, data: Path, settings: DemoSettings, out: Path, progress: bool = True, label: str = ""
) -> dict[str, Any]:
    """Evaluate the model saved in `model_dir`; writes ``out/results.json`` and the reports; returns the metrics:
    ``{"<task>/prs_u", "<task>/prs_b", "prs_u", "prs_b", "pauc", "acc", "ps"}`` (× 100 except ps) plus
    ``"predictions"`` (episode id -> ``[(time, text)]``) for the timelines."""
    import torch

    from proactive_rl.models import load_model

    torch.manual_seed(settings.seed)
    model, processor = load_model(str(model_dir))
    model.eval()
    out.mkdir(parents=True, exist_ok=True)
    streaming = _streaming(model, processor, _evaluators(data, settings), out, progress, label)
    prs = streaming["prs"]["summary"]
    metrics: dict[str, Any] = {"prs_u": prs["overall"]["prs_u"], "prs_b": prs["overall"]["prs_b"]}
    for task in settings.prs_tasks:
        group = prs["groups"].get(task, {})
        metrics[f"{task}/prs_u"], metrics[f"{task}/prs_b"] = group.get("prs_u"), group.get("prs_b")
    metrics["pauc"] = streaming["pauc"]["metrics"].get("pauc_w0.5")
    mcqa = _mcqa(model, processor, data, settings, progress, label)
    metrics["acc"], metrics["ps"] = mcqa["acc"], mcqa["ps"]
    predictions = {}
    for name in ("prs", "pauc"):
        path = out / name / "predictions.jsonl"
        for line in path.read_text().splitlines() if path.is_file() else []:
            record = json.loads(line)
            predictions[record["id"]] = [(r["time"], r["text"]) for r in record["responses"]]
    results = {"metrics": metrics, "mcqa": mcqa, "files": {k: v["files"] for k, v in streaming.items()}}
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    return {**metrics, "predictions": predictions}
