"""The one way anything is evaluated: evaluators, the training callback and the checkpoint evaluation behind
`proactive-rl eval` (the demo and the suggestion trainer's end-of-run evaluation use them too).

- `Evaluator`, `register_evaluator`, `EVALUATORS`: the evaluator types (streaming PRS, PAUC with a judge,
  ProactiveBench MCQA acc / ps and OEG agg / acc / ps with a judge), each registered under its ``type``, with the
  configuration dataclass of its own fields (`PRSConfig`, `PAUCConfig`, `MCQAConfig`, `OEGConfig`).
- `BenchmarkEvaluator` / `BenchmarkConfig`: every benchmark registered in `proactive_eval.benchmarks` and run item by
  item (OVO-Bench, StreamingBench Proactive Output, a new one), under its name as ``type``.
- `ProactiveEvalCallback`: a `transformers.TrainerCallback` evaluating the live model on save / evaluate / every N
  steps, ZeRO-3 safe, failure tolerant.
- `EvalCallbackConfig` / `EvaluatorConfig`: its configuration, the ``eval_callback`` block of a recipe
  (`EvaluatorConfig.from_dict` reads an evaluator's entry into its type's configuration class).
- `evaluate_model`: one evaluation of a model on every rank (everything above shares it).
- `image_answer_fn` / `mcqa_answer_fn`: answer an observation (an image and a question) with the prompt the
  suggestion trainer trains on.
"""

from proactive_rl.evaluation.base import EVALUATORS, Evaluator, Scored, build_evaluators, register_evaluator
from proactive_rl.evaluation.benchmark import BenchmarkConfig, BenchmarkEvaluator
from proactive_rl.evaluation.callback import ProactiveEvalCallback
from proactive_rl.evaluation.config import EvalCallbackConfig, EvaluatorConfig, load_eval_config
from proactive_rl.evaluation.evaluators import PAUCConfig, PAUCEvaluator, PRSConfig, PRSEvaluator
from proactive_rl.evaluation.policy import image_answer_fn, mcqa_answer_fn
from proactive_rl.evaluation.proactivebench import MCQAConfig, MCQAEvaluator, OEGConfig, OEGEvaluator
from proactive_rl.evaluation.run import EvaluationFailed, evaluate_model

__all__ = [
    "EVALUATORS",
    "BenchmarkConfig",
    "BenchmarkEvaluator",
    "EvalCallbackConfig",
    "EvaluationFailed",
    "Evaluator",
    "EvaluatorConfig",
    "MCQAConfig",
    "MCQAEvaluator",
    "OEGConfig",
    "OEGEvaluator",
    "PAUCConfig",
    "PAUCEvaluator",
    "PRSConfig",
    "PRSEvaluator",
    "ProactiveEvalCallback",
    "Scored",
    "build_evaluators",
    "evaluate_model",
    "image_answer_fn",
    "load_eval_config",
    "mcqa_answer_fn",
    "register_evaluator",
]
