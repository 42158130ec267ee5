"""`SuggestionGRPOTrainer` and `ReplayGRPOTrainer`: ``trl.GRPOTrainer`` that resumes exactly, and the same whose loss
adds the streaming replay term (docs/spec.md §7).

Without ``replay_mixture`` suggestion GRPO runs `SuggestionGRPOTrainer`: images, advantages, clipping, LoRA and the
vLLM path are TRL's own; only a resumed run is completed (`proactive_rl.grpo.resume_state`). With it, the loss of
every step adds ``c ·`` the distillation term of `proactive_rl.grpo.suggestion.replay` (streaming dialogues, towards
the starting model).

Pinned version: **trl 1.16.0**. The one TRL internal it touches, declared in ``PRIVATE_TOUCHES``
(``tests/test_private_touches.py`` fails on any other):

- ``GRPOTrainer._metrics["train"][key]``: the per-step lists TRL averages into its logs; ``replay_kl`` is appended.
"""

from __future__ import annotations

from trl import GRPOTrainer

from proactive_rl.grpo.resume_state import ResumableGRPOMixin

PRIVATE_TOUCHES = {
    "_metrics": "trl 1.16.0: GRPOTrainer._metrics[mode][name] is a list of floats averaged into the next log",
}


class SuggestionGRPOTrainer(ResumableGRPOMixin, GRPOTrainer):
    """``trl.GRPOTrainer`` whose ``train(resume_from_checkpoint=...)`` continues exactly (`proactive_rl.grpo.resume_state`)."""


class ReplayGRPOTrainer(SuggestionGRPOTrainer):
    """`SuggestionGRPOTrainer` plus ``replay_coef ×`` the streaming replay loss (its batch RNG is resumed too).

    Args:
        replay (`StreamingReplay`): the replayed streaming dialogues (`proactive_rl.grpo.suggestion.replay`).
        replay_coef (`float`, *optional*, defaults to `1.0`): weight ``c`` of the term.
        *args, **kwargs: as `trl.GRPOTrainer`.
    """

    def __init__(self, *args, replay, replay_coef: float = 1.0, **kwargs):
        super().__init__(*args, **kwargs)
        self.replay, self.replay_coef = replay, replay_coef

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        loss = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        term = self.replay.loss(model)
        self._metrics["train"]["replay_kl"].append(term.item())
        return loss + self.replay_coef * term
