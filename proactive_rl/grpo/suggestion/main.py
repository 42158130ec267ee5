"""Single-turn proactive-suggestion GRPO (ProactiveBench §5, Appendix C; docs/spec.md §6, §7) on TRL's `GRPOTrainer`.

An image-model learns to ask for help: each prompt is one state of an MCQA environment (image + question +
lettered options); 8 sampled answers are scored ``1`` for the correct category, ``r_p`` for a valid proactive
suggestion and ``0`` otherwise (``proactive_rewards.get_reward("proactive_suggestion", r_p=...)``, the same
parser the MCQA evaluator uses). Nothing here overrides TRL: images, advantages, clipping, LoRA and the vLLM
path are `trl.GRPOTrainer` 1.16's own.

Launch (the recipe's first line says the same)::

    accelerate launch --config_file launch/zero3.yaml --num_processes 4 -m proactive_rl.grpo.suggestion \\
        --config recipes/proactivebench/grpo_qwen2_5vl_3b_rp050.yaml

The paper's two models, Qwen2.5-VL-3B and LLaVA-NeXT-Mistral-7B (``grpo_llava_next_mistral_7b_rp*.yaml``), go
through the same code: the processor's chat template and image fields (``image_grid_thw`` or ``image_sizes``) are
whatever `AutoProcessor` returns, and TRL batches them.

`proactive-rl train` dispatches here when the recipe says ``trainer: grpo_suggestion``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from trl import GRPOConfig, ModelConfig, TrlParser

from proactive_rl.data.mcqa import EnvironmentSpec, parse_environments
from proactive_rl.training import (
    attach_eval_callback,
    check_model_args,
    eval_callback_config,
    finish,
    load_for_training,
    peft_config_for,
    run_entry_point,
)

logger = logging.getLogger(__name__)

BACKENDS = ("auto", "vllm", "transformers")


@dataclass
class SuggestionScriptArguments:
    """Data, reward and generation backend of a proactive-suggestion GRPO run.

    Args:
        trainer (`str`, *optional*, defaults to `"grpo_suggestion"`): the trainer `proactive-rl train` dispatches to.
        environments (`list`): training environments, see `proactive_rl.data.mcqa.EnvironmentSpec`. Example::

            environments:
              - {source: synthetic, kind: sketch, num_envs: 64, seed: 0}
              - {source: data/QuickDraw/train.jsonl, dataset: QD}
        eval_environments (`list`, *optional*): held-out environments, played greedily before and after training
            by the MCQA evaluator of `proactive_rl.evaluation` with this run's ``hint`` and ``answer_letters_only``
            (``acc``, ``ps``; docs/spec.md §6), written to ``<output_dir>/mcqa_eval.json`` (per-environment
            outcomes in ``<output_dir>/mcqa_eval/{before,after}/``).
        r_p (`float`, *optional*, defaults to `0.5`): reward of a valid proactive suggestion (paper: 0.5/0.75/1.0).
        hint (`bool`, *optional*, defaults to `False`): add the dataset's hint to each question (ProactiveBench §4.3).
        answer_letters_only (`bool`, *optional*, defaults to `False`): sample (and evaluate) only option-letter
            tokens. For a randomly initialised tiny model, which would otherwise almost never name an option; with
            ``max_completion_length: 1`` each completion is one letter.
        generation_backend (`str`, *optional*, defaults to `"auto"`): ``"auto"`` uses TRL's vLLM path when vLLM is
            installed and a CUDA GPU is visible, else transformers' `generate` (logged); ``"vllm"`` fails at start-up
            when either is missing; ``"transformers"`` never uses vLLM.
        reward_on_error (`str`, *optional*, defaults to `"raise"`): a reward that raises or returns the wrong number
            of values stops the run naming it (``"raise"``), or (``"skip"``) its group is skipped and
            ``rewards/<name>/error_rate`` logged (`proactive_rl.grpo.reward_guard`).
        max_reward_error_rate (`float`, *optional*, defaults to `0.1`): with ``"skip"``, the error rate that stops the run.
        warm_start_steps (`int`, *optional*, defaults to `0`): before GRPO, train this many supervised steps on the
            training environments' reference images (`proactive_rl.grpo.suggestion.warm_start`): a randomly
            initialised tiny model then recognises the categories, as the paper's instruction-tuned models do.
        warm_start_lr (`float`, *optional*, defaults to `3e-3`): its learning rate.
        warm_start_suggest_rate (`float`, *optional*, defaults to `0.1`): fraction of warm-start rows whose target is
            the suggestion option (teaches which option it is, not when to use it).
        warm_start_states (`str`, *optional*, defaults to `"reference"`): warm-start rows from the reference images
            only, or from ``"all"`` states with the correct category as target (each state's best guess).
        replay_mixture (`list`, *optional*): streaming episodes (a dataset mixture, docs/spec.md §1) replayed at every
            warm-start and GRPO step as a distillation term towards the starting model
            (`proactive_rl.grpo.suggestion.replay`), so a streaming assistant keeps its streaming skills.
        replay_coef (`float`, *optional*, defaults to `1.0`): weight ``c`` of that term.
        replay_batch_size (`int`, *optional*, defaults to `2`): dialogues per replay batch.
        eval_before (`bool`, *optional*, defaults to `True`): also play the held-out environments before training.
        eval_callback (`dict`, *optional*): evaluators run on the live model while training (on save / every N
            steps), as in SFT: `proactive_rl.evaluation.EvalCallbackConfig`.
    """

    trainer: str = field(default="grpo_suggestion", metadata={"help": "Trainer to dispatch to."})
    environments: Any = field(default=None, metadata={"help": "Training environments (list of mappings)."})
    eval_environments: Any = field(default=None, metadata={"help": "Held-out environments (same form)."})
    r_p: float = field(default=0.5, metadata={"help": "Reward of a valid proactive suggestion."})
    hint: bool = field(default=False, metadata={"help": "Add the dataset hint to each question."})
    answer_letters_only: bool = field(default=False, metadata={"help": "Sample only option letters."})
    generation_backend: str = field(default="auto", metadata={"help": f"One of {BACKENDS}."})
    reward_on_error: str = field(default="raise", metadata={"help": "raise or skip."})
    max_reward_error_rate: float = field(default=0.1, metadata={"help": "Error rate that stops a 'skip' run."})
    warm_start_steps: int = field(default=0, metadata={"help": "Supervised warm-start steps before GRPO."})
    warm_start_lr: float = field(default=3e-3, metadata={"help": "Warm-start learning rate."})
    warm_start_suggest_rate: float = field(default=0.1, metadata={"help": "Warm-start rows targeting the suggestion."})
    warm_start_states: str = field(default="reference", metadata={"help": "reference or all."})
    replay_mixture: Any = field(default=None, metadata={"help": "Streaming episodes replayed (distilled) each step."})
    replay_coef: float = field(default=1.0, metadata={"help": "Weight of the streaming replay term."})
    replay_batch_size: int = field(default=2, metadata={"help": "Dialogues per replay batch."})
    eval_before: bool = field(default=True, metadata={"help": "Evaluate the held-out environments before training."})
    # evaluators run while training: a mapping, see `proactive_rl.evaluation.EvalCallbackConfig`.
    eval_callback: Any = field(default=None, metadata={"help": "Evaluators run while training."})

    def __post_init__(self):
        from proactive_rl.grpo.reward_guard import ON_ERROR

        if self.trainer != "grpo_suggestion":
            raise ValueError(f"trainer: this entry point runs 'grpo_suggestion', got {self.trainer!r}")
        if self.environments is None:
            raise ValueError("environments: required (a list of sources: synthetic kinds or ProactiveBench JSONL)")
        self.environments = parse_environments(self.environments, "environments")
        if self.eval_environments is not None:
            self.eval_environments = parse_environments(self.eval_environments, "eval_environments")
        if self.generation_backend not in BACKENDS:
            raise ValueError(f"generation_backend: expected one of {BACKENDS}, got {self.generation_backend!r}")
        from proactive_rl.grpo.suggestion.warm_start import STATES

        if self.warm_start_states not in STATES:
            raise ValueError(f"warm_start_states: expected one of {', '.join(STATES)}, got {self.warm_start_states!r}")
        if self.reward_on_error not in ON_ERROR:
            raise ValueError(f"reward_on_error: expected one of {ON_ERROR}, got {self.reward_on_error!r}")
        self.eval_callback = eval_callback_config(self.eval_callback)  # validated before a model is loaded
        if self.replay_mixture is not None:
            from proactive_rl.data import parse_mixture

            self.replay_mixture = parse_mixture(self.replay_mixture, "replay_mixture")
            if not self.replay_coef >= 0:
                raise ValueError(f"replay_coef: expected a number >= 0, got {self.replay_coef!r}")
        # r_p itself is checked by the reward factory (finite number) when the reward is built.


# --- generation backend --------------------------------------------------------------------------------


def vllm_status() -> tuple[bool, str]:
    """``(available, reason)``: vLLM is importable and a CUDA GPU is visible."""
    import importlib.util

    import torch

    if importlib.util.find_spec("vllm") is None:
        return False, "vLLM is not installed (pip install -e '.[vllm]')"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible"
    return True, "vLLM is installed and a CUDA GPU is visible"


def resolve_generation_backend(backend: str, training_args: GRPOConfig) -> str:
    """Set ``training_args.use_vllm`` from the requested backend and what this machine has; returns the backend.

    ``use_vllm: true`` in a recipe counts as ``generation_backend: vllm``. Never claims vLLM when it is absent.
    """
    if training_args.use_vllm and backend == "auto":
        backend = "vllm"
    available, reason = vllm_status()
    if backend == "vllm" and not available:
        raise RuntimeError(
            f"generation_backend=vllm (or use_vllm=true) but {reason}; "
            "set generation_backend: auto or transformers to generate with transformers"
        )
    use = backend == "vllm" or (backend == "auto" and available)
    training_args.use_vllm = use
    chosen = f"vllm ({training_args.vllm_mode})" if use else "transformers"
    logger.info("generation backend: %s (%s)", chosen, reason if backend == "auto" else f"requested {backend}")
    return "vllm" if use else "transformers"


# --- model, data, reward ------------------------------------------------------------------------------


def load_policy(model_args: ModelConfig, seed: int = 0):
    """Model and processor (`load_model_spec`; ``llava_next`` tiny included), without the state tokens:
    single-turn MCQA does not use them."""
    return load_for_training(model_args, seed=seed, state_tokens=False)


def build_rows(sources: list[EnvironmentSpec], hint: bool) -> list[dict]:
    from proactive_rl.data.mcqa import environment_rows, load_rows

    rows = []
    for src in sources:
        if src.format == "rows":
            rows.extend(load_rows(src.source))  # single-turn rows as built (their questions carry no hint)
            continue
        envs = src.build(hint)
        for env in envs:
            rows.extend(environment_rows(env, max_states=src.max_states, hint=hint))
        logger.info("%s: %d environments", src.name, len(envs))
    return rows


def build_rewards(script_args: SuggestionScriptArguments, num_generations: int) -> list:
    from proactive_rewards import get_reward
    from proactive_rl.grpo.reward_guard import guard_rewards

    reward = get_reward("proactive_suggestion", r_p=script_args.r_p)
    return guard_rewards([reward], script_args.reward_on_error, num_generations, script_args.max_reward_error_rate)


# --- evaluation ------------------------------------------------------------------------------------------


def held_out_evaluator(script_args: SuggestionScriptArguments, max_new_tokens: int):
    """The MCQA evaluator (`proactive_rl.evaluation`) of the held-out environments: greedy ``acc`` / ``ps``
    (docs/spec.md §6) with the trainer's prompt (``hint``) and decoding (``answer_letters_only``)."""
    from proactive_rl.evaluation import EvaluatorConfig, MCQAEvaluator

    config = EvaluatorConfig(
        type="mcqa",
        name="mcqa",
        max_new_tokens=max_new_tokens,
        hint=script_args.hint,
        answer_letters_only=script_args.answer_letters_only,
    )
    envs = [env for src in script_args.eval_environments for env in src.build(script_args.hint)]
    return MCQAEvaluator(config, items=envs)


# --- entry points ----------------------------------------------------------------------------------------


def build_trainer(script_args: SuggestionScriptArguments, training_args: GRPOConfig, model_args: ModelConfig):
    """Model, rows (validated before the first step), guarded reward and `trl.GRPOTrainer`, ready to `train()`."""
    from trl import GRPOTrainer

    from proactive_rl.data.mcqa import rows_to_dataset, suppressed_tokens

    check_model_args(model_args)  # a missing model folder or an unusable QLoRA flag fails first
    resolve_generation_backend(script_args.generation_backend, training_args)
    model, processor = load_policy(model_args, seed=training_args.seed)
    replay = None
    if script_args.replay_mixture:
        from proactive_rl.grpo.suggestion.replay import StreamingReplay

        replay = StreamingReplay(
            model, processor, script_args.replay_mixture, script_args.replay_batch_size, seed=training_args.seed
        )
    if script_args.warm_start_steps > 0:
        from proactive_rl.grpo.suggestion.warm_start import warm_start

        envs = [env for src in script_args.environments if src.source == "synthetic" for env in src.build()]
        if not envs:
            raise ValueError("warm_start_steps: the warm start needs synthetic training environments")
        warm_start(
            model,
            processor,
            envs,
            steps=script_args.warm_start_steps,
            learning_rate=script_args.warm_start_lr,
            suggest_rate=script_args.warm_start_suggest_rate,
            seed=training_args.seed,
            states=script_args.warm_start_states,
            replay=replay,
            replay_coef=script_args.replay_coef,
        )
    rows = build_rows(script_args.environments, script_args.hint)
    logger.info("training rows (single-turn environment states): %d", len(rows))
    suppress = None
    if script_args.answer_letters_only:
        if training_args.max_completion_length != 1:
            raise ValueError(
                "answer_letters_only: needs max_completion_length: 1 (only letters can be sampled, so a longer "
                f"completion would be several letters), got {training_args.max_completion_length}"
            )
        tokenizer = getattr(processor, "tokenizer", processor)
        suppress = suppressed_tokens(model, tokenizer, max(len(r["options"]) for r in rows))
        training_args.generation_kwargs = {**(training_args.generation_kwargs or {}), "suppress_tokens": suppress}
    dataset = rows_to_dataset(rows)
    reward_funcs = build_rewards(script_args, training_args.num_generations)
    for reward in reward_funcs:  # a missing reward column fails now, not as a silent 0 (no r_p; docs/spec.md §7)
        check = getattr(getattr(reward, "fn", reward), "check_columns", None)
        if check is not None:
            check(dataset.column_names)
    trainer = (GRPOTrainer if replay is None else replay_trainer(replay, script_args.replay_coef))(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset,
        processing_class=processor,
        peft_config=peft_config_for(model_args, model, processor, state_tokens=False),  # MCQA: no state tokens
    )
    attach_eval_callback(trainer, script_args.eval_callback)
    trainer.suppress_tokens = suppress
    trainer.generation_backend = "vllm" if training_args.use_vllm else "transformers"
    return trainer


def replay_trainer(replay, coef: float):
    """`trl.GRPOTrainer` whose loss adds the streaming replay term (`proactive_rl.grpo.suggestion.replay`)."""
    from trl import GRPOTrainer

    class ReplayGRPOTrainer(GRPOTrainer):
        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
            term = replay.loss(model)
            self._metrics["train"]["replay_kl"].append(term.item())
            return loss + coef * term

    return ReplayGRPOTrainer


def _evaluate_trainer(trainer, script_args: SuggestionScriptArguments, max_new_tokens: int, when: str) -> dict | None:
    """``{"acc", "ps", "n", ...}`` of the held-out environments, on every rank (`evaluate_model`: sharded, ZeRO-3
    safe); its results and per-environment outcomes go to ``<output_dir>/mcqa_eval/<when>/``."""
    if not script_args.eval_environments:
        return None
    from pathlib import Path

    from proactive_rl.evaluation import evaluate_model

    evaluator = held_out_evaluator(script_args, max_new_tokens)
    out = Path(trainer.args.output_dir) / "mcqa_eval" / when
    results = evaluate_model(
        trainer.model, trainer.processing_class, [evaluator], out_dir=out, trainer=trainer, fail_fast=True
    )
    return dict(results["evaluators"][evaluator.name]["summary"])


def main(script_args: SuggestionScriptArguments, training_args: GRPOConfig, model_args: ModelConfig):
    """Evaluate (held-out, if given), train, evaluate again, save (open-r1 style entry point)."""
    trainer = build_trainer(script_args, training_args, model_args)
    max_new = training_args.max_completion_length or 16
    before = _evaluate_trainer(trainer, script_args, max_new, "before") if script_args.eval_before else None
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    after = _evaluate_trainer(trainer, script_args, max_new, "after")
    reports = {}
    if after is not None:
        reports["mcqa_eval.json"] = {
            "r_p": script_args.r_p,
            "before": {k: before[k] for k in ("acc", "ps", "n")} if before else None,
            "after": {k: after[k] for k in ("acc", "ps", "n")},
        }
        logger.info(
            "held-out MCQA: before %s, after %s",
            reports["mcqa_eval.json"]["before"],
            reports["mcqa_eval.json"]["after"],
        )
    finish(trainer, training_args.output_dir, reports, model_args=model_args)
    trainer.mcqa_eval = (before, after)
    return trainer


def make_parser() -> TrlParser:
    return TrlParser((SuggestionScriptArguments, GRPOConfig, ModelConfig))


def train_main(argv: list[str] | None = None) -> int:
    """``python -m proactive_rl.grpo.suggestion --config RECIPE.yaml [--field value ...]``."""
    return run_entry_point(make_parser, main, argv)
