"""`StreamingGRPOTrainer`: ``trl.GRPOTrainer`` over rollout windows with multi-turn streaming rollouts (docs/spec.md §8).

A training row is a `RolloutWindow`. For each group, the policy is rolled through the window by the KV-cache
engine (`proactive_rl.grpo.streaming.rollout`) through TRL's public ``rollout_func`` hook: the ground-truth prefix
is prefilled once, then at every frame step the G rollouts see the same new frame and each samples its own turn.
The trajectory reward comes from the task's `proactive_rewards` reward (docs/spec.md §7), by the row's ``task``
column. TRL then does GRPO as configured, with ``completion_mask × env_mask`` as the loss mask.

Pinned version: **trl 1.16.0**. The TRL internals this trainer needs, each declared in ``PRIVATE_TOUCHES`` where
it is made (``tests/test_private_touches.py`` fails on any other):

- ``_generate_and_score_completions``, ``_get_per_token_logps_and_entropies``, ``_calculate_rewards``: overridden
  in `proactive_rl.grpo.streaming.trl_overrides` (the frames inside the completion, the state tokens kept);
- ``GRPOTrainer._metrics[mode][key]``: the per-step lists TRL averages into its logs; the rollout statistics
  (``rollout/responses_per_window``, ``rollout/steps_per_window``, ``rollout/truncated_turns``) are appended here;
- the optional replay term's ``_metrics`` entry is declared in `proactive_rl.grpo.replay`;
- ``_tag_names``: the model-card tags of `transformers.Trainer` subclasses;
- exact resume (checkpoint weights, window order, rollout buffer, reward counters): `proactive_rl.grpo.resume_state`.
"""

from __future__ import annotations

import logging
import warnings
from collections import OrderedDict

import torch
from trl import GRPOTrainer
from trl.models.utils import unwrap_model_for_generation

from proactive_rewards import get_reward, get_task
from proactive_rl.data.frames import frames_of
from proactive_rl.grpo.replay import ReplayLossMixin, StreamingReplay
from proactive_rl.grpo.resume_state import ResumableGRPOMixin
from proactive_rl.grpo.reward_guard import guard_rewards
from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
from proactive_rl.grpo.streaming.rollout import rollout_window
from proactive_rl.grpo.streaming.trl_overrides import StreamingOverridesMixin
from proactive_rl.grpo.streaming.windows import RolloutWindow, composition
from proactive_rl.models.families import family_of
from proactive_rl.streaming import SamplingParams
from proactive_rl.streaming.batch import Batcher

logger = logging.getLogger(__name__)

PRIVATE_TOUCHES = {
    "_metrics": "trl 1.16.0: GRPOTrainer._metrics[mode][name] is a list of floats averaged into the next log",
    "_tag_names": "trl 1.16.0: class attribute, the tags GRPOTrainer writes into the model card",
}


def task_rewards(windows: list[RolloutWindow], args: StreamingGRPOConfig) -> list:
    """The `proactive_rewards` reward of every task present (each scores its own task's rows, `None` elsewhere)."""
    specs = {get_task(w.task).reward: get_task(w.task) for w in windows}  # reward name -> a task it scores
    funcs = [
        get_reward(name, **specs[name].reward_params(args.reward_alpha, args.reward_lambda)) for name in sorted(specs)
    ]
    return guard_rewards(funcs, on_error=args.reward_on_error, num_generations=args.num_generations)


def windows_dataset(windows: list[RolloutWindow]):
    """The HF dataset of window rows (``prompt`` = window id, ``task``, ``targets``)."""
    # deferred: keeps torch/transformers out of light import paths
    from datasets import Dataset

    ids = [w.id for w in windows]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"duplicate rollout window {dup!r} (duplicate episode ids in the mixture?)")
    return Dataset.from_list([w.row() for w in windows])


