"""The demo's knobs: sizes of the synthetic world, of each evaluation and of each training stage.

The tiny recipes (``recipes/tiny/*.yaml``) are the starting point of every stage; the demo overrides only what
makes the end-to-end run fit its time budget (steps, data, task subset), and writes the recipe it actually ran to
``<out>/recipes/`` so that any stage can be re-run alone with ``proactive-rl train --config``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

import yaml

from proactive_rl.shipped import shipped_path

# The streaming tasks the demo generates; `pvqa` episodes (free-text answers with reply spans) are scored with PAUC
# (docs/spec.md §5), the others with PRS (docs/spec.md §4).
TASKS = ("accident", "atomic", "compositional")
PAUC_TASK = "pvqa"
# The streaming tasks every stage trains and the table scores: one of each kind of the PRS tasks (docs/spec.md §10).
STREAMING_TASKS = ("accident", "atomic", "compositional")
# The contrast episodes' task file (``episodes.pvqa_contrast.json``): trained, never scored (`contrast_tasks`).
CONTRAST = "pvqa_contrast"
# The ask-for-help environments: the kind and difficulty knobs of the tiny suggestion recipe's training environments
# (read from recipes/tiny/grpo_suggestion.yaml, so the held-out split the demo writes always matches what that stage
# trains on): the "merge" corruption, whose states have an exact best-guess accuracy, so that a randomly initialised
# xs model (4 vision tokens per image) learns both the categories and when to ask in CPU-minutes (see the recipe and
# experiments/suggestion_sweep.py). With the standard environments it learned neither.
_KNOB_KEYS = ("negatives", "colours", "layout", "corruptions", "object_radius", "colour_weights", "size")


def suggestion_environments() -> tuple[tuple[str, ...], dict[str, Any]]:
    """``(kinds, knobs)`` of the synthetic training environments of ``recipes/tiny/grpo_suggestion.yaml``."""
    recipe = shipped_path("tiny/grpo_suggestion.yaml")
    sources = [e for e in yaml.safe_load(recipe.read_text())["environments"] if e.get("source") == "synthetic"]
    if not sources:
        raise ValueError(f"{recipe}: the demo needs synthetic training environments in 'environments'")
    knobs = {k: v for k, v in sources[0].items() if k in _KNOB_KEYS}
    return tuple(dict.fromkeys(e["kind"] for e in sources)), knobs


@dataclass
class DemoSettings:
    """Everything the demo does, in one place (``--quick`` shrinks it; see `quick`).

    Args:
        arch (`str`, *optional*, defaults to `"qwen2_5_vl"`): tiny-model architecture (`build_tiny`).
        size (`str`, *optional*, defaults to `"xs"`): tiny-model size.
        seed (`int`, *optional*, defaults to `0`): model init, data and training seed.
        episodes_per_task (`int`): synthetic episodes per task over all splits.
        envs_per_kind (`int`): synthetic environments per kind over all splits (`suggestion_environments`).
        fractions (`tuple`): train / validation / test split of both.
        duration (`tuple`): episode length range in seconds: 30-90 s, so that no frame-blind schedule scores well
            (in 10-14 s episodes a fixed "Warning" at 6 s scored PRS-B 91 on the held-out accident episodes).
        knobs (`dict`): the other difficulty knobs of the streaming tasks (`proactive_rl.synthetic.Knobs`): one
            decision every 2 s (``fps`` 0.5, so a 90 s episode is 45 frames), objects twice the default size and no
            distractors (what a model with 4 vision tokens per frame can tell apart), 1-3 counted events or fill
            cycles per episode, and motion 2.5 times the default speed (10 px per decision at 64 px): at the default
            speed a vehicle moves 4 px per frame and the frame due for the warning looks like its neighbours, so
            the SFT model warned on several of them (accident PRS-B 44.2; at 2.5: 77.7, benchmarks/RESULTS.md).
        eval_episodes (`int`): held-out (test split) episodes per PRS task scored at each stage: all 20 of the test
            split (with 10, one episode moved a task's PRS-B by up to 10 points).
        eval_pauc_episodes (`int`): held-out pvqa episodes scored with PAUC at each stage.
        eval_envs (`int`): held-out environments per kind played at each stage.
        max_new_tokens (`int`): longest assistant turn when evaluating PAUC (free-text answers).
        prs_max_new_tokens (`int`): longest assistant turn when evaluating PRS (``</Response> Warning`` is 2 tokens;
            an untrained model never stops early, so this bounds its evaluation time).
        counterfactual (`bool`): also play every held-out episode and environment with another one's frames
            (``swap``): the table's vision gain (docs/spec.md §14); the blind-schedule row is always computed.
        prs_tasks (`tuple`): the tasks scored with PRS-U / PRS-B at each stage (test split).
        sft_tasks (`tuple`): the tasks focal SFT trains on (train split): every streaming task of the table and
            `pvqa` (free-text answers, scored with PAUC). With the vision tower frozen (the P³I setting) the xs
            model learned one of them (compositional) and lost the others; trained with the rest of the model
            (``sft.freeze_vision_tower: false``, 600 steps) it learns all four (benchmarks/RESULTS.md, "multi-skill
            demo").
        sft_weights (`dict`): how many times focal SFT uses each task's training episodes (mixture ``weight``;
            a task not named: 1): the count episodes twice and half of the pvqa ones. With every weight 1 the xs
            model answered the counts with pvqa's words in two of three seeds (atomic PRS-B 0.0); with these, 80-85
            in every seed (benchmarks/RESULTS.md, "SFT across seeds").
        contrast_tasks (`tuple`): the streaming tasks whose training episodes focal SFT also sees asked the pvqa
            question (`proactive_rl.synthetic.contrast`: the same video, a turn per object that comes into view), so
            that the words follow the instruction and not the frames; mixture weight ``sft_weights["pvqa_contrast"]``
            (default 1). Empty (the default): none. With ``("accident",)`` seed 0's accident warnings all became
            "Warning" but came twice or early: SFT mean PRS-B 3-20 points below the demo's, streaming GRPO's within
            -4.5..+0.7 of it (benchmarks/RESULTS.md, "contrast episodes").
        grounding_tasks (`tuple`): the streaming tasks whose training episodes the grounding stage captions frame by
            frame (`proactive_rl.synthetic.captions`: the objects on screen, which are near each other, the tank's
            state), trained with the SFT recipe before the proactive SFT; empty: no grounding stage.
        grounding (`dict`): overrides of ``recipes/tiny/sft.yaml`` for the grounding stage (on top of ``sft``; its
            learning rate and warm-up are the recipe's).
        eval_caption_episodes (`int`): held-out caption episodes per grounding task scored after the grounding stage
            (PRS-B of the captions, own frames and swapped: does the grounded model read its frames?).
        grpo_tasks (`tuple`): the tasks streaming GRPO rolls out on (train split), all three streaming tasks, 30
            steps at learning rate 1e-4 (``grpo_streaming``; from seed 0's 900-step SFT model 20 / 30 / 40 / 60 / 80
            steps gave +5.6 / +6.7 / +4.8 / +3.0 / -2.3 mean PRS-B: the first steps drop repeated warnings, later ones
            true warnings too: benchmarks/RESULTS.md, "streaming GRPO steps on a stronger SFT model"). Its reward sees
            the repeated warnings teacher forcing does not (accident PRS-B 77.7 → 84.9); leaving the count task out warned better (89.4) but the
            suggestion stage from that model never answered (MCQA acc 0.0): benchmarks/RESULTS.md, "vehicles that
            move".
        grpo_replay_tasks (`tuple`): the tasks whose training episodes streaming GRPO replays (``replay_mixture`` of
            ``recipes/tiny/grpo_streaming.yaml``, weight ``grpo_streaming["replay_coef"]``; `proactive_rl.grpo.replay`);
            empty (the default): none. From seed 0's SFT model, 60 steps replaying pvqa at weight 3 fixed the
            accident words as much as without replay (PRS-B 68.1 -> 84.6) and kept PAUC (60.4, against 22.2
            without), but the mean gain stayed +3.3 to +4.9 (benchmarks/RESULTS.md, "streaming GRPO replay"), and
            on three seeds of another CPU −2.6 / +2.4 / +0.4 ("three seeds of another CPU").
        grpo_count_tasks (`tuple`): a second streaming GRPO phase, from the first one's model (the stage's model is
            then the second's, ``runs/grpo_streaming``; the first's is ``runs/grpo_streaming_all``): rollout windows
            of these tasks, replaying ``grpo_count_replay_tasks``, with ``grpo_count`` on top of ``grpo_streaming``;
            empty (the default): one phase. Nine variants (eight on all three seeds; count windows alone or with
            the others, learning rate 2.5e-4 / 5e-4, replay weight 1 / 3, 40 / 60 steps) moved one seed up and
            another down:
            the best for seed 2, +8.6 mean PRS-B over SFT, gave seed 0 +1.2, and none took seed 1 (SFT 92.3, a gain
            of 5 needs 97.3) above +2.2 (benchmarks/RESULTS.md, "a second streaming GRPO phase on three seeds").
        grpo_count_replay_tasks (`tuple`): the tasks the second phase replays (weight ``grpo_count["replay_coef"]``).
        grpo_count (`dict`): overrides of ``recipes/tiny/grpo_streaming.yaml`` for the second phase, on top of
            ``grpo_streaming``: 40 steps at 5e-4, 8 rollouts at temperature 1.0, replay weight 1 on 4 dialogues per
            step (the count phase of benchmarks/RESULTS.md, "what the count head knows").
        replay_tasks (`tuple`): the streaming tasks whose training episodes the suggestion stage replays
            (``replay_mixture`` of ``recipes/tiny/grpo_suggestion.yaml``; `proactive_rl.grpo.replay`), so
            that the final model keeps the streaming skills (``grpo_suggestion``: weight ``replay_coef`` 20: at 10
            seed 0's final model repeated warnings one frame early, accident PRS-B 93.7 -> 80.5 over the stage, at 20
            90.3 and MCQA acc 70.0 instead of 55.0, benchmarks/RESULTS.md, "suggestion replay weight 20"; on three
            seeds 20 also costs seed 2's MCQA, 55.0 -> 0.0, and seed 1's PAUC, 67.1 -> 61.8, same section; at 3 the
            seeing model lost accident and compositional; 4 dialogues per step instead of the recipe's 2, and a
            warm-start learning rate of 1e-3 instead of 3e-3: from seed 0's 900-step streaming GRPO model, accident
            PRS-B 80.6 -> 84.7 after the stage instead of 29.4, MCQA acc 70.0: benchmarks/RESULTS.md, "the suggestion
            stage keeps what it is given"; at weight 3 seed 1 learns MCQA, 0.0 -> 65.0, and seed 0 keeps less
            accident, 80.5 -> 70.3: same file, "three seeds of 900 SFT steps"). The warm start replays at weight 1
            (``warm_start_replay_coef``), GRPO at 20: at 20 the warm start of seeds 1-2 never learned the colours
            (their final models asked at every state, MCQA 0.0), at 1 the final MCQA acc is 60.0 / 95.0 / 70.0 in
            seeds 0-2 and every streaming task keeps 0.9x its streaming-GRPO score (benchmarks/RESULTS.md, "the
            warm start's own replay weight"); empty: no replay (the suggestion stage then forgets every streaming
            skill: benchmarks/RESULTS.md).
        sft (`dict`): overrides of ``recipes/tiny/sft.yaml`` (``max_length`` 1536: a 90 s episode at 0.5 FPS is
            about 1,400 tokens with the xs model, and a dialogue cut short would lose the count task's history;
            learning rate 3e-3 after 30 warm-up steps: at the recipe's 6e-3 after 3, two seeds of three never
            learned to tell the tasks apart, mean PRS-B 13-15: benchmarks/RESULTS.md, "SFT across seeds"; 900
            steps: at 600 the accident warnings sometimes came with a count's words, accident PRS-B 66.3 / 52.1 in
            seeds 1-2, at 900 92.8 / 72.9: benchmarks/RESULTS.md, "three seeds from a fresh clone"; the
            ``eager`` data pipeline, also for the grounding stage: the demo's few hundred episodes are encoded once,
            in memory, instead of at every step; 12 steps of seed 0's SFT gave the same weights bit for bit in 10.1 s
            instead of 18.0 s: benchmarks/RESULTS.md, "SFT across seeds").
        grpo_streaming (`dict`): overrides of ``recipes/tiny/grpo_streaming.yaml``.
        grpo_suggestion (`dict`): overrides of ``recipes/tiny/grpo_suggestion.yaml``.
    """

    arch: str = "qwen2_5_vl"
    size: str = "xs"
    seed: int = 0
    episodes_per_task: int = 100
    envs_per_kind: int = 100
    fractions: tuple = (0.7, 0.1, 0.2)
    duration: tuple = (30, 90)
    knobs: dict[str, Any] = field(
        default_factory=lambda: {"fps": 0.5, "scale": 2.0, "distractors": 0, "max_events": 3, "speed": 2.5}
    )
    eval_episodes: int = 20
    eval_pauc_episodes: int = 8
    eval_envs: int = 20
    max_new_tokens: int = 8
    prs_max_new_tokens: int = 4
    counterfactual: bool = True
    prs_tasks: tuple = STREAMING_TASKS
    sft_tasks: tuple = (*STREAMING_TASKS, PAUC_TASK)
    sft_weights: dict[str, float] = field(default_factory=lambda: {"atomic": 2.0, PAUC_TASK: 0.5})
    contrast_tasks: tuple = ()
    grounding_tasks: tuple = STREAMING_TASKS
    grounding: dict[str, Any] = field(
        default_factory=lambda: {"max_steps": 200, "max_length": 2048, "learning_rate": 6.0e-3, "warmup_steps": 3}
    )
    eval_caption_episodes: int = 4
    grpo_tasks: tuple = STREAMING_TASKS
    grpo_replay_tasks: tuple = ()
    grpo_count_tasks: tuple = ()
    grpo_count_replay_tasks: tuple = ("accident", "compositional", PAUC_TASK)
    replay_tasks: tuple = (*STREAMING_TASKS, PAUC_TASK)
    sft: dict[str, Any] = field(
        default_factory=lambda: {
            "max_steps": 900,
            "freeze_vision_tower": False,
            "max_length": 1536,
            "learning_rate": 3.0e-3,
            "warmup_steps": 30,
            "data_pipeline": "eager",
        }
    )
    grpo_streaming: dict[str, Any] = field(
        default_factory=lambda: {
            # 30 steps at 1e-4 (settings docstring, grpo_tasks)
            "learning_rate": 1.0e-4,
            "max_steps": 30,
            # the recipe's windows are in seconds at 1 FPS; at one decision every 2 s, the same number of steps
            "lead_s": 6.0,
            "tail_s": 4.0,
            "max_window_s": 12.0,
            "prefix_s": 6.0,
        }
    )
    grpo_count: dict[str, Any] = field(
        default_factory=lambda: {
            "max_steps": 40,
            "learning_rate": 5.0e-4,
            "num_generations": 8,
            "temperature": 1.0,
            "replay_coef": 1.0,
            "replay_batch_size": 4,
        }
    )
    grpo_suggestion: dict[str, Any] = field(
        default_factory=lambda: {
            "replay_coef": 20.0,
            "warm_start_replay_coef": 1.0,
            "replay_batch_size": 4,
            "warm_start_lr": 1.0e-3,
        }
    )

    def data_args(self) -> dict[str, Any]:
        """Arguments of `export_dataset` (the manifest of ``<out>/data``: same arguments, same files)."""
        return {
            "tasks": [*TASKS, PAUC_TASK],
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
    """A smoke-run variant: every stage runs, on a fraction of the data and steps (numbers are not meaningful)."""
    return replace(
        settings or DemoSettings(),
        episodes_per_task=10,
        duration=(30, 36),
        envs_per_kind=20,
        eval_episodes=2,
        eval_pauc_episodes=2,
        eval_envs=3,
        max_new_tokens=6,
        prs_max_new_tokens=3,
        eval_caption_episodes=1,
        sft={**(settings or DemoSettings()).sft, "max_steps": 12},
        grounding={**(settings or DemoSettings()).grounding, "max_steps": 6},
        grpo_streaming={
            **(settings or DemoSettings()).grpo_streaming,
            "max_steps": 2,
            "per_device_train_batch_size": 4,
        },
        grpo_count={**(settings or DemoSettings()).grpo_count, "max_steps": 1, "per_device_train_batch_size": 8},
        grpo_suggestion={**(settings or DemoSettings()).grpo_suggestion, "max_steps": 2, "warm_start_steps": 10},
    )
