"""LLaVA-NeXT (e.g. llava-hf/llava-v1.6-mistral-7b-hf): 1-D positions, any-resolution image features.

The decoder (Mistral) numbers tokens 0, 1, 2, ... whatever they are, so a chunk's positions continue the count.
An image's features are its crops' CLIP features packed with ``image_newline`` rows; their number depends on the
image size, which is the per-image field the processor returns (``image_sizes``). ``pixel_values`` has one row per
image (its crops stacked).
"""

from __future__ import annotations

import torch

from ..base import ImageFeatures, ModelFamily, text_positions
from . import tiny


class LlavaNextFamily(ModelFamily):
    model_types = ("llava_next",)
    image_key = "image_sizes"
    # the inner `LlavaNextModel` (the wrapper has `get_image_features` too, but not the newline parameter)
    core_methods = ("get_image_features", "image_newline")
    tiny_arch = "llava_next"

    @classmethod
    def build_tiny(cls, size: str, seed: int = 0, state_tokens: bool = True):
        return tiny.build_tiny(size, seed=seed, state_tokens=state_tokens)

    def positions(self, input_ids: torch.Tensor, grids: torch.Tensor | None, start: int = 0) -> torch.Tensor:
        return text_positions(input_ids.numel(), start, input_ids.device)

    def image_features(self, pixel_values: torch.Tensor, grids: torch.Tensor) -> list[ImageFeatures]:
        feats = self.core.get_image_features(pixel_values, grids.to(pixel_values.device), return_dict=True)
        return [ImageFeatures(grids[i], feats.pooler_output[i], None, type(feats)) for i in range(len(grids))]

    def vision_tower_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        # the CLIP encoder; the projector and the image-newline row stay trainable
        return list(self.core.vision_tower.named_parameters())
