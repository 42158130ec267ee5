"""Configuration of `ProactiveEvalCallback` and `proactive-rl eval`, read from the recipe YAML's ``eval_callback``.

Example (a recipe's ``eval_callback`` block; every key is optional except ``evaluators``)::

    eval_callback:
      on_save: true            # evaluate each checkpoint as it is saved
      every_n_steps: null      # and/or every N optimizer steps
      fail_fast: false         # a failing evaluator is recorded as incomplete; training goes on
      # an episode whose video cannot be played is skipped and counted (coverage); on_error: raise stops
      evaluators:
        - {type: prs, episodes: [{source: synthetic, task: atomic, num_episodes: 4, seed: 99}]}
        - {type: pauc, episodes: [{source: data/pvqa_val.json}], max_items: 50,
           judge: {type: openai, base_url: "http://localhost:8000/v1", model: judge}}
        - {type: mcqa, environments: [{kind: occlusion, n: 8, seed: 7}]}
        - {type: oeg, environments: [{path: data/QuickDraw_preprocessed.jsonl, dataset: QD}], max_new_tokens: 256,
           judge: {type: openai, base_url: "http://localhost:8000/v1", model: judge}}
        - {type: ovo_bench, annotations: data/ovo_bench_new.json, video_root: data/src_videos, protocol: streaming}

Each evaluator's entry is read into the configuration dataclass its ``type`` declares (`Evaluator.config_class`:
`proactive_rl.evaluation.evaluators.PRSConfig` / ``PAUCConfig``, `proactive_rl.evaluation.proactivebench.MCQAConfig`
/ ``OEGConfig``, `proactive_rl.evaluation.benchmark.BenchmarkConfig` for a registered benchmark's name), with that
type's fields and defaults only: a key of another type, or a typo, fails naming the closest field. Everything is
validated when the recipe is parsed, so a typo fails before the first training step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proactive_rewards.task_table import load_tasks
from proactive_rl.errors import InputError
from proactive_rl.evaluation.base import EvaluatorConfig, check_keys
from proactive_rl.evaluation.implied import episode_evaluators, is_training_recipe, recipe_evaluators
from proactive_rl.shipped import read_recipe

__all__ = [
    "EvalCallbackConfig",
    "EvaluatorConfig",
    "check_flag",
    "check_judge",
    "episodes_eval_config",
    "load_eval_config",
]

JUDGE_TYPES = ("rule", "openai")
RULE_JUDGE = {"type": "rule", "kind": "token_f1"}  # the intervention reward's scorer


def check_judge(judge: Any, where: str) -> dict:
    """An evaluator's ``judge`` block, checked; `None` gives the rule judge (token-F1)."""
    judge = judge if judge is not None else dict(RULE_JUDGE)
    if not isinstance(judge, dict) or judge.get("type", "rule") not in JUDGE_TYPES:
        raise InputError(f"{where}: expected {{type: {' | '.join(JUDGE_TYPES)}, ...}}, got {judge!r}")
    if judge.get("type") == "openai" and not {"base_url", "model"} <= set(judge):
        raise InputError(f"{where}: an openai judge needs 'base_url' and 'model'")
    return judge


def check_flag(value: Any, where: str) -> None:
    """`value`: a boolean."""
    if not isinstance(value, bool):
        raise InputError(f"{where}: a boolean, got {value!r}")


@dataclass
class EvalCallbackConfig:
    """When and what `ProactiveEvalCallback` evaluates.

    Args:
        evaluators (`list[EvaluatorConfig]`): what to evaluate, each of its type's configuration class (see
            `EvaluatorConfig`); names must be unique.
        on_save (`bool`, *optional*, defaults to `True`): evaluate every saved checkpoint, writing
            ``checkpoint-N/eval/``.
        on_evaluate (`bool`, *optional*, defaults to `False`): evaluate whenever the Trainer evaluates.
        every_n_steps (`int`, *optional*): also evaluate every N optimizer steps (written to
            ``output_dir/eval/step-N/``).
        fail_fast (`bool`, *optional*, defaults to `False`): re-raise an evaluator's failure (stopping training)
            instead of recording it as incomplete.
        plots (`bool`, *optional*, defaults to `True`): draw the timeline / PAUC plots (and log them to wandb).
        log_samples (`int`, *optional*, defaults to `4`): episodes per evaluator in the wandb sample table.
        progress (`bool`, *optional*): progress bars while evaluating; by default on when stderr is a terminal
            (on the main process), off otherwise (a log file, a batch job).
        register_tasks (`list[str]`, *optional*): user tasks the evaluators' episodes use, by import path
            (`proactive_rewards.load_tasks`); a recipe's top-level ``register_tasks`` serves as well.
    """

    evaluators: list = field(default_factory=list)
    on_save: bool = True
    on_evaluate: bool = False
    every_n_steps: int | None = None
    fail_fast: bool = False
    plots: bool = True
    log_samples: int = 4
    progress: bool | None = None
    register_tasks: list | None = None

    @classmethod
    def from_dict(cls, raw: Any, where: str = "eval_callback") -> EvalCallbackConfig:
        if isinstance(raw, EvalCallbackConfig):
            return raw
        cfg = cls(**check_keys(raw, cls, where, required=("evaluators",)))
        load_tasks(cfg.register_tasks, f"{where}.register_tasks")  # before an evaluator validates its episodes
        if not isinstance(cfg.evaluators, list) or not cfg.evaluators:
            raise InputError(f"{where}.evaluators: expected a non-empty list, got {cfg.evaluators!r}")
        cfg.evaluators = [
            e if isinstance(e, EvaluatorConfig) else EvaluatorConfig.from_dict(e, f"{where}.evaluators[{i}]")
            for i, e in enumerate(cfg.evaluators)
        ]
        names = [e.name for e in cfg.evaluators]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise InputError(f"{where}.evaluators: duplicate names {duplicates}; give each a distinct 'name'")
        if cfg.every_n_steps is not None and (not isinstance(cfg.every_n_steps, int) or cfg.every_n_steps < 1):
            raise InputError(f"{where}.every_n_steps: must be an integer >= 1, got {cfg.every_n_steps!r}")
        if not (cfg.on_save or cfg.on_evaluate or cfg.every_n_steps):
            raise InputError(f"{where}: nothing triggers an evaluation; set on_save, on_evaluate or every_n_steps")
        return cfg


def load_eval_config(path: str) -> EvalCallbackConfig:
    """An `EvalCallbackConfig` from a YAML file: a recipe (its ``eval_callback`` block, else the evaluators its
    held-out data implies: `proactive_rl.evaluation.implied`) or the block alone."""
    raw = read_recipe(path)
    if isinstance(raw, dict) and "eval_callback" in raw:
        load_tasks(raw.get("register_tasks"), f"{path}: register_tasks")
        return EvalCallbackConfig.from_dict(raw["eval_callback"], f"{path}: eval_callback")
    if is_training_recipe(raw):
        load_tasks(raw.get("register_tasks"), f"{path}: register_tasks")
        return EvalCallbackConfig.from_dict({"evaluators": recipe_evaluators(raw, path)}, f"{path}: held-out data")
    return EvalCallbackConfig.from_dict(raw, path)


def episodes_eval_config(paths: list[str]) -> EvalCallbackConfig:
    """The `EvalCallbackConfig` of ``proactive-rl eval --episodes FILE ...``: PRS / PAUC as the episodes imply."""
    return EvalCallbackConfig.from_dict({"evaluators": episode_evaluators(list(paths), "--episodes")}, "--episodes")
