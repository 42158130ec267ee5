"""`ProactiveSFTTrainer`: TRL's `SFTTrainer` with the docs/spec.md §3 focal + frequency-balanced loss.

Pinned versions: **trl 1.16.0, transformers 5.25.0**. This module is the only place SFT leans on Trainer
internals (each private one declared in ``PRIVATE_TOUCHES``; ``tests/test_private_touches.py`` fails on any other),
and `tests/rl/test_sft_trainer.py::test_trainer_internals_still_there` fails loudly if they change:

- ``Trainer.get_batch_samples(epoch_iterator, num_batches, device) -> (batches, num_items_in_batch)`` is called
  once per optimizer step by ``_inner_training_loop`` with all the micro-batches of the step. We override it to
  count ``|V|`` and the state-token classes ``n_y`` over those micro-batches and all-reduce them over ranks, so the
  loss of every micro-batch is normalised by the counts of the global batch (docs/spec.md §3).
- ``Trainer.loss_is_scaled_for_ga = True`` tells ``training_step`` not to divide by the accumulation steps again
  (and under DeepSpeed the Trainer passes ``scale_wrt_gas=False``).
- ``Trainer._load_from_checkpoint(resume_from_checkpoint, model=None)`` loads ``model.safetensors`` with a raw
  ``load_state_dict``, but ``save_pretrained`` writes Qwen-VL weights in the hub's original key layout
  (``visual.*``, ``model.layers.*``), so a resume would silently keep the *initial* weights. We load the checkpoint
  through ``from_pretrained`` (which maps the keys) and copy the weights in (`proactive_rl.training.
  load_checkpoint_weights`, shared with the GRPO trainers). PEFT, FSDP and DeepSpeed checkpoints take their own
  paths and are left to the Trainer.
- checkpoints are written atomically, ``resume_from_checkpoint: true`` picks the newest complete one, and
  SIGTERM / SIGUSR1 save and stop: `proactive_rl.checkpoints.CheckpointMixin` (its private touches declared there).
- DDP and DeepSpeed average gradients over ranks, so the returned loss is multiplied by the world size (as
  ``Trainer.compute_loss`` does with ``average_tokens_across_devices``).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from trl import SFTTrainer

from proactive_rl.checkpoints import CheckpointMixin
from proactive_rl.sft.loss import focal_state_loss, state_token_counts, summarize_stats
from proactive_rl.training import load_checkpoint_weights

STATE_CLASS_NAMES = ("silence", "response")
PRIVATE_TOUCHES = {
    "_load_from_checkpoint": "transformers 5.25.0: Trainer._load_from_checkpoint(resume_from_checkpoint, model=None)"
    " overridden for plain checkpoints",
}


class ProactiveSFTTrainer(CheckpointMixin, SFTTrainer):
    """SFT on state-token dialogues with the focal + frequency-balanced loss (docs/spec.md §3).

    Args:
        state_token_ids (`list[int]`): ids of ``</Silence>`` and ``</Response>``, in that order.
        *args, **kwargs: as `trl.SFTTrainer`; ``args`` is a `ProactiveSFTConfig` (``focal_gamma``,
            ``state_balance``), ``data_collator`` renders episodes (`proactive_rl.data.EpisodeCollator`).
    """

    # our loss is already normalised by the global count of supervised tokens of the optimizer step
    loss_is_scaled_for_ga = True

    def __init__(self, *args, state_token_ids: list[int], **kwargs):
        super().__init__(*args, **kwargs)
        self.state_token_ids = list(state_token_ids)
        self._step_counts: torch.Tensor | None = None
        self._stat_sums = {"train": None, "eval": None}
        # records the lazy collator dropped mid-training (a video that failed to decode), summed over batches
        self.skipped_records = 0
        self._skipped_all_ranks = 0

    # --- Trainer internals (transformers 5.25.0), see the module docstring -------------------------------------
    def get_batch_samples(self, epoch_iterator: Iterator, num_batches: int, device: torch.device):
        batches = []
        for _ in range(num_batches):
            try:
                batches.append(next(epoch_iterator))
            except StopIteration:
                break
        counts = state_token_counts([b["labels"][..., 1:] for b in batches], self.state_token_ids)
        self._step_counts = self._all_reduce(counts)
        return batches, self._step_counts[0].clone().to(device)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        if not load_checkpoint_weights(self, resume_from_checkpoint, model):
            super()._load_from_checkpoint(resume_from_checkpoint, model)

    # --- loss ----------------------------------------------------------------------------------------------------
    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        mode = "train" if model.training else "eval"
        skipped = inputs.pop("skipped_records", None)
        if skipped is not None:
            self.skipped_records += int(skipped)
        labels = inputs["labels"]
        shift_labels = labels[:, 1:]
        # logits only where some row has a supervised next token: the full (batch, seq, vocab) tensor of a
        # long video dialogue would not fit
        keep = (shift_labels != -100).any(0).nonzero().squeeze(-1)
        model_inputs = {k: v for k, v in inputs.items() if k != "labels"}
        outputs = model(**model_inputs, use_cache=False, logits_to_keep=keep)
        logits = outputs.logits
        target = shift_labels[:, keep]

        counts = self._step_counts if (mode == "train" and num_items_in_batch is not None) else None
        if counts is None:
            counts = self._all_reduce(state_token_counts(target, self.state_token_ids))
        out = focal_state_loss(
            logits,
            target,
            self.state_token_ids,
            gamma=self.args.focal_gamma,
            balance=self.args.state_balance,
            balance_power=self.args.state_balance_power,
            content_weight=self.args.content_weight,
            counts=counts,
        )
        loss = out.loss * self.accelerator.num_processes
        sums = self._stat_sums[mode]
        self._stat_sums[mode] = out.stats.detach().cpu() if sums is None else sums + out.stats.detach().cpu()
        return (loss, outputs) if return_outputs else loss

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        mode = "train" if self.model.training else "eval"
        sums = self._stat_sums[mode]
        if sums is not None:
            metrics = summarize_stats(self._all_reduce(sums), list(STATE_CLASS_NAMES))
            prefix = "eval_" if mode == "eval" else ""
            logs.update({prefix + k: round(v, 6) for k, v in metrics.items()})
            self._stat_sums[mode] = None
            # every rank has stats here (a symmetric point): sum the records each rank's collator dropped
            skipped = self._all_reduce(torch.tensor([self.skipped_records], dtype=torch.long))
            self._skipped_all_ranks = int(skipped[0])
        if self._skipped_all_ranks:
            logs["skipped_records"] = self._skipped_all_ranks
        # SFTTrainer.log adds its own (empty here) metrics and forwards to Trainer.log
        super().log(logs, start_time)

    def _all_reduce(self, tensor: torch.Tensor) -> torch.Tensor:
        if self.accelerator.num_processes == 1:
            return tensor
        dtype = tensor.dtype
        device = self.accelerator.device
        return self.accelerator.reduce(tensor.to(device), reduction="sum").to(dtype).cpu()
