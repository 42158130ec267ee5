"""`SuggestionGRPOTrainer` and `ReplayGRPOTrainer`: ``trl.GRPOTrainer`` that resumes exactly, and the same whose loss
adds the streaming replay term (docs/spec.md §7).

Without ``replay_mixture`` suggestion GRPO runs `SuggestionGRPOTrainer`: images, advantages, clipping, LoRA and the
vLLM path are TRL's own; only a resumed run is completed (`proactive_rl.grpo.resume_state`). With it, the loss of
every step adds ``c ·`` the distillation term of `proactive_rl.grpo.replay` (streaming dialogues, towards
the starting model).
The replay term's one TRL internal (``GRPOTrainer._metrics``) is declared in `proactive_rl.grpo.replay`.
"""

from __future__ import annotations

from trl import GRPOTrainer

from proactive_rl.grpo.replay import ReplayLossMixin
from proactive_rl.grpo.resume_state import ResumableGRPOMixin


class SuggestionGRPOTrainer(ResumableGRPOMixin, GRPOTrainer):
    """``trl.GRPOTrainer`` whose ``train(resume_from_checkpoint=...)`` continues exactly (`proactive_rl.grpo.resume_state`)."""


class ReplayGRPOTrainer(ReplayLossMixin, SuggestionGRPOTrainer):
    """`SuggestionGRPOTrainer` plus ``replay_coef ×`` the streaming replay loss (`proactive_rl.grpo.replay`).

    Args:
        replay (`StreamingReplay`): the replayed streaming dialogues.
        replay_coef (`float`, *optional*, defaults to `1.0`): weight ``c`` of the term.
        *args, **kwargs: as `trl.GRPOTrainer`.
    """
