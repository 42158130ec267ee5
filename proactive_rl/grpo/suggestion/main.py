"""Single-turn proactive-suggestion GRPO (ProactiveBench §5, Appendix C; docs/spec.md §6, §7) on TRL's `GRPOTrainer`.

An image-model learns to ask for help: each prompt is one state of an MCQA environment (image + question +
lettered options); 8 sampled answers are scored ``1`` for the correct category, ``r_p`` for a valid proactive
suggestion and ``0`` otherwise (``proactive_rewards.get_reward("proactive_suggestion", r_p=...)``, the same
parser the MCQA evaluator uses). Nothing here overrides TRL's GRPO: images, advantages, clipping, LoRA and the vLLM
path are `trl.GRPOTrainer` 1.16's own (`SuggestionGRPOTrainer` only completes a resumed run's state,
`ReplayGRPOTrainer` adds the optional streaming replay term).

This module is the entry point (parse -> build -> evaluate -> train -> evaluate -> save): the arguments are in
`proactive_rl.grpo.suggestion.config`, the trainer in `.trainer`, the generation backend in `.backend`, the
held-out evaluation in `.evaluation`.

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

from trl import GRPOConfig, ModelConfig, TrlParser

from proactive_rewards import get_reward
from proactive_rl.data.mcqa import (
    EnvironmentSpec,
    environment_rows,
    letters_only,
    load_rows,
    rows_to_dataset,
    suppressed_tokens,
)
from proactive_rl.errors import InputError
from proactive_rl.grpo.replay import StreamingReplay
from proactive_rl.grpo.reward_guard import guard_rewards
from proactive_rl.grpo.suggestion.backend import resolve_generation_backend
from proactive_rl.grpo.suggestion.config import SuggestionScriptArguments
from proactive_rl.grpo.suggestion.evaluation import evaluate_held_out
from proactive_rl.grpo.suggestion.trainer import ReplayGRPOTrainer, SuggestionGRPOTrainer
from proactive_rl.grpo.suggestion.warm_start import warm_start
from proactive_rl.training import (
    attach_eval_callback,
    check_model_args,
    finish,
    load_for_training,
    peft_config_for,
    run_entry_point,
)

logger = logging.getLogger(__name__)


def load_policy(model_args: ModelConfig, seed: int = 0):
    """Model and processor (`load_model_spec`; ``llava_next`` tiny included), without the state tokens:
    single-turn MCQA does not use them."""
    return load_for_training(model_args, seed=seed, state_tokens=False)


def build_rows(sources: list[EnvironmentSpec], hint: bool) -> list[dict]:
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
    reward = get_reward("proactive_suggestion", r_p=script_args.r_p)
    return guard_rewards([reward], script_args.reward_on_error, num_generations, script_args.max_reward_error_rate)


def recipe_replay(model, processor, script_args: SuggestionScriptArguments, seed: int) -> StreamingReplay | None:
    """The recipe's streaming replay (``replay_mixture``, ``replay_batch_size``); `None` without a mixture."""
    if not script_args.replay_mixture:
        return None
    return StreamingReplay(model, processor, script_args.replay_mixture, script_args.replay_batch_size, seed=seed)


def recipe_warm_start(model, processor, script_args: SuggestionScriptArguments, seed: int, replay=None) -> list[float]:
    """The recipe's supervised warm start (`warm_start`) on its synthetic training environments, `replay` at
    ``warm_start_replay_coef`` (none at 0); returns the losses."""
    envs = [env for src in script_args.environments if src.source == "synthetic" for env in src.build()]
    if not envs:
        raise InputError("warm_start_steps: the warm start needs synthetic training environments")
    return warm_start(
        model,
        processor,
        envs,
        steps=script_args.warm_start_steps,
        learning_rate=script_args.warm_start_lr,
        suggest_rate=script_args.warm_start_suggest_rate,
        seed=seed,
        states=script_args.warm_start_states,
        replay=replay if script_args.warm_start_replay_coef > 0 else None,
        replay_coef=script_args.warm_start_replay_coef,
    )


