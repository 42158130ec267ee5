"""Multi-turn streaming GRPO (docs/spec.md §8, P³I Appendix C) on top of ``trl.GRPOTrainer``.

A training row is a `RolloutWindow`. For each group, the policy is rolled through the window by the KV-cache
engine (`proactive_rl.grpo.streaming.rollout`): the ground-truth prefix is prefilled once, then at every frame step the G
rollouts see the same new frame and each samples its own turn. The trajectory reward comes from the task's
`proactive_rewards` reward (docs/spec.md §7), by the row's ``task`` column. TRL then does GRPO as configured: group
advantages, clipping, KL, ``loss_type``, logging -- with ``completion_mask × env_mask`` as the loss mask, so only
the policy's own in-window tokens are optimised, and with every frame of the trajectory in the forward pass that
scores it. The three TRL internals this needs are overridden in `proactive_rl.grpo.streaming.trl_overrides`.

Launch (the recipe's first line has the exact command)::

    accelerate launch --config_file launch/zero3.yaml -m proactive_rl.grpo.streaming --config recipes/p3i_assistant/grpo_qwen3vl_4b.yaml
"""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer, ModelConfig, TrlParser

from proactive_rl.chat import DEFAULT_SYSTEM_PROMPT
from proactive_rl.data.frames import frames_of
from proactive_rl.data.mixture import ON_ERROR, check_data_arguments
from proactive_rl.grpo.streaming.rollout import rollout_window
from proactive_rl.grpo.streaming.trl_overrides import StreamingOverridesMixin
from proactive_rl.grpo.streaming.windows import RolloutWindow, build_windows, composition
from proactive_rl.streaming import SamplingParams
from proactive_rl.training import (
    attach_eval_callback,
    check_model_args,
    eval_callback_config,
    finish,
    freeze_vision_tower,
    load_for_training,
    peft_config_for,
    run_entry_point,
)

logger = logging.getLogger(__name__)
# rollout_func is marked experimental in TRL 1.16; it is the documented hook this trainer is built on.
os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


@dataclass
class StreamingGRPOConfig(GRPOConfig):
    """``trl.GRPOConfig`` plus the streaming rollout and the task rewards.

    ``temperature``, ``top_p`` and ``top_k`` apply to every decoded turn; ``num_generations`` is G.

    Args:
        max_turn_tokens (`int`, *optional*, defaults to `16`): per-turn cap on decoded tokens; a turn that reaches
            it is closed with its end-of-turn token (counted in ``rollout/truncated_turns``).
        reward_alpha (`float`, *optional*, defaults to `0.05`): temporal decay α of every task reward (docs/spec.md §4, §7).
        reward_lambda (`float`, *optional*, defaults to `0.2`): penalty λ per extra/invalid output of the tasks whose
            `TaskSpec.penalized` is set (accident, compositional; docs/spec.md §7).
        reward_on_error (`str`, *optional*, defaults to `"raise"`): a reward that raises or returns the wrong number
            of values stops the run naming it (``"raise"``) or skips its group with a logged error rate (``"skip"``).
        system_prompt (`str`, *optional*): the system turn; defaults to `proactive_rl.chat.DEFAULT_SYSTEM_PROMPT`.
        frame_cache_size (`int`, *optional*, defaults to `64`): episodes whose decoded frames are kept in memory.
    """

    max_turn_tokens: int = field(default=16, metadata={"help": "Per-turn cap on decoded tokens."})
    reward_alpha: float = field(
        default=0.05, metadata={"help": "Temporal decay α of the task rewards (docs/spec.md §4)."}
    )
    reward_lambda: float = field(
        default=0.2, metadata={"help": "Penalty λ per extra/invalid output (docs/spec.md §7)."}
    )
    reward_on_error: str = field(default="raise", metadata={"help": f"One of {ON_ERROR}."})
    system_prompt: str = field(default=DEFAULT_SYSTEM_PROMPT, metadata={"help": "The system turn."})
    frame_cache_size: int = field(default=64, metadata={"help": "Episodes whose frames stay in memory."})

    def __post_init__(self):
        # the reward columns (task, targets) must reach the rewards
        self.remove_unused_columns = False
        super().__post_init__()
        if self.max_turn_tokens < 1:
            raise ValueError(f"max_turn_tokens: must be >= 1, got {self.max_turn_tokens}")
        if self.reward_on_error not in ON_ERROR:
            raise ValueError(f"reward_on_error: expected one of {ON_ERROR}, got {self.reward_on_error!r}")
        if self.use_vllm:
            raise ValueError(
                "use_vllm: streaming GRPO rolls out through the KV-cache engine (proactive_rl.streaming); a vLLM-backed "
                "streaming engine is not implemented. Set use_vllm: false (single-turn GRPO does use TRL's vLLM path)."
            )
        if not self.ds3_gather_for_generation:
            raise ValueError(
                "ds3_gather_for_generation: must be true for streaming GRPO -- ranks decode different numbers of "
                "tokens, and ZeRO-3's per-layer gathers would deadlock without whole parameters."
            )


