"""The held-out environments of a suggestion GRPO run, played greedily by the MCQA evaluator (docs/spec.md §6)."""

from __future__ import annotations

from pathlib import Path

from proactive_rl.evaluation import MCQAConfig, MCQAEvaluator, evaluate_model
from proactive_rl.grpo.suggestion.config import SuggestionScriptArguments


def held_out_evaluator(script_args: SuggestionScriptArguments, max_new_tokens: int):
    """The MCQA evaluator (`proactive_rl.evaluation`) of the held-out environments: greedy ``acc`` / ``ps``
    (docs/spec.md §6) with the trainer's prompt (``hint``) and decoding (``answer_letters_only``)."""
    config = MCQAConfig(
        type="mcqa",
        name="mcqa",
        max_new_tokens=max_new_tokens,
        hint=script_args.hint,
        answer_letters_only=script_args.answer_letters_only,
    )
    envs = [env for src in script_args.eval_environments for env in src.build(script_args.hint)]
    return MCQAEvaluator(config, items=envs)


def evaluate_held_out(trainer, script_args: SuggestionScriptArguments, max_new_tokens: int, when: str) -> dict | None:
    """``{"acc", "ps", "n", ...}`` of the held-out environments, on every rank (`evaluate_model`: sharded, ZeRO-3
    safe); its results and per-environment outcomes go to ``<output_dir>/suggestion_eval/<when>/``."""
    if not script_args.eval_environments:
        return None

    evaluator = held_out_evaluator(script_args, max_new_tokens)
    out = Path(trainer.args.output_dir) / "suggestion_eval" / when
    results = evaluate_model(
        trainer.model, trainer.processing_class, [evaluator], out_dir=out, trainer=trainer, fail_fast=True
    )
    return dict(results["evaluators"][evaluator.name]["summary"])