def build_trainer(script_args: SuggestionScriptArguments, training_args: GRPOConfig, model_args: ModelConfig):
    """Model, rows (validated before the first step), guarded reward and `SuggestionGRPOTrainer`, ready to `train()`."""
    check_model_args(model_args)  # a missing model folder or an unusable QLoRA flag fails first
    resolve_generation_backend(script_args.generation_backend, training_args)
    model, processor = load_policy(model_args, seed=training_args.seed)
    replay = recipe_replay(model, processor, script_args, training_args.seed)
    if script_args.warm_start_steps > 0:
        recipe_warm_start(model, processor, script_args, training_args.seed, replay)
    rows = build_rows(script_args.environments, script_args.hint)
    logger.info("training rows (single-turn environment states): %d", len(rows))
    if script_args.answer_letters_only:
        if training_args.max_completion_length != 1:
            raise InputError(
                "answer_letters_only: needs max_completion_length: 1 (only letters can be sampled, so a longer "
                f"completion would be several letters), got {training_args.max_completion_length}"
            )
        tokenizer = getattr(processor, "tokenizer", processor)
        banned_ids = suppressed_tokens(model, tokenizer, max(len(r["options"]) for r in rows))
        training_args.generation_kwargs = {**(training_args.generation_kwargs or {}), **letters_only(banned_ids)}
    dataset = rows_to_dataset(rows)
    reward_funcs = build_rewards(script_args, training_args.num_generations)
    for reward in reward_funcs:  # a missing reward column fails now, not as a silent 0 (no r_p; docs/spec.md §7)
        check = getattr(getattr(reward, "fn", reward), "check_columns", None)
        if check is not None:
            check(dataset.column_names)
    replay_kwargs = {} if replay is None else {"replay": replay, "replay_coef": script_args.replay_coef}
    trainer = (SuggestionGRPOTrainer if replay is None else ReplayGRPOTrainer)(
        model=model,
        reward_funcs=reward_funcs,
        args=training_args,
        train_dataset=dataset,
        processing_class=processor,
        peft_config=peft_config_for(model_args, model, processor, state_tokens=False),  # MCQA: no state tokens
        **replay_kwargs,
    )
    attach_eval_callback(trainer, script_args.eval_callback)
    trainer.generation_backend = "vllm" if training_args.use_vllm else "transformers"
    return trainer


def main(script_args: SuggestionScriptArguments, training_args: GRPOConfig, model_args: ModelConfig):
    """Evaluate (held-out, if given), train, evaluate again, save (open-r1 style entry point)."""
    trainer = build_trainer(script_args, training_args, model_args)
    max_new = training_args.max_completion_length or 16
    before = evaluate_held_out(trainer, script_args, max_new, "before") if script_args.eval_before else None
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    after = evaluate_held_out(trainer, script_args, max_new, "after")
    reports = {}
    if after is not None:
        reports["suggestion_eval.json"] = {
            "r_p": script_args.r_p,
            "before": {k: before[k] for k in ("acc", "ps", "n")} if before else None,
            "after": {k: after[k] for k in ("acc", "ps", "n")},
        }
        logger.info(
            "held-out MCQA: before %s, after %s",
            reports["suggestion_eval.json"]["before"],
            reports["suggestion_eval.json"]["after"],
        )
    finish(trainer, training_args.output_dir, reports, model_args=model_args)
    return trainer


def make_parser() -> TrlParser:
    return TrlParser((SuggestionScriptArguments, GRPOConfig, ModelConfig))


def train_main(argv: list[str] | None = None) -> int:
    """``python -m proactive_rl.grpo.suggestion --config RECIPE.yaml [--field value ...]``."""
    return run_entry_point(make_parser, main, argv)