@dataclass
class StreamingGRPOScriptArguments:
    """Data of a streaming GRPO run: episodes (as in SFT) cut into rollout windows.

    Args:
        trainer (`str`, *optional*, defaults to `"grpo_streaming"`): which trainer the `proactive-rl train` command
            dispatches to (recipes name it so one command serves SFT and GRPO).
        dataset_mixture (`list`): training episode sources (`proactive_rl.data.mixture.DatasetSource`).
        eval_mixture (`list`, *optional*): held-out sources.
        register_tasks (`list[str]`, *optional*): user tasks to add to the task table before the data loads, by
            import path (``my_pkg.tasks:SPEC`` or a module that registers them; `proactive_rewards.load_tasks`).
        on_bad_record (`str`, *optional*, defaults to `"raise"`): for episode files, see `load_episodes`.
        lead_s, tail_s, max_window_s, prefix_s (`float`): window construction, see `build_windows`.
        tasks (`list[str]`, *optional*): keep only these tasks' windows.
        expected_windows (`dict[str, int]`, *optional*): windows per task the training data must give (e.g. the P³I
            RL set: accident 300, atomic 100, event_type 100, compositional 363); checked before the model loads.
        freeze_vision_tower (`bool`, *optional*, defaults to `True`): P³I: vision encoder frozen.
        eval_callback (`dict`, *optional*): evaluators run on the live model while training (on save / every N
            steps), as in SFT: `proactive_rl.evaluation.EvalCallbackConfig`.
    """

    trainer: str = field(default="grpo_streaming", metadata={"help": "Trainer to dispatch to."})
    # user tasks by import path, registered before the data loads (proactive_rewards.load_tasks).
    register_tasks: list[str] | None = field(default=None, metadata={"help": "User tasks: import paths."})
    dataset_mixture: Any = field(default=None, metadata={"help": "Training episode sources."})
    eval_mixture: Any = field(default=None, metadata={"help": "Held-out episode sources."})
    on_bad_record: str = field(default="raise", metadata={"help": f"One of {ON_ERROR}."})
    lead_s: float = field(default=4.0, metadata={"help": "A window opens this long before its first target."})
    tail_s: float = field(default=4.0, metadata={"help": "A window closes this long after its last target."})
    max_window_s: float = field(default=16.0, metadata={"help": "Longest window in seconds."})
    prefix_s: float = field(default=8.0, metadata={"help": "Ground-truth prefix before a window (not count tasks)."})
    tasks: list[str] | None = field(default=None, metadata={"help": "Keep only these tasks' windows."})
    expected_windows: dict[str, int] | None = field(
        default=None, metadata={"help": "Windows per task the data must give (checked before training)."}
    )
    freeze_vision_tower: bool = field(default=True, metadata={"help": "Freeze the vision encoder (P³I)."})
    # evaluators run while training: a mapping, see `proactive_rl.evaluation.EvalCallbackConfig`.
    eval_callback: Any = field(default=None, metadata={"help": "Evaluators run while training."})

    def __post_init__(self):
        if self.trainer != "grpo_streaming":
            raise ValueError(f"trainer: this entry point runs 'grpo_streaming', got {self.trainer!r}")
        check_data_arguments(self)
        self.eval_callback = eval_callback_config(self.eval_callback)  # validated before a model is loaded

    def windows(self, sources) -> list[RolloutWindow]:
        from proactive_rl.data import load_mixture

        episodes, _ = load_mixture(sources, on_error=self.on_bad_record)
        return build_windows(
            episodes,
            lead_s=self.lead_s,
            tail_s=self.tail_s,
            max_window_s=self.max_window_s,
            prefix_s=self.prefix_s,
            tasks=self.tasks,
        )


