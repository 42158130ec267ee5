"""Focal + frequency-balanced SFT on the state tokens (docs/spec.md §3): the loss and the `SFTTrainer` subclass.

- `focal_state_loss(logits, labels, state_token_ids, gamma=2.0, balance=True, balance_power=1.0, content_weight=1.0,
  counts=None)`: docs/spec.md §3 for one micro-batch, normalised by the global counts of the optimizer step.
- `ProactiveSFTTrainer`: `trl.SFTTrainer` with that loss, counts all-reduced over accumulation steps and ranks.
"""

from proactive_rl.sft.loss import FocalLossOutput, focal_state_loss, state_token_counts, summarize_stats

__all__ = ["FocalLossOutput", "ProactiveSFTTrainer", "focal_state_loss", "state_token_counts", "summarize_stats"]


def __getattr__(name):
    # the trainer pulls in trl/transformers; import it only when asked for
    # deferred: keeps --help / light imports fast
    if name == "ProactiveSFTTrainer":
        from proactive_rl.sft.trainer import ProactiveSFTTrainer

        return ProactiveSFTTrainer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
