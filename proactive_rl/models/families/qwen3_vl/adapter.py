"""Qwen3-VL: Qwen2.5-VL's 3-D positions and image fields, plus deepstack vision features (docs/spec.md §9).

Qwen3-VL adds the features of intermediate vision layers to the hidden states of its first decoder layers
("deepstack"). Only the wrapper's ``forward`` threads them into the decoder, so a chunk with images runs through it.
The processor's rules (Qwen2-VL's image processor) and the vision tower's parameters are Qwen2.5-VL's.
"""

from __future__ import annotations

from ..base import ImageFeatures
from ..qwen2_5_vl.adapter import Qwen2_5_VLFamily
from . import tiny


class Qwen3VLFamily(Qwen2_5_VLFamily):
    model_types = ("qwen3_vl",)
    tiny_arch = "qwen3_vl"

    @classmethod
    def build_tiny(cls, size: str, seed: int = 0, state_tokens: bool = True):
        return tiny.build_tiny(size, seed=seed, state_tokens=state_tokens)

    def encoder_outputs(self, images: list[ImageFeatures]) -> dict:
        features = {
            "pooler_output": [im.embeds for im in images],
            "deepstack_features": [[im.deepstack[k] for im in images] for k in range(len(images[0].deepstack))],
        }
        return {"mm_encoder_outputs": {"image": images[0].output_class(**features)}}

    def needs_full_forward(self, images: list[ImageFeatures]) -> bool:
        return bool(images)