def task_rewards(windows: list[RolloutWindow], args: StreamingGRPOConfig) -> list:
    """The `proactive_rewards` reward of every task present (each scores its own task's rows, `None` elsewhere)."""
    from proactive_rewards import get_reward, get_task
    from proactive_rl.grpo.reward_guard import guard_rewards

    specs = {get_task(w.task).reward: get_task(w.task) for w in windows}  # reward name -> a task it scores
    funcs = [
        get_reward(name, **specs[name].reward_params(args.reward_alpha, args.reward_lambda)) for name in sorted(specs)
    ]
    return guard_rewards(funcs, on_error=args.reward_on_error, num_generations=args.num_generations)


def windows_dataset(windows: list[RolloutWindow]):
    """The HF dataset of window rows (``prompt`` = window id, ``task``, ``targets``)."""
    from datasets import Dataset

    ids = [w.id for w in windows]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"duplicate rollout window {dup!r} (duplicate episode ids in the mixture?)")
    return Dataset.from_list([w.row() for w in windows])


class StreamingGRPOTrainer(StreamingOverridesMixin, GRPOTrainer):
    """``trl.GRPOTrainer`` over rollout windows, with multi-turn streaming rollouts (docs/spec.md §8).

    Args:
        model (`PreTrainedModel`): a Qwen2.5-VL / Qwen3-VL policy (e.g. the SFT checkpoint).
        args (`StreamingGRPOConfig`): GRPO + rollout settings.
        windows (`list[RolloutWindow]`): the training rows.
        processing_class (`ProcessorMixin`): the model's processor.
        reward_funcs (`list`, *optional*): defaults to the task rewards of the windows' tasks (`task_rewards`).
        eval_windows (`list[RolloutWindow]`, *optional*): held-out rows (TRL's eval loop: reward on eval rollouts).
        **kwargs: passed to ``GRPOTrainer`` (``peft_config``, ``callbacks``, ...).
    """

    _tag_names = ["trl", "grpo", "proactive_rl", "streaming"]

    def __init__(
        self,
        model,
        args: StreamingGRPOConfig,
        windows: list[RolloutWindow],
        processing_class,
        reward_funcs: list | None = None,
        eval_windows: list[RolloutWindow] | None = None,
        **kwargs,
    ):
        if not isinstance(args, StreamingGRPOConfig):
            raise TypeError(f"args must be a StreamingGRPOConfig, got {type(args).__name__}")
        if not windows:
            raise ValueError("no rollout windows to train on (do the episodes have targets?)")
        self.windows = {w.id: w for w in [*windows, *(eval_windows or [])]}
        self._frames: OrderedDict[str, list] = OrderedDict()
        super().__init__(
            model=model,
            reward_funcs=reward_funcs if reward_funcs is not None else task_rewards(windows, args),
            args=args,
            train_dataset=windows_dataset(windows),
            eval_dataset=windows_dataset(eval_windows) if eval_windows else None,
            processing_class=processing_class,
            rollout_func=_streaming_rollout,
            **kwargs,
        )
        logger.info("streaming GRPO: %d windows %s", len(windows), composition(windows))

    def episode_frames(self, window: RolloutWindow) -> list:
        """The episode's frames, decoded once and kept for the latest `frame_cache_size` episodes."""
        key = window.episode.id
        if key in self._frames:
            self._frames.move_to_end(key)
        else:
            self._frames[key] = frames_of(window.episode)
            while len(self._frames) > self.args.frame_cache_size:
                self._frames.popitem(last=False)
        return self._frames[key]

    def sampling_params(self, seed: int) -> SamplingParams:
        return SamplingParams(
            max_new_tokens=self.args.max_turn_tokens,
            do_sample=True,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k or 0,
            seed=seed,
        )


