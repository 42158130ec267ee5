"""The demo's stages as data: one `Stage` record each, in the order they run (`STAGES`).

A training stage runs the shipped recipe ``recipes/tiny/<trainer>.yaml`` with its record's `overrides` applied, then
the user's (`DemoSettings.overrides`), from the latest model an earlier stage produced; every stage is then evaluated
(`proactive_rl.demo.evaluation`). Why the values below are what they are: docs/demo.md. This module imports no torch,
so that ``proactive-rl demo --help`` lists the stages fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proactive_rl.demo.settings import PAUC_TASK, DemoSettings
from proactive_rl.synthetic.captions import GROUNDING_TASK


def task_file(data: Path, split: str, task: str) -> Path:
    """The episodes of one task of one split (``<split>/episodes.<task>.json``, beside the videos)."""
    return data / split / f"episodes.{task}.json"


def env_file(data: Path, split: str, kind: str) -> Path:
    """The ask-for-help environments of one kind of one split (ProactiveBench JSONL)."""
    return data / split / "environments" / f"{kind}.jsonl"


def _train(data: Path, tasks, weights: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """A dataset mixture of the training episodes of `tasks` (with their `weights`, a task not named: 1)."""
    if weights is None:
        return [{"source": str(task_file(data, "train", t))} for t in tasks]
    return [{"source": str(task_file(data, "train", t)), "weight": weights.get(t, 1.0)} for t in tasks]


def sft_overrides(settings: DemoSettings, data: Path, model: Path) -> dict[str, Any]:
    """Focal SFT on the streaming tasks and pvqa, weighted by ``settings.sft_weights``, the vision tower trained too;
    1536 tokens hold a 90 s episode at 0.5 FPS; the eager pipeline encodes the few hundred episodes once."""
    return {
        "model_name_or_path": str(model),
        "dataset_mixture": _train(data, (*settings.tasks, PAUC_TASK), settings.sft_weights),
        "save_strategy": "no",
        # the demo scores every stage itself (proactive_rl.demo.evaluation); no checkpoint is saved to score
        "eval_callback": None,
        "seed": settings.seed,
        "max_steps": 900,
        "freeze_vision_tower": False,
        "max_length": 1536,
        "learning_rate": 3.0e-3,
        "warmup_steps": 30,
        "data_pipeline": "eager",
    }


def grounding_overrides(settings: DemoSettings, data: Path, model: Path) -> dict[str, Any]:
    """The SFT stage's recipe on the caption episodes of the training split (every frame answered: no silence to
    balance), 200 steps at the recipe's learning rate and warm-up."""
    return {
        **sft_overrides(settings, data, model),
        "dataset_mixture": _train(data, (GROUNDING_TASK,)),
        "register_tasks": ["proactive_rl.synthetic.captions"],
        "max_steps": 200,
        "max_length": 2048,
        "learning_rate": 6.0e-3,
        "warmup_steps": 3,
    }


def grpo_streaming_overrides(settings: DemoSettings, data: Path, model: Path) -> dict[str, Any]:
    """Rollout windows of the streaming tasks, 30 steps at 1e-4."""
    return {
        "model_name_or_path": str(model),
        "dataset_mixture": _train(data, settings.tasks),
        "seed": settings.seed,
        "learning_rate": 1.0e-4,
        "max_steps": 30,
        # the recipe's windows are in seconds at 1 FPS; at one decision every 2 s, the same number of steps
        "lead_s": 6.0,
        "tail_s": 4.0,
        "max_window_s": 12.0,
        "prefix_s": 6.0,
    }


def grpo_suggestion_overrides(settings: DemoSettings, data: Path, model: Path) -> dict[str, Any]:
    """The recipe's own (synthetic, in-memory) training environments, which its warm start needs; held-out play is
    the demo's evaluation on the exported test split (same kinds and knobs, other seeds), not the trainer's. The
    streaming training episodes are replayed (`proactive_rl.grpo.replay`): weight 20 in GRPO, 1 in the warm start,
    4 dialogues per step, a warm start at 1e-3."""
    return {
        "model_name_or_path": str(model),
        "replay_mixture": _train(data, (*settings.tasks, PAUC_TASK)),
        "eval_environments": None,
        "eval_before": False,
        "seed": settings.seed,
        "replay_coef": 20.0,
        "warm_start_replay_coef": 1.0,
        "replay_batch_size": 4,
        "warm_start_lr": 1.0e-3,
    }


@dataclass(frozen=True)
class Stage:
    """One stage of the demo: one row of its table.

    Args:
        key (`str`): its ``--stages`` name, its `DemoSettings.overrides` key and its folders (``<out>/runs/<key>``,
            ``<out>/recipes/<key>.yaml``, ``<out>/eval/<key>``).
        name (`str`): its row in the table.
        what (`str`): what it runs, for the report.
        trainer (`str`, *optional*): the `proactive_rl.trainers` key whose entry point and tiny recipe train it;
            `None`: the stage evaluates the untrained model.
        overrides (`Callable`, *optional*): ``(settings, data, start_model) -> dict``, the recipe fields it sets.
        needs (`tuple[str, ...]`, *optional*, defaults to `()`): stages that must have produced a model first (it
            starts from the latest model; without them it is not run).
        captions (`bool`, *optional*, defaults to `False`): scored on held-out captions instead of the tasks.
        swapped_frames (`bool`, *optional*, defaults to `True`): also scored on swapped frames (when
            `DemoSettings.counterfactual`); a random init scores chance whatever it sees.
    """

    key: str
    name: str
    what: str
    trainer: str | None = None
    overrides: Callable[[DemoSettings, Path, Path], dict[str, Any]] | None = None
    needs: tuple[str, ...] = ()
    captions: bool = False
    swapped_frames: bool = True

    def recipe(self, settings: DemoSettings, data: Path, start: Path) -> dict[str, Any]:
        """The recipe fields of this stage when it starts from `start`: its own, then the user's."""
        return {**self.overrides(settings, data, start), **settings.overrides.get(self.key, {})}


STAGES = (
    Stage("untrained", "untrained", "tiny model, random init", swapped_frames=False),
    Stage(
        "grounding",
        "grounding",
        "SFT on per-frame captions of the same videos (proactive_rl.synthetic.captions), scored on held-out captions",
        trainer="sft",
        overrides=grounding_overrides,
        captions=True,
    ),
    Stage("sft", "SFT", "focal SFT on the multi-task mixture (recipes/tiny/sft.yaml)", "sft", overrides=sft_overrides),
    Stage(
        "grpo_streaming",
        "streaming GRPO",
        "streaming GRPO from SFT (recipes/tiny/grpo_streaming.yaml)",
        trainer="grpo_streaming",
        overrides=grpo_streaming_overrides,
        needs=("sft",),
    ),
    Stage(
        "grpo_suggestion",
        "suggestion GRPO",
        "suggestion GRPO with streaming replay (recipes/tiny/grpo_suggestion.yaml): the final model",
        trainer="grpo_suggestion",
        overrides=grpo_suggestion_overrides,
    ),
)
# the stages `--stages` chooses from
TRAINED = tuple(s.key for s in STAGES if s.trainer)
