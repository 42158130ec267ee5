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
- ``_calculate_rewards``: TRL decodes completions with ``skip_special_tokens=True``, which deletes the state tokens
  the rewards read; hand the rewards the policy's turns (one string per window step, state tokens kept) instead.

`OVERRIDES` lists them with the parameters each relies on (``PRIVATE_TOUCHES`` declares them for
``tests/test_private_touches.py``); ``tests/rl/test_grpo_streaming.py`` fails loudly if a
TRL upgrade removes or re-signs one of them.
"""

from __future__ import annotations

import torch

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
    name: f"trl {TRL_VERSION}: GRPOTrainer.{name} overridden, see the module docstring" for name in OVERRIDES
}


class StreamingOverridesMixin:
    """Mixed in before ``trl.GRPOTrainer``. The trainer's rollout (`StreamingGRPOTrainer.streaming_rollout`) fills,
    per generation batch (row order):

    - ``self._rollout_mm``: ``pixel_values``, the family's per-image field (``image_grid_thw`` for Qwen-VL) and
      ``num_images`` of every row's frames;
    - ``self._rollout_turns``: per row, the policy's turn at each window step.

    ``self.family`` is the policy's `proactive_rl.models.families.ModelFamily`.
    """

    _rollout_mm: dict | None = None
    _rollout_turns: list[list[str]] | None = None

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
            return output
        finally:
            self._rollout_mm, self._rollout_turns = None, None

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
        return super()._calculate_rewards(inputs, prompts, turns, completion_ids_list)
