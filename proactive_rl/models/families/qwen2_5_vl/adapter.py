"""Qwen2.5-VL: 3-D (m-RoPE) positions and vision features without deepstack (docs/spec.md §9).

Qwen2.5-VL gives text tokens one position shared by the three rope axes (t, h, w) and an image's tokens a
``(t, h, w)`` grid that starts at the current position; after an image the running position is
``start + max(h, w)``, larger than the number of tokens so far. The model's own incremental default (``rope_deltas``
frozen at the first prefill) is wrong as soon as an image arrives in a later turn, so the engine passes explicit
positions for every chunk.

The rope index of a sequence is shift-invariant: the model's ``get_rope_index`` applied to a chunk alone, plus the
position the chunk starts at, equals the rows of ``get_rope_index`` over the whole sequence (tests check this against
the model's own full-sequence computation).
"""

from __future__ import annotations

import torch

from ..base import ImageFeatures, ModelFamily, mm_token_types, text_positions
from . import processor as rules
from . import tiny


class Qwen2_5_VLFamily(ModelFamily):
    model_types = ("qwen2_5_vl",)
    image_key = "image_grid_thw"
    core_methods = ("get_rope_index", "get_image_features")
    tiny_arch = "qwen2_5_vl"

    @classmethod
    def build_tiny(cls, size: str, seed: int = 0, state_tokens: bool = True):
        return tiny.build_tiny(size, seed=seed, state_tokens=state_tokens)

    @property
    def image_delimiters(self) -> tuple[int | None, int | None]:
        return getattr(self.config, "vision_start_token_id", None), getattr(self.config, "vision_end_token_id", None)

    def vision_token_ids(self) -> list[int]:
        video = getattr(self.config, "video_token_id", None)
        return [t for t in (self.image_token_id, video, *self.image_delimiters) if t is not None]

    def token_types(self, input_ids: torch.Tensor) -> torch.Tensor:
        return mm_token_types(input_ids, self.image_token_id, getattr(self.config, "video_token_id", None))

    def pixel_rows(self, grids: torch.Tensor) -> int:
        return int(grids.prod(-1).sum())  # one row of pixel_values per patch

    def positions(self, input_ids: torch.Tensor, grids: torch.Tensor | None, start: int = 0) -> torch.Tensor:
        ids = input_ids.view(1, -1)
        types = self.token_types(ids)
        if grids is None or grids.numel() == 0:
            if bool(types.any()):
                raise ValueError("chunk has image placeholder tokens but no image grids")
            return text_positions(ids.shape[1], start, ids.device)
        pos, _ = self.core.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=grids)
        return pos[:, 0] + start

    def model_positions(self, positions: torch.Tensor) -> torch.Tensor:
        return positions

    def image_features(self, pixel_values: torch.Tensor, grids: torch.Tensor) -> list[ImageFeatures]:
        feats = self.core.get_image_features(pixel_values, grids.to(pixel_values.device), return_dict=True)
        deep = getattr(feats, "deepstack_features", None)
        return [
            ImageFeatures(
                grids[i], feats.pooler_output[i], None if deep is None else [layer[i] for layer in deep], type(feats)
            )
            for i in range(len(grids))
        ]

    def vision_tower_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        # the vision transformer; its merger(s) (patch merger, Qwen3-VL's deepstack mergers) stay trainable
        return [(name, p) for name, p in self.core.visual.named_parameters() if "merger" not in name]

    # the processor's rules: the Qwen2-VL image processor's (`processor.py`)
    @classmethod
    def tokens_per_image(cls, processor, grids: torch.Tensor) -> torch.Tensor:
        return rules.tokens_per_image(processor, grids)

    @classmethod
    def frame_size(cls, processor, height: int, width: int) -> tuple[int, int] | None:
        return rules.frame_size(processor, height, width)

    @classmethod
    def resize_frame(cls, processor, frame, size: tuple[int, int]):
        return rules.resize_frame(processor, frame, size)

    @classmethod
    def tokens_per_resized_frame(cls, processor, height: int, width: int) -> int:
        return rules.tokens_per_resized_frame(processor, height, width)
