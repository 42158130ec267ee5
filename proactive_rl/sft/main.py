"""`proactive-rl train`: focal-weighted SFT of a streaming video LLM on state-token dialogues (docs/spec.md §2, §3).

Launch as users do, from one CPU to many GPU nodes::

    accelerate launch --config_file launch/zero3.yaml -m proactive_rl.cli train --config recipes/p3i_assistant/sft_qwen3vl_4b.yaml

Arguments come from a YAML recipe parsed by ``trl.TrlParser`` (command-line flags override it) into
`SFTScriptArguments` (data), `ProactiveSFTConfig` (training + loss) and ``trl.ModelConfig`` (model). The model is
a hub id / local directory (`proactive_rl.models.load_model`) or ``tiny:<arch>:<size>`` for the embedded tiny model.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace

from transformers import TrainerCallback
from trl import ModelConfig, TrlParser

from proactive_rewards.parsing import RESPONSE_TOKEN, SILENCE_TOKEN
from proactive_rl.data import EpisodeCollator, as_hf_dataset, load_mixture, prepare_examples
from proactive_rl.data.examples import skip_summary
from proactive_rl.data.lazy import (
    EpisodeEncoder,
    EpisodeMeasure,
    LazyEpisodeCollator,
    episode_rows,
    measure_dataset,
    select_valid,
)
from proactive_rl.sft.config import ProactiveSFTConfig, SFTScriptArguments
from proactive_rl.sft.trainer import ProactiveSFTTrainer
from proactive_rl.training import (
    attach_eval_callback,
    check_model_args,
    finish,
    freeze_vision_tower,
    load_for_training,
    peft_config_for,
    run_entry_point,
)

logger = logging.getLogger(__name__)


def make_encoder(processor, script_args: SFTScriptArguments, max_length: int | None) -> EpisodeEncoder:
    """``encode(episode) -> dict``: frames of the episode (rendered or decoded) through `proactive_rl.chat`."""
    return EpisodeEncoder(processor, max_length, script_args.truncation, script_args.max_frames)


class FirstStepTimer(TrainerCallback):
    """Logs the time from the start of the data step to the first optimizer step."""

    def __init__(self, start: float):
        self.start, self.seconds = start, None

    def on_step_begin(self, args, state, control, **kwargs):
        if self.seconds is None:
            self.seconds = time.perf_counter() - self.start
            logger.info("time to first step: %.1f s (data step, model and trainer set-up)", self.seconds)


def state_token_ids(processor) -> list[int]:
    tokenizer = getattr(processor, "tokenizer", processor)
    ids = [tokenizer.convert_tokens_to_ids(t) for t in (SILENCE_TOKEN, RESPONSE_TOKEN)]
    if any(i is None or i == tokenizer.unk_token_id for i in ids):
        raise ValueError("the tokenizer lacks the state tokens; load the model with proactive_rl.models.load_model")
    return ids


def build_trainer(script_args: SFTScriptArguments, training_args: ProactiveSFTConfig, model_args: ModelConfig):
    """Model, data (validated before the first step; `data_pipeline` lazy or eager) and `ProactiveSFTTrainer`."""
    # deferred: optional extra

    start = time.perf_counter()
    check_model_args(model_args)  # a missing model folder or an unusable QLoRA flag fails first
    model, processor = load_for_training(model_args, seed=training_args.seed)
    if script_args.freeze_vision_tower:
        freeze_vision_tower(model)
    tokenizer = getattr(processor, "tokenizer", processor)
    encode = make_encoder(processor, script_args, training_args.max_length)
    if script_args.data_pipeline == "eager":
        train_dataset, eval_dataset, collator = _eager_data(script_args, training_args, encode, tokenizer)
    else:
        train_dataset, eval_dataset, collator = _lazy_data(script_args, training_args, encode, tokenizer)
    trainer = ProactiveSFTTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_dataset,
        data_collator=collator,
        processing_class=processor,
        peft_config=peft_config_for(model_args, model, processor),
        state_token_ids=state_token_ids(processor),
        callbacks=[FirstStepTimer(start)],
    )
    attach_eval_callback(trainer, script_args.eval_callback)  # evaluate the live model on save / every N steps
    if trainer.is_deepspeed_enabled:
        from deepspeed.accelerator import get_accelerator

        logger.info(
            "DeepSpeed accelerator: %s (backend %s)",
            get_accelerator().device_name(),
            get_accelerator().communication_backend_name(),
        )
    return trainer


def _eager_data(script_args, training_args, encode, tokenizer):
    """Every episode encoded in memory before step 1 (`prepare_examples`); rows are indices into them."""

    def prepared(sources, what):
        episodes, skipped = load_mixture(sources, on_error=script_args.on_bad_record)
        data = prepare_examples(
            episodes,
            encode,
            max_length=training_args.max_length,
            truncation=script_args.truncation,
            on_error=script_args.on_bad_record,
        )
        data.skipped = skipped + data.skipped
        logger.info(
            "%s: %d episodes, skipped %d (%s)", what, len(data.examples), len(data.skipped), data.skip_summary()
        )
        return data

    train = prepared(script_args.dataset_mixture, "train")
    evaluation = prepared(script_args.eval_mixture, "eval") if script_args.eval_mixture else None
    examples = train.examples + (evaluation.examples if evaluation else [])
    eval_dataset = None
    if evaluation:
        eval_dataset = as_hf_dataset(evaluation).map(lambda r: {"index": r["index"] + len(train.examples)})
    return as_hf_dataset(train), eval_dataset, EpisodeCollator(examples, tokenizer.pad_token_id)


def _lazy_data(script_args, training_args, encode: EpisodeEncoder, tokenizer):
    """Episode rows validated and measured without pixels (cached map), frames decoded per batch (docs/spec.md §1)."""
    measure = EpisodeMeasure(replace(encode, process_images=False))

    def prepared(sources, what):
        episodes, skipped = load_mixture(sources, on_error=script_args.on_bad_record)
        measured = measure_dataset(
            episode_rows(episodes),
            measure,
            cache_dir=script_args.data_cache_dir,
            num_proc=script_args.data_num_proc,
            main_process_first=lambda: training_args.main_process_first(desc=f"measuring the {what} episodes"),
        )
        kept, bad = select_valid(measured, on_error=script_args.on_bad_record)
        skipped += bad
        logger.info("%s: %d episodes, skipped %d (%s)", what, len(kept), len(skipped), skip_summary(skipped))
        return kept

    train = prepared(script_args.dataset_mixture, "train")
    evaluation = prepared(script_args.eval_mixture, "eval") if script_args.eval_mixture else None
    return train, evaluation, LazyEpisodeCollator(encode, tokenizer.pad_token_id)


def main(script_args: SFTScriptArguments, training_args: ProactiveSFTConfig, model_args: ModelConfig):
    """Train, then save the model and processor to ``output_dir`` (open-r1 style entry point)."""
    trainer = build_trainer(script_args, training_args, model_args)
    trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint)
    return finish(trainer, training_args.output_dir, model_args=model_args)


def make_parser() -> TrlParser:
    return TrlParser((SFTScriptArguments, ProactiveSFTConfig, ModelConfig))


def train_main(argv: list[str] | None = None) -> int:
    """The ``train`` subcommand: ``proactive-rl train --config RECIPE.yaml [--field value ...]``."""
    return run_entry_point(make_parser, main, argv)