class StreamingGRPOTrainer(ReplayLossMixin, ResumableGRPOMixin, StreamingOverridesMixin, GRPOTrainer):
    """``trl.GRPOTrainer`` over rollout windows, with multi-turn streaming rollouts (docs/spec.md §8).

    Args:
        model (`PreTrainedModel`): a Qwen2.5-VL / Qwen3-VL policy (e.g. the SFT checkpoint).
        args (`StreamingGRPOConfig`): GRPO + rollout settings.
        windows (`list[RolloutWindow]`): the training rows.
        processing_class (`ProcessorMixin`): the model's processor.
        reward_funcs (`list`, *optional*): defaults to the task rewards of the windows' tasks (`task_rewards`).
        eval_windows (`list[RolloutWindow]`, *optional*): held-out rows (TRL's eval loop: reward on eval rollouts).
        replay (`StreamingReplay`, *optional*): dialogues whose distillation term, times ``replay_coef``, every
            step's loss adds (`proactive_rl.grpo.replay`); `None`: GRPO's loss alone.
        replay_coef (`float`, *optional*, defaults to `1.0`): weight of that term.
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
        replay: StreamingReplay | None = None,
        replay_coef: float = 1.0,
        **kwargs,
    ):
        if not isinstance(args, StreamingGRPOConfig):
            raise TypeError(f"args must be a StreamingGRPOConfig, got {type(args).__name__}")
        if not windows:
            raise ValueError("no rollout windows to train on (do the episodes have targets?)")
        self.windows = {w.id: w for w in [*windows, *(eval_windows or [])]}
        self._frames: OrderedDict[str, list] = OrderedDict()
        with warnings.catch_warnings():
            # rollout_func is marked experimental in TRL 1.16; it is the documented hook this trainer is built on
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'", category=UserWarning)
            super().__init__(
                model=model,
                reward_funcs=reward_funcs if reward_funcs is not None else task_rewards(windows, args),
                args=args,
                train_dataset=windows_dataset(windows),
                eval_dataset=windows_dataset(eval_windows) if eval_windows else None,
                processing_class=processing_class,
                rollout_func=_streaming_rollout,
                replay=replay,
                replay_coef=replay_coef,
                **kwargs,
            )
        self.family = family_of(self.model)
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

    def streaming_rollout(self, prompts: list[str]) -> dict:
        """Roll every window of this rank's generation batch through the streaming engine (`_roll_groups`); keep the
        batch's frames and turns for the overrides of `proactive_rl.grpo.streaming.trl_overrides`, and return TRL's
        rollout dict."""
        unknown = [p for p in prompts if p not in self.windows]
        if unknown:
            raise KeyError(f"rollout window {unknown[0]!r} is not among the trainer's windows")
        groups = [(self.windows[window_id], n) for window_id, n in _groups(prompts)]
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped,
            torch.no_grad(),
        ):
            per_group = self._roll_groups(unwrapped, groups)
        trajectories = [t for group in per_group for t in group]
        vision = self.family.image_inputs(self.processing_class, [image for t in trajectories for image in t.images])
        device = self.accelerator.device
        self._rollout_mm = {key: value.to(device) for key, value in vision.items()}
        self._rollout_mm["num_images"] = [len(t.images) for t in trajectories]
        self._rollout_turns = [t.texts for t in trajectories]
        self._log_rollouts(trajectories)
        return {
            "prompt_ids": [t.prompt_ids for t in trajectories],
            "completion_ids": [t.completion_ids for t in trajectories],
            "logprobs": [t.logprobs for t in trajectories],
            "env_mask": [t.env_mask for t in trajectories],
            "times": [t.times for t in trajectories],
        }

    def _roll_groups(self, unwrapped, groups: list[tuple[RolloutWindow, int]]) -> list[list]:
        """The trajectories of the generation batch's ``(window, rows)`` groups, under the unwrapped model (a subclass
        may replace groups, in place: the dynamic sampling of `proactive_rl.experimental`)."""
        return self._roll(unwrapped, groups)

    def _roll(self, unwrapped, groups: list[tuple[RolloutWindow, int]]) -> list[list]:
        """The trajectories of each ``(window, rows)`` group, from whole model parameters."""
        # drawn in group order before any rollout, as one group after another draws them (TRL seeds ranks differently)
        seeds = [int(torch.randint(0, 2**31 - 1, (1,)).item()) for _ in groups]
        frames = [self.episode_frames(window) for window, _ in groups]
        batch_size = self.args.rollout_batch_size
        batcher = Batcher(unwrapped, self.processing_class) if batch_size > 1 and len(groups) > 1 else None

        def roll(k: int) -> list:
            window, n = groups[k]
            return rollout_window(
                unwrapped,
                self.processing_class,
                window,
                n,
                self.sampling_params(seeds[k]),
                frames=frames[k],
                system_prompt=self.args.system_prompt,
                batcher=batcher,
            )

        if batcher is None:
            return [roll(k) for k in range(len(groups))]
        return batcher.map(range(len(groups)), roll, batch_size)

    def _log_rollouts(self, trajectories) -> None:
        mode = "train" if self.model.training else "eval"
        stats = [[t.num_responses, len(t.texts), t.truncated] for t in trajectories]
        stats = self.accelerator.gather(torch.tensor(stats, dtype=torch.float32).to(self.accelerator.device))
        self._metrics[mode]["rollout/responses_per_window"].append(stats[:, 0].mean().item())
        self._metrics[mode]["rollout/steps_per_window"].append(stats[:, 1].mean().item())
        self._metrics[mode]["rollout/truncated_turns"].append(stats[:, 2].sum().item())


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
    """TRL ``rollout_func``: the trainer's own `StreamingGRPOTrainer.streaming_rollout`."""
    return trainer.streaming_rollout(prompts)
