"""Evaluators as training callbacks, and the checkpoint evaluation behind `proactive-rl eval`.

- `ProactiveEvalCallback`: a `transformers.TrainerCallback` evaluating the live model (streaming PRS, PAUC with a
  judge, ProactiveBench MCQA acc / ps and OEG agg / acc / ps with a judge) on save / evaluate / every N steps,
  ZeRO-3 safe, failure tolerant.
- `EvalCallbackConfig` / `EvaluatorConfig`: its configuration, the ``eval_callback`` block of a recipe.
- `evaluate_model`: one evaluation of a model on every rank (the callback and `proactive-rl eval` share it).
"""

from proactive_rl.evaluation.callback import ProactiveEvalCallback
from proactive_rl.evaluation.config import EvalCallbackConfig, EvaluatorConfig, load_eval_config
from proactive_rl.evaluation.evaluators import (
    EVALUATORS,
    Evaluator,
    MCQAEvaluator,
    OEGEvaluator,
    PAUCEvaluator,
    PRSEvaluator,
    build_evaluators,
)
from proactive_rl.evaluation.run import EvaluationFailed, evaluate_model

__all__ = [
    "EVALUATORS",
    "EvalCallbackConfig",
    "EvaluationFailed",
    "Evaluator",
    "EvaluatorConfig",
    "MCQAEvaluator",
    "OEGEvaluator",
    "PAUCEvaluator",
    "PRSEvaluator",
    "ProactiveEvalCallback",
    "build_evaluators",
    "evaluate_model",
    "load_eval_config",
]
