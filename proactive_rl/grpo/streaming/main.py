"""Multi-turn streaming GRPO (docs/spec.md §8, P³I Appendix C): parse -> build -> train -> save.

`StreamingGRPOScriptArguments` / `StreamingGRPOConfig` (`proactive_rl.grpo.streaming.config`) and
``trl.ModelConfig`` come from a recipe; `StreamingGRPOTrainer` (`proactive_rl.grpo.streaming.trainer`) trains.

Launch (the recipe's first line has the exact command)::

    accelerate launch --config_file launch/zero3.yaml -m proactive_rl.grpo.streaming --config recipes/p3i_assistant/grpo_qwen3vl_4b.yaml
"""

from __future__ import annotations

from trl import ModelConfig, TrlParser

from proactive_rl.errors import InputError
from proactive_rl.grpo.replay import StreamingReplay
from proactive_rl.grpo.streaming.config import StreamingGRPOConfig, StreamingGRPOScriptArguments
from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer
from proactive_rl.grpo.streaming.windows import composition
from proactive_rl.training import (
    attach_eval_callback,
    check_model_args,
    finish,
    freeze_vision_tower,
    load_for_training,
    peft_config_for,
    run_entry_point,
)


def build_trainer(
    script_args: StreamingGRPOScriptArguments,
    training_args: StreamingGRPOConfig,
    model_args: ModelConfig,
    trainer_cls: type[StreamingGRPOTrainer] = StreamingGRPOTrainer,
) -> StreamingGRPOTrainer:
    """Model (``tiny:<arch>:<size>``, a hub id or an SFT checkpoint directory), windows and trainer (`trainer_cls`:
    a subclass, e.g. `proactive_rl.experimental`'s)."""
    windows = script_args.windows(script_args.dataset_mixture)
    if script_args.expected_windows is not None and composition(windows) != dict(
        sorted(script_args.expected_windows.items())
    ):
        raise InputError(
            f"expected_windows: the training data gives {composition(windows)} rollout windows, the recipe expects "
            f"{dict(sorted(script_args.expected_windows.items()))}; check the episode files or the window knobs"
        )
    eval_windows = script_args.windows(script_args.eval_mixture) if script_args.eval_mixture else None
    check_model_args(model_args)  # the data first, then the model source (a missing folder, a Hub id offline)
    model, processor = load_for_training(model_args, seed=training_args.seed)
    if script_args.freeze_vision_tower:
        freeze_vision_tower(model)
    replay = None
    if script_args.replay_mixture:  # copied before LoRA or DeepSpeed wrap the policy
        replay = StreamingReplay(
            model, processor, script_args.replay_mixture, script_args.replay_batch_size, seed=training_args.seed
        )
    trainer = trainer_cls(
        model=model,
        args=training_args,
        windows=windows,
        eval_windows=eval_windows,
        processing_class=processor,
        peft_config=peft_config_for(model_args, model, processor),
        replay=replay,
        replay_coef=script_args.replay_coef,
    )
    attach_eval_callback(trainer, script_args.eval_callback)
    return trainer


def main(script_args, training_args, model_args) -> StreamingGRPOTrainer:
    """Train, then save the model, processor and log history to ``output_dir``."""
    trainer = build_trainer(script_args, training_args, model_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    return finish(trainer, training_args.output_dir, model_args=model_args)


def make_parser() -> TrlParser:
    return TrlParser((StreamingGRPOScriptArguments, StreamingGRPOConfig, ModelConfig))


def train_main(argv: list[str] | None = None) -> int:
    """``python -m proactive_rl.grpo.streaming --config RECIPE.yaml [--field value ...]``."""
    return run_entry_point(make_parser, main, argv)
