"""The engine's one language-model call, shared by `StreamingSession` and `Batcher` (docs/spec.md §9).

Per-call Python is a large part of a step's cost on small models: the VL wrappers re-check their multimodal inputs
at every call. Embedding + image scatter + language model + lm_head is exactly what they compute when positions and
image features are given, so `LanguageModelForward` calls those modules directly. The wrapper's own ``forward``
runs instead for a model class of unknown ``forward`` (anything but a transformers model or PEFT around one, whose
``forward`` may change the logits) and for features only the wrapper takes (Qwen3-VL's deepstack:
`ModelFamily.needs_full_forward`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from proactive_rl.models.families import ImageFeatures, ModelFamily


@dataclass
class ForwardOutput:
    logits: torch.Tensor
    cache: object


class LanguageModelForward:
    """Logits of a chunk of ids, with explicit positions and the features of its images.

    Args:
        model (`PreTrainedModel`): the model (possibly PEFT-wrapped).
        family (`ModelFamily`): its family (`family_of(model)`), bound to the module that owns the language model.
    """

    def __init__(self, model: torch.nn.Module, family: ModelFamily):
        self.model, self.family = model, family
        self.lm_head = None
        if type(model).__module__.startswith(("transformers.", "peft.")):
            self.embed = family.core.get_input_embeddings()
            self.language_model = getattr(family.core, "language_model", None)
            self.lm_head = model.get_output_embeddings() if self.language_model is not None else None

    def __call__(
        self,
        ids: torch.Tensor,
        positions: torch.Tensor,
        images: list[ImageFeatures],
        columns: torch.Tensor | None,
        attention_mask: torch.Tensor | None = None,
        cache=None,
    ) -> ForwardOutput:
        """Run the model on `ids` ``(B, S)`` (on the model's device) after `cache`.

        Args:
            positions (`torch.Tensor`): ``(3, B, S)`` rope positions (the family turns them into ``position_ids``).
            images (`list[ImageFeatures]`): the images of every placeholder run of `ids`, row-major, in order.
            columns (`torch.Tensor`, *optional*): the columns whose logits to compute; None: every column.
            attention_mask (`torch.Tensor`, *optional*): ``(B, cache + S)``; None: causal over everything.
            cache (*optional*): the KV cache to extend (the output's ``cache``); None: no cache is kept.
        """
        position_ids = self.family.model_positions(positions).to(ids.device)
        if self.lm_head is None or (images and self.family.needs_full_forward(images)):
            kwargs = self.family.encoder_outputs(images) if images else {}
            out = self.model(
                input_ids=ids,
                attention_mask=attention_mask,
                position_ids=position_ids,
                cache=cache,
                use_cache=cache is not None,
                logits_to_keep=0 if columns is None else columns,
                **kwargs,
            )
            return ForwardOutput(out.logits, out.cache)
        embeds = self.embed(ids)
        if images:
            features = torch.cat([im.embeds for im in images]).to(embeds.device, embeds.dtype)
            slots = ids == self.family.image_token_id
            if int(slots.sum()) * embeds.shape[-1] != features.numel():
                raise ValueError(f"{int(slots.sum())} image placeholder tokens but {len(features)} image features")
            embeds = embeds.masked_scatter(slots.unsqueeze(-1).expand_as(embeds), features)
        out = self.language_model(
            inputs_embeds=embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            cache=cache,
            use_cache=cache is not None,
        )
        hidden = out.last_hidden_state if columns is None else out.last_hidden_state[:, columns]
        return ForwardOutput(self.lm_head(hidden), out.cache)
