"""Experimental streaming GRPO (docs/grpo_credit.md): parse -> build -> train -> save, as
`proactive_rl.grpo.streaming.main` with `ExperimentalStreamingGRPOTrainer`.

A recipe runs it with ``trainer: grpo_streaming_experimental`` (`proactive_rl.trainers.TRAINERS`)::

    proactive-rl train --config my_grpo_streaming.yaml    # tiny/grpo_streaming.yaml with that trainer and the knobs
"""

from __future__ import annotations

from trl import ModelConfig, TrlParser

from proactive_rl.experimental.config import ExperimentalStreamingGRPOConfig, ExperimentalStreamingGRPOScriptArguments
from proactive_rl.experimental.trainer import ExperimentalStreamingGRPOTrainer
from proactive_rl.grpo.streaming import main as streaming
from proactive_rl.training import finish, run_entry_point


def build_trainer(
    script_args: ExperimentalStreamingGRPOScriptArguments,
    training_args: ExperimentalStreamingGRPOConfig,
    model_args: ModelConfig,
) -> ExperimentalStreamingGRPOTrainer:
    """`proactive_rl.grpo.streaming.main.build_trainer` with the experimental trainer."""
    return streaming.build_trainer(
        script_args, training_args, model_args, trainer_cls=ExperimentalStreamingGRPOTrainer
    )


def main(script_args, training_args, model_args) -> ExperimentalStreamingGRPOTrainer:
    """Train, then save the model, processor and log history to ``output_dir``."""
    trainer = build_trainer(script_args, training_args, model_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    return finish(trainer, training_args.output_dir, model_args=model_args)


def make_parser() -> TrlParser:
    return TrlParser((ExperimentalStreamingGRPOScriptArguments, ExperimentalStreamingGRPOConfig, ModelConfig))


def train_main(argv: list[str] | None = None) -> int:
    """``proactive-rl train --config RECIPE.yaml [--field value ...]`` for ``trainer: grpo_streaming_experimental``."""
    return run_entry_point(make_parser, main, argv)
