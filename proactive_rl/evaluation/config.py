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

Everything is validated when the recipe is parsed, so a typo fails before the first training step.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from proactive_eval.counterfactual import check_counterfactuals
from proactive_rewards.task_table import load_tasks
from proactive_rl.errors import InputError, did_you_mean
from proactive_rl.evaluation.base import evaluator_class
from proactive_rl.evaluation.implied import episode_evaluators, is_training_recipe, recipe_evaluators
from proactive_rl.shipped import read_recipe

JUDGE_TYPES = ("rule", "openai")
ON_ERROR = ("skip", "raise")


def _check_keys(raw: Any, cls, where: str, required: tuple[str, ...] = ()) -> dict:
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping, got {raw!r}")
    valid = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - valid)
    if unknown:
        hint = did_you_mean(unknown[0], valid).replace(" did you mean", f" `{unknown[0]}`: did you mean")
        raise InputError(f"{where}: unknown keys {unknown};{hint} expected some of {sorted(valid)}")
    missing = [k for k in required if k not in raw]
    if missing:
        raise InputError(f"{where}: missing {missing} (present: {sorted(raw)})")
    return raw


@dataclass
class EvaluatorConfig:
    """One evaluator.

    Args:
        type (`str`): a registered evaluator type (`proactive_rl.evaluation.base.EVALUATORS`): ``prs`` (streaming
            PRS-U/B, docs/spec.md §4), ``pauc`` (streaming PAUC with a judge, docs/spec.md §5), ``mcqa``
            (ProactiveBench acc / ps, docs/spec.md §6) or ``oeg`` (ProactiveBench open-ended agg / acc / ps with a
            judge, docs/spec.md §6); or the import path of a user `Evaluator` subclass (``package.module.Class``).
        name (`str`, *optional*): the metric prefix and folder name; defaults to the type (its last part for an
            import path).
        episodes (`list`, *optional*): ``prs`` / ``pauc``: held-out episode sources, the form of
            ``dataset_mixture`` (`proactive_rl.data.mixture.DatasetSource`: episode files or synthetic tasks).
        environments (`list`, *optional*): ``mcqa``: ``{kind, n, seed, size}`` synthetic environments (plus any
            difficulty knob of `proactive_rl.synthetic.make_environments`) or ``{path, dataset, data_dir}``
            ProactiveBench JSONL; ``oeg``: ``{path, dataset, data_dir}`` only.
        max_items (`int`, *optional*): evaluate only the first N episodes / environments.
        max_new_tokens (`int`, *optional*, defaults to `16`): longest assistant turn.
        max_frames (`int`, *optional*): keep only the latest K frames in context (docs/spec.md §2).
        alpha (`float`, *optional*, defaults to `0.05`): PRS temporal decay (docs/spec.md §4).
        judge (`dict`, *optional*): ``pauc`` / ``oeg``: the judge; ``prs``: the content scorer of free-text tasks
            (intervention, docs/spec.md §4). ``{type: rule, kind: token_f1|rouge_l}`` (default: token_f1, the
            intervention reward's scorer) or ``{type: openai, base_url, model, ...}`` (any
            `proactive_eval.judges.OpenAIJudge` argument; ``oeg`` sets its ``system_prompt`` to the authors' OEG
            judge prompt).
        hint (`bool`, *optional*, defaults to `False`): ``mcqa``: add the dataset's hint to each question, as the
            suggestion trainer's ``hint`` does (ProactiveBench §4.3); ``oeg``: append the generic OEG hint to the
            question (ProactiveBench Table 9; `proactive_eval.oeg.OEG_HINT`).
        answer_letters_only (`bool`, *optional*, defaults to `False`): ``mcqa``: only option letters may be
            generated (the first N, N the most options any of the environments shows), as the suggestion
            trainer's ``answer_letters_only`` samples.
        batch_size (`int`, *optional*, defaults to `8`): ``prs`` / ``pauc``: episodes played in lockstep, one
            batched vision call and one batched language-model call per step (`proactive_rl.streaming.batch`; the
            same predictions as one at a time, ``1``); each holds its own KV cache, so memory grows with it.
        on_error (`str`, *optional*, defaults to `"skip"`): ``prs`` / ``pauc``: an episode whose video is missing,
            truncated or undecodable is skipped, named in the summary and counted in ``coverage`` (``skip``), or
            fails the evaluator (``raise``).
        protocol (`str`, *optional*, defaults to `"filtered"`): ``mcqa`` / ``oeg`` on ProactiveBench JSONL: the
            paper's filtered benchmark (Table 1) or ``"unfiltered"`` (Table 4, and any data that is not the
            benchmark's, e.g. synthetic exports); `proactive_eval.formats.proactivebench_protocol`.
        skip (`dict`, *optional*): the authors' skip arguments (default ``{strong_occlusions:
            false}``; ``{}`` keeps all).
        baseline_episodes (`list`, *optional*): ``prs`` / ``pauc``: the split the blind schedule is fitted on
            (episode sources, as ``episodes``; e.g. the training episodes); without it, leave-one-out on the
            evaluated episodes (docs/spec.md §14).
        baseline_environments (`list`, *optional*): ``mcqa``: the environments the image-blind policy is fitted
            on (as ``environments``); without them, leave-one-out.
        counterfactual (`list`, *optional*): frame counterfactuals to play besides the episodes' own frames:
            ``swap`` (another evaluated episode's frames, same task) and, for ``prs`` / ``pauc``, ``freeze`` (the
            first frame repeated); reported as ``<metric>_swap`` and ``vision_gain_<metric>`` (docs/spec.md §14).
        annotations (`str`, *optional*): ``ovo_bench`` / ``streamingbench_po``: the official annotation file; their
            ``protocol`` is ``official`` or ``streaming`` (the default), ``streamingbench_po`` also ``proactive``
            (docs/ovo_bench.md, docs/streamingbench.md).
        video_root (`str`, *optional*): ``ovo_bench`` / ``streamingbench_po``: the folder the file's video paths
            are relative to (default: the file's folder).
    """

    type: str
    name: str | None = None
    episodes: Any = None
    environments: Any = None
    max_items: int | None = None
    max_new_tokens: int = 16
    max_frames: int | None = None
    alpha: float = 0.05
    judge: dict[str, Any] | None = None
    hint: bool = False
    answer_letters_only: bool = False
    batch_size: int = 8
    on_error: str = "skip"
    protocol: str = "filtered"
    skip: dict[str, Any] | None = None
    baseline_episodes: Any = None
    baseline_environments: Any = None
    counterfactual: list[str] | None = None
    annotations: str | None = None
    video_root: str | None = None

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> EvaluatorConfig:
        cfg = cls(**_check_keys(raw, cls, where, required=("type",)))
        evaluator = evaluator_class(cfg.type, f"{where}.type")
        cfg.name = str(cfg.name or cfg.type.replace(":", ".").rpartition(".")[2])
        for key in ("hint", "answer_letters_only"):
            if not isinstance(getattr(cfg, key), bool):
                raise InputError(f"{where}.{key}: a boolean, got {getattr(cfg, key)!r}")
        if cfg.on_error not in ON_ERROR:
            raise InputError(f"{where}.on_error: expected one of {', '.join(ON_ERROR)}, got {cfg.on_error!r}")
        for key in ("max_items", "max_frames", "batch_size"):
            value = getattr(cfg, key)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InputError(f"{where}.{key}: must be an integer >= 1, got {value!r}")
        if not isinstance(cfg.max_new_tokens, int) or cfg.max_new_tokens < 1:
            raise InputError(f"{where}.max_new_tokens: must be an integer >= 1, got {cfg.max_new_tokens!r}")
        judge = cfg.judge if cfg.judge is not None else {"type": "rule", "kind": "token_f1"}
        if not isinstance(judge, dict) or judge.get("type", "rule") not in JUDGE_TYPES:
            raise InputError(f"{where}.judge: expected {{type: {' | '.join(JUDGE_TYPES)}, ...}}, got {judge!r}")
        if judge.get("type") == "openai" and not {"base_url", "model"} <= set(judge):
            raise InputError(f"{where}.judge: an openai judge needs 'base_url' and 'model'")
        cfg.judge = judge

        allowed = ("swap",) if cfg.type in ("mcqa", "oeg") else ("swap", "freeze")
        cfg.counterfactual = check_counterfactuals(cfg.counterfactual, f"{where}.counterfactual", allowed)
        evaluator.check_config(cfg, where)  # the type's own fields (episodes, environments, hint, ...)
        return cfg


@dataclass
class EvalCallbackConfig:
    """When and what `ProactiveEvalCallback` evaluates.

    Args:
        evaluators (`list[EvaluatorConfig]`): what to evaluate (see `EvaluatorConfig`); names must be unique.
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
        cfg = cls(**_check_keys(raw, cls, where, required=("evaluators",)))
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
