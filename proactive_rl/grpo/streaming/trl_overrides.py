"""Every override of a TRL-internal method made by streaming GRPO, in one place. Written against TRL 1.16.0.

`trl.GRPOTrainer` does the GRPO part (advantages, clipping, KL, loss types, logging); its public ``rollout_func``
hook lets `StreamingGRPOTrainer` run multi-turn streaming rollouts instead of one ``generate`` call. Three private
methods still need a change, because a streaming trajectory carries its frames *inside* the completion (a new frame
turn before every policy turn), which TRL's single-turn multimodal path does not model:

- ``_generate_and_score_completions``: after TRL scored the batch, attach the trajectory's frames
  (``pixel_values``, ``image_grid_thw``, ``num_images``) and ``mm_token_type_ids`` over prompt + completion, so the
  loss forward pass sees every frame (docs/spec.md §8). TRL shuffles and splits these keys itself.
- ``_get_per_token_logps_and_entropies``: inside TRL's own scoring of the fresh batch (old / reference log-probs)
  the frames are not passed yet; supply them, and derive ``mm_token_type_ids`` from the ids (1 on image tokens;
  the model family's `token_types`), which Qwen-VL needs for its 3-D rope positions.
  With ``advantage: decision | mixed``, it also replaces TRL's per-row ``advantages`` (shape ``(B,)``) by per-token
  ones (``(B, T)``, which TRL's ``_compute_loss`` takes as they are): each policy turn's tokens carry its step's
  advantage (`proactive_rl.grpo.streaming.credit`, docs/spec.md §8).
- ``_calculate_rewards``: TRL decodes completions with ``skip_special_tokens=True``, which deletes the state tokens
  the rewards read; hand the rewards the policy's turns (one string per window step, state tokens kept) instead, and
  the window ids TRL merged into its inputs (a group refilled by dynamic sampling has a new one).

`OVERRIDES` lists them with the parameters each relies on (``PRIVATE_TOUCHES`` declares them for
``tests/test_private_touches.py``); ``tests/rl/test_grpo_streaming.py`` fails loudly if a
TRL upgrade removes or re-signs one of them.
"""

from __future__ import annotations

import torch
from accelerate.utils import gather_object

from proactive_rl.grpo.streaming.credit import split_fraction, step_advantages, token_values

TRL_VERSION = "1.16.0"
# name -> the parameters of TRL's method that the override relies on (checked by the tests against the installed TRL)
OVERRIDES = {
    "_generate_and_score_completions": ("self", "inputs"),
    "_get_per_token_logps_and_entropies": (
        "self",
        "model",
        "input_ids",
        "attention_mask",
        "logits_to_keep",
        "batch_size",
        "compute_entropy",
        "pixel_values",
        "image_grid_thw",
        "num_images",
        "mm_token_type_ids",
    ),
    "_calculate_rewards": ("self", "inputs", "prompts", "completions", "completion_ids_list"),
}
PRIVATE_TOUCHES = {
    **{name: f"trl {TRL_VERSION}: GRPOTrainer.{name} overridden, see the module docstring" for name in OVERRIDES},
    "_metrics": f"trl {TRL_VERSION}: GRPOTrainer._metrics[mode][name], a list of floats averaged into the next log",
}


class StreamingOverridesMixin:
    """Mixed in before ``trl.GRPOTrainer``. The trainer's rollout (`StreamingGRPOTrainer.streaming_rollout`) fills,
    per generation batch (row order):

    - ``self._rollout_mm``: ``pixel_values``, the family's per-image field (``image_grid_thw`` for Qwen-VL) and
      ``num_images`` of every row's frames;
    - ``self._rollout_turns``: per row, the policy's turn at each window step;
    - ``self._rollout_token_steps``: per row, the window step of each completion token (-1 on env tokens).

    ``self.family`` is the policy's `proactive_rl.models.families.ModelFamily`.
    """

    _rollout_mm: dict | None = None
    _rollout_turns: list[list[str]] | None = None
    _rollout_token_steps: list[list[int]] | None = None

    def _generate_and_score_completions(self, inputs):
        try:
            output = super()._generate_and_score_completions(inputs)
            mm = self._rollout_mm
            if mm is None:
                raise RuntimeError("the streaming rollout did not record its frames; was rollout_func replaced?")
            ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
            output.update(mm)
            types = self.family.token_types(ids)
            if types is not None:
                output["mm_token_type_ids"] = types.long()
            if self.args.advantage != "trajectory":
                output["advantages"] = self._token_advantages(output["advantages"], output["completion_ids"].size(1))
            return output
        finally:
            self._rollout_mm, self._rollout_turns, self._rollout_token_steps = None, None, None

    def _token_advantages(self, advantages: torch.Tensor, width: int) -> torch.Tensor:
        """This rank's ``(B, width)`` per-token advantages from TRL's per-row ones; a group may span ranks, so the
        turns and advantages of all ranks are gathered first (TRL's row order)."""
        group_size = self.num_generations if self.model.training else self.num_generations_eval
        turns = gather_object(self._rollout_turns)
        all_rows = self.accelerator.gather(advantages).tolist()
        args = self.args
        per_step = step_advantages(
            turns, all_rows, group_size, args.advantage, args.decision_weight, args.decision_anchor
        )
        start = self.accelerator.process_index * advantages.size(0)
        local = per_step[start : start + advantages.size(0)]
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["credit/split_decisions"].append(split_fraction(turns, group_size, args.decision_anchor))
        values = [token_values(row, steps, width) for row, steps in zip(local, self._rollout_token_steps)]
        return torch.tensor(values, dtype=advantages.dtype, device=advantages.device)

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        mm = self._rollout_mm
        if kwargs.get("pixel_values") is None and mm is not None and len(mm["num_images"]) == input_ids.size(0):
            kwargs.update(mm)  # TRL scoring the fresh generation batch (rows in rollout order)
        types = self.family.token_types(input_ids) if kwargs.get("mm_token_type_ids") is None else None
        if types is not None:
            kwargs["mm_token_type_ids"] = types.long()
        return super()._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, logits_to_keep, *args, **kwargs
        )

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        turns = self._rollout_turns
        if turns is None or len(turns) != len(completions):
            raise RuntimeError(
                f"streaming GRPO: {0 if turns is None else len(turns)} rollout turn lists for {len(completions)} "
                "completions; the rewards would score the wrong text"
            )
        prompts = [x["prompt"] for x in inputs]  # TRL's list predates a dynamic-sampling refill
        return super()._calculate_rewards(inputs, prompts, turns, completion_ids_list)
