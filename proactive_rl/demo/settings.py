"""What a user of the demo changes: the size of the synthetic world, of each evaluation, and the tasks.

The tiny recipes (``recipes/tiny/*.yaml``) are the starting point of every stage; each stage's record
(`proactive_rl.demo.stages.STAGES`) overrides what makes the end-to-end run fit its time budget (steps, data,
learning rate), and writes the recipe it actually ran to ``<out>/recipes/`` so that any stage can be re-run alone with
``proactive-rl train --config``. Why the demo's values are what they are: docs/demo.md.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from proactive_rl.shipped import read_recipe, shipped_path

# The streaming tasks the demo generates, trains and scores with PRS (docs/spec.md §4), one of each kind (§10);
# `pvqa` episodes (free-text answers with reply spans) are scored with PAUC (docs/spec.md §5).
STREAMING_TASKS = ("accident", "atomic", "compositional")
PAUC_TASK = "pvqa"
# The kind and difficulty knobs of the tiny suggestion recipe's training environments (read from
# recipes/tiny/grpo_suggestion.yaml, so that the held-out split the demo writes matches what that stage trains on).
_KNOB_KEYS = ("negatives", "colours", "layout", "corruptions", "object_radius", "colour_weights", "size")


def suggestion_environments() -> tuple[tuple[str, ...], dict[str, Any]]:
    """``(kinds, knobs)`` of the synthetic training environments of ``recipes/tiny/grpo_suggestion.yaml``."""
    recipe = shipped_path("tiny/grpo_suggestion.yaml")
    sources = [e for e in read_recipe(str(recipe))["environments"] if e.get("source") == "synthetic"]
    if not sources:
        raise ValueError(f"{recipe}: the demo needs synthetic training environments in 'environments'")
    knobs = {k: v for k, v in sources[0].items() if k in _KNOB_KEYS}
    return tuple(dict.fromkeys(e["kind"] for e in sources)), knobs


@dataclass
class DemoSettings:
    """What a user changes (``--quick`` shrinks it: `quick`); each stage's own recipe overrides are its record's.

    Args:
        arch (`str`, *optional*, defaults to `"qwen2_5_vl"`): tiny-model architecture (`build_tiny`).
        size (`str`, *optional*, defaults to `"xs"`): tiny-model size.
        seed (`int`, *optional*, defaults to `0`): model init, data, training and evaluation seed.
        episodes_per_task (`int`, *optional*, defaults to `140`): synthetic episodes per task over all splits.
        envs_per_kind (`int`, *optional*, defaults to `140`): ask-for-help environments per kind over all splits.
        fractions (`tuple`, *optional*, defaults to `(7, 1, 6)`): relative sizes of the train / validation / test
            splits of both (normalised; `proactive_rl.synthetic.export.split_sizes`): 70 / 10 / 60 of 140.
        duration (`tuple`, *optional*, defaults to `(30, 90)`): episode length range in seconds.
        knobs (`dict`): the other difficulty knobs of the streaming episodes (`proactive_rl.synthetic.Knobs`).
        tasks (`tuple`, *optional*, defaults to `STREAMING_TASKS`): the streaming tasks every stage trains and scores.
        sft_weights (`dict`): how many times focal SFT uses each task's training episodes (a task not named: 1).
        eval_episodes (`int`, *optional*, defaults to `60`): held-out episodes per streaming task scored with PRS
            (why 60: docs/demo.md, "How sure the numbers are").
        eval_pauc_episodes (`int`, *optional*, defaults to `8`): held-out pvqa episodes scored with PAUC.
        eval_envs (`int`, *optional*, defaults to `20`): held-out environments per kind played (MCQA).
        eval_caption_episodes (`int`, *optional*, defaults to `4`): held-out caption episodes per task (grounding).
        eval_batch_size (`int`, *optional*, defaults to `1`): PRS / PAUC episodes played in lockstep (on 2 CPU cores
            the tiny model plays one at a time faster: benchmarks/RESULTS.md, batched streaming).
        max_new_tokens (`int`, *optional*, defaults to `8`): longest assistant turn when scoring PAUC.
        prs_max_new_tokens (`int`, *optional*, defaults to `4`): longest assistant turn when scoring PRS.
        counterfactual (`bool`, *optional*, defaults to `True`): also score the trained stages on swapped frames.
        overrides (`dict`): recipe fields per stage key, applied over the stage's own (``{"sft": {"max_steps": 2}}``).
        smoke (`bool`, *optional*, defaults to `False`): a smoke run (`quick`): checks only that every stage ran.
    """

    arch: str = "qwen2_5_vl"
    size: str = "xs"
    seed: int = 0
    episodes_per_task: int = 140
    envs_per_kind: int = 140
    fractions: tuple = (7, 1, 6)
    duration: tuple = (30, 90)
    knobs: dict[str, Any] = field(
        default_factory=lambda: {"fps": 0.5, "scale": 2.0, "distractors": 0, "max_events": 3, "speed": 2.5}
    )
    tasks: tuple = STREAMING_TASKS
    sft_weights: dict[str, float] = field(default_factory=lambda: {"atomic": 2.0, PAUC_TASK: 0.5})
    eval_episodes: int = 60
    eval_pauc_episodes: int = 8
    eval_envs: int = 20
    eval_caption_episodes: int = 4
    eval_batch_size: int = 1
    max_new_tokens: int = 8
    prs_max_new_tokens: int = 4
    counterfactual: bool = True
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)
    smoke: bool = False

    def __post_init__(self):
        unknown = sorted(set(self.tasks) - set(STREAMING_TASKS))
        if unknown:
            raise ValueError(f"tasks: {', '.join(unknown)}: not a streaming task ({', '.join(STREAMING_TASKS)})")
        known = (*STREAMING_TASKS, PAUC_TASK)  # a weight of a task SFT does not train is unused (`tasks` narrowed)
        unknown = sorted(set(self.sft_weights) - set(known))
        if unknown:
            raise ValueError(f"sft_weights: {', '.join(unknown)}: not a task of the demo ({', '.join(known)})")

    def data_args(self) -> dict[str, Any]:
        """Arguments of `export_dataset` (the manifest of ``<out>/data``: same arguments, same files)."""
        return {
            "tasks": [*STREAMING_TASKS, PAUC_TASK],
            "n": self.episodes_per_task,
            "seed": self.seed,
            "env_kinds": [],  # written by stages.export_env_splits, with the recipe's knobs (export_dataset has none)
            "fractions": tuple(self.fractions),
            "duration": tuple(self.duration),
            **self.knobs,
        }

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def quick(settings: DemoSettings | None = None) -> DemoSettings:
    """A smoke run: every stage runs, on a fraction of the data and steps (its numbers are not meaningful)."""
    settings = settings or DemoSettings()
    steps = {
        "sft": {"max_steps": 12},
        "grounding": {"max_steps": 6},
        "grpo_streaming": {"max_steps": 2, "per_device_train_batch_size": 4},
        "grpo_suggestion": {"max_steps": 2, "warm_start_steps": 10},
    }
    return replace(
        settings,
        episodes_per_task=10,
        duration=(30, 36),
        envs_per_kind=20,
        eval_episodes=2,
        eval_pauc_episodes=2,
        eval_envs=3,
        max_new_tokens=6,
        prs_max_new_tokens=3,
        eval_caption_episodes=1,
        # a stage's overrides given by the user win over the smoke run's
        overrides={
            k: {**steps.get(k, {}), **settings.overrides.get(k, {})}
            for k in dict.fromkeys([*steps, *settings.overrides])
        },
        smoke=True,
    )
