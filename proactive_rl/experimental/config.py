"""Arguments of the experimental streaming GRPO trainer: `StreamingGRPOConfig` plus the credit study's knobs
(docs/spec.md §8, docs/grpo_credit.md), validated in ``__post_init__`` as the stable ones are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from proactive_rl.experimental.credit import ADVANTAGES, ANCHORS
from proactive_rl.grpo.streaming.config import StreamingGRPOConfig, StreamingGRPOScriptArguments

TRAINER = "grpo_streaming_experimental"


@dataclass
class ExperimentalStreamingGRPOConfig(StreamingGRPOConfig):
    """`StreamingGRPOConfig` with the credit variants and dynamic sampling; their defaults are the stable trainer's
    behaviour.

    Args:
        advantage (`str`, *optional*, defaults to `"trajectory"`): what a policy turn's tokens carry (docs/spec.md §8):
            ``"trajectory"`` (TRL's group advantage of the window reward, on every token), ``"decision"`` (the
            per-decision advantage from the rows that shared the turn's history, `proactive_rl.experimental.credit`)
            or ``"mixed"`` (the first plus ``decision_weight`` times the second).
        decision_weight (`float`, *optional*, defaults to `1.0`): the weight ``w`` of ``"mixed"``.
        decision_anchor (`str`, *optional*, defaults to `"history"`): which rows share a state at a window step:
            those whose earlier turns are identical (``"history"``) or the whole group (``"step"``: same frames).
        dynamic_sampling (`bool`, *optional*, defaults to `False`): a group whose rewards have no spread (no gradient)
            is replaced by a new window's group, rolled out on the same rank, up to ``max_refills`` rounds per
            generation batch (``rollout/zero_spread_groups``, ``rollout/refilled_groups`` are logged).
        max_refills (`int`, *optional*, defaults to `2`): rounds of refills per generation batch.
    """

    advantage: str = field(default="trajectory", metadata={"help": f"One of {ADVANTAGES} (docs/spec.md §8)."})
    decision_weight: float = field(default=1.0, metadata={"help": "Weight of the decision advantage in 'mixed'."})
    decision_anchor: str = field(default="history", metadata={"help": f"One of {ANCHORS} (docs/spec.md §8)."})
    dynamic_sampling: bool = field(default=False, metadata={"help": "Refill groups whose rewards have no spread."})
    max_refills: int = field(default=2, metadata={"help": "Refill rounds per generation batch."})

    def __post_init__(self):
        super().__post_init__()
        if self.advantage not in ADVANTAGES:
            raise ValueError(f"advantage: expected one of {ADVANTAGES}, got {self.advantage!r}")
        if self.decision_anchor not in ANCHORS:
            raise ValueError(f"decision_anchor: expected one of {ANCHORS}, got {self.decision_anchor!r}")
        if self.max_refills < 0:
            raise ValueError(f"max_refills: must be >= 0, got {self.max_refills}")
        per_rank = self.generation_batch_size // max(self.world_size, 1)
        if self.dynamic_sampling and per_rank % self.num_generations:
            raise ValueError(
                f"dynamic_sampling: each rank's generation batch ({per_rank} rows) must hold whole groups of "
                f"num_generations={self.num_generations}, so that a rank can refill a group alone"
            )


@dataclass
class ExperimentalStreamingGRPOScriptArguments(StreamingGRPOScriptArguments):
    """`StreamingGRPOScriptArguments` of a recipe with ``trainer: grpo_streaming_experimental``."""

    TRAINER: ClassVar[str] = TRAINER

    trainer: str = field(default=TRAINER, metadata={"help": "Trainer to dispatch to."})
