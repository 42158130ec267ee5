"""Arguments of streaming GRPO (docs/spec.md §8), parsed by ``trl.TrlParser`` from a YAML recipe plus CLI overrides.

`StreamingGRPOConfig` (a ``trl.GRPOConfig`` with the rollout and reward knobs), `StreamingGRPOScriptArguments`
(episodes cut into rollout windows) and ``trl.ModelConfig``; each is validated in ``__post_init__`` so that a bad
recipe fails before a model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from trl import GRPOConfig

from proactive_rewards import ALPHA
from proactive_rl.chat import DEFAULT_SYSTEM_PROMPT
from proactive_rl.data import load_mixture, parse_mixture
from proactive_rl.data.mixture import ON_ERROR, check_data_arguments
from proactive_rl.grpo.streaming.windows import RolloutWindow, build_windows
from proactive_rl.training import eval_callback_config


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
        rollout_batch_size (`int`, *optional*, defaults to `8`): rollout groups (windows, G rows each) of a rank's
            generation batch played in lockstep, one batched vision call and one batched language-model call per
            step (`proactive_rl.streaming.batch`; the same rollouts as one group after another, ``1``).

    Every policy token carries TRL's group advantage of the window reward (docs/spec.md §8). The credit study's knobs
    (``advantage``, ``decision_weight``, ``decision_anchor``, ``dynamic_sampling``, ``max_refills``) are fields of
    the experimental trainer, ``trainer: grpo_streaming_experimental`` (`proactive_rl.experimental`,
    docs/grpo_credit.md); a recipe of this trainer that sets one is told so (`MOVED_FIELDS`).
    """

    # field -> the trainer whose recipes take it (read by `proactive_rl.recipe_args.check_keys` for its message)
    MOVED_FIELDS: ClassVar[dict[str, str]] = dict.fromkeys(
        ("advantage", "decision_weight", "decision_anchor", "dynamic_sampling", "max_refills"),
        "grpo_streaming_experimental",
    )

    max_turn_tokens: int = field(default=16, metadata={"help": "Per-turn cap on decoded tokens."})
    reward_alpha: float = field(
        default=ALPHA, metadata={"help": "Temporal decay α of the task rewards (docs/spec.md §4)."}
    )
    reward_lambda: float = field(
        default=0.2, metadata={"help": "Penalty λ per extra/invalid output (docs/spec.md §7)."}
    )
    reward_on_error: str = field(default="raise", metadata={"help": f"One of {ON_ERROR}."})
    system_prompt: str = field(default=DEFAULT_SYSTEM_PROMPT, metadata={"help": "The system turn."})
    frame_cache_size: int = field(default=64, metadata={"help": "Episodes whose frames stay in memory."})
    rollout_batch_size: int = field(default=8, metadata={"help": "Rollout groups played in lockstep."})

    def __post_init__(self):
        # the reward columns (task, targets) must reach the rewards
        self.remove_unused_columns = False
        super().__post_init__()
        if self.max_turn_tokens < 1:
            raise ValueError(f"max_turn_tokens: must be >= 1, got {self.max_turn_tokens}")
        if self.rollout_batch_size < 1:
            raise ValueError(f"rollout_batch_size: must be >= 1, got {self.rollout_batch_size}")
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
            dispatches to (recipes name it so one command serves SFT and GRPO); `TRAINER`, the one of this class.
        dataset_mixture (`list`): training episode sources (`proactive_rl.data.mixture.DatasetSource`).
        eval_mixture (`list`, *optional*): held-out sources.
        register_tasks (`list[str]`, *optional*): user tasks to add to the task table before the data loads, by
            import path (``my_pkg.tasks:SPEC`` or a module that registers them; `proactive_rewards.load_tasks`).
        on_bad_record (`str`, *optional*, defaults to `"raise"`): for episode files, see `load_episodes`.
        lead_s, tail_s, max_window_s, prefix_s (`float`, *optional*, defaults to `4.0`, `4.0`, `16.0`, `8.0`): window
            construction, see `build_windows` (these are its only defaults).
        tasks (`list[str]`, *optional*): keep only these tasks' windows.
        expected_windows (`dict[str, int]`, *optional*): windows per task the training data must give (e.g. the P³I
            RL set: accident 300, atomic 100, event_type 100, compositional 363); checked before the model loads.
        freeze_vision_tower (`bool`, *optional*, defaults to `True`): P³I: vision encoder frozen.
        replay_mixture (`list`, *optional*): streaming episodes (a dataset mixture, docs/spec.md §1) of tasks the
            windows do not reward, distilled at every step towards the starting model (`proactive_rl.grpo.replay`),
            so that what the rewards teach (e.g. say "Warning") does not overwrite them (pvqa's free-text answers).
        replay_coef (`float`, *optional*, defaults to `1.0`): weight ``c`` of that term.
        replay_batch_size (`int`, *optional*, defaults to `2`): dialogues per replay batch.
        eval_callback (`dict`, *optional*): evaluators run on the live model while training (on save / every N
            steps), as in SFT: `proactive_rl.evaluation.EvalCallbackConfig`.
    """

    TRAINER: ClassVar[str] = "grpo_streaming"

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
    replay_mixture: Any = field(default=None, metadata={"help": "Streaming episodes replayed (distilled) each step."})
    replay_coef: float = field(default=1.0, metadata={"help": "Weight of the streaming replay term."})
    replay_batch_size: int = field(default=2, metadata={"help": "Dialogues per replay batch."})
    # evaluators run while training: a mapping, see `proactive_rl.evaluation.EvalCallbackConfig`.
    eval_callback: Any = field(default=None, metadata={"help": "Evaluators run while training."})

    def __post_init__(self):
        if self.trainer != self.TRAINER:
            raise ValueError(f"trainer: this entry point runs {self.TRAINER!r}, got {self.trainer!r}")
        check_data_arguments(self)
        if self.replay_mixture is not None:
            self.replay_mixture = parse_mixture(self.replay_mixture, "replay_mixture")
            if not self.replay_coef >= 0:
                raise ValueError(f"replay_coef: expected a number >= 0, got {self.replay_coef!r}")
        self.eval_callback = eval_callback_config(self.eval_callback)  # validated before a model is loaded

    def windows(self, sources) -> list[RolloutWindow]:
        episodes, _ = load_mixture(sources, on_error=self.on_bad_record)
        return build_windows(
            episodes,
            lead_s=self.lead_s,
            tail_s=self.tail_s,
            max_window_s=self.max_window_s,
            prefix_s=self.prefix_s,
            tasks=self.tasks,
        )