def _groups(prompts: list[str]) -> list[tuple[str, int]]:
    """Consecutive runs of the same window id (TRL repeats each row G times; a group may span ranks)."""
    runs: list[tuple[str, int]] = []
    for p in prompts:
        if runs and runs[-1][0] == p:
            runs[-1] = (p, runs[-1][1] + 1)
        else:
            runs.append((p, 1))
    return runs


def _streaming_rollout(prompts: list[str], trainer: StreamingGRPOTrainer) -> dict:
    """TRL ``rollout_func``: roll every window of this rank's generation batch through the streaming engine."""
    from trl.models.utils import unwrap_model_for_generation

    unknown = [p for p in prompts if p not in trainer.windows]
    if unknown:
        raise KeyError(f"rollout window {unknown[0]!r} is not among the trainer's windows")
    trajectories = []
    with (
        unwrap_model_for_generation(
            trainer.model_wrapped,
            trainer.accelerator,
            gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
            gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
        ) as unwrapped,
        torch.no_grad(),
    ):
        for window_id, n in _groups(prompts):
            window = trainer.windows[window_id]
            seed = int(torch.randint(0, 2**31 - 1, (1,)).item())  # TRL seeds each rank differently
            trajectories += rollout_window(
                unwrapped,
                trainer.processing_class,
                window,
                n,
                trainer.sampling_params(seed),
                frames=trainer.episode_frames(window),
                system_prompt=trainer.args.system_prompt,
            )
    images = [image for t in trajectories for image in t.images]
    vision = trainer.processing_class.image_processor(images=images, return_tensors="pt")
    device = trainer.accelerator.device
    trainer._rollout_mm = {
        "pixel_values": vision["pixel_values"].to(device),
        "image_grid_thw": vision["image_grid_thw"].to(device),
        "num_images": [len(t.images) for t in trajectories],
    }
    trainer._rollout_turns = [t.texts for t in trajectories]
    _log_rollouts(trainer, trajectories)
    return {
        "prompt_ids": [t.prompt_ids for t in trajectories],
        "completion_ids": [t.completion_ids for t in trajectories],
        "logprobs": [t.logprobs for t in trajectories],
        "env_mask": [t.env_mask for t in trajectories],
        "times": [t.times for t in trajectories],
    }


def _log_rollouts(trainer: StreamingGRPOTrainer, trajectories) -> None:
    mode = "train" if trainer.model.training else "eval"
    local = torch.tensor([[t.num_responses, len(t.texts), t.truncated] for t in trajectories], dtype=torch.float32).to(
        trainer.accelerator.device
    )
    stats = trainer.accelerator.gather(local)
    trainer._metrics[mode]["rollout/responses_per_window"].append(stats[:, 0].mean().item())
    trainer._metrics[mode]["rollout/steps_per_window"].append(stats[:, 1].mean().item())
    trainer._metrics[mode]["rollout/truncated_turns"].append(stats[:, 2].sum().item())


# --------------------------------------------------------------------------- entry point


def build_trainer(
    script_args: StreamingGRPOScriptArguments, training_args: StreamingGRPOConfig, model_args: ModelConfig
) -> StreamingGRPOTrainer:
    """Model (``tiny:<arch>:<size>``, a hub id or an SFT checkpoint directory), windows and trainer."""
    check_model_args(model_args)  # a missing model folder fails before the windows are built
    windows = script_args.windows(script_args.dataset_mixture)
    if script_args.expected_windows is not None and composition(windows) != dict(
        sorted(script_args.expected_windows.items())
    ):
        raise ValueError(
            f"expected_windows: the training data gives {composition(windows)} rollout windows, the recipe expects "
            f"{dict(sorted(script_args.expected_windows.items()))}; check the episode files or the window knobs"
        )
    eval_windows = script_args.windows(script_args.eval_mixture) if script_args.eval_mixture else None
    model, processor = load_for_training(model_args, seed=training_args.seed)
    if script_args.freeze_vision_tower:
        freeze_vision_tower(model)
    trainer = StreamingGRPOTrainer(
        model=model,
        args=training_args,
        windows=windows,
        eval_windows=eval_windows,
        processing_class=processor,
        peft_config=peft_config_for(model_args, model, processor),
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
