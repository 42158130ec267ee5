"""The interface between the streaming engine / trainers and a model family (docs/architecture.md, "A new model family").

The engine appends chunks of dialogue to a KV cache and must reproduce what the model's own forward pass computes
over the whole sequence: the positions of a chunk's tokens, the features that replace its image placeholders, and
the keyword arguments the model takes them back in. Those are the only things that differ between families; a
`ModelFamily` answers them for one family, bound to the model's inner module (``core``) that owns its vision tower.

The rest of what is family-specific is asked of the family too: its vision tower's parameters
(`proactive_rl.training.freeze_vision_tower`), its tiny model (`tiny_arch`, `build_tiny`:
`proactive_rl.models.build_tiny`), and, as class methods (the chat renderer and the frame resizer hold a processor,
not a model), its processor's rules: the per-image field, tokens per image, the resize of a frame.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch


@dataclass
class ImageFeatures:
    """One image's vision features, shared by every row (and every session) that shows it.

    Args:
        grid_thw (`torch.Tensor`): its row of the family's per-image field (`ModelFamily.image_key`: a ``(3,)`` patch
            grid for Qwen-VL, a ``(2,)`` image size for LLaVA-NeXT).
        embeds (`torch.Tensor`): ``(n_tokens, hidden)``, what replaces its placeholder tokens.
        deepstack (`list[torch.Tensor]`, *optional*): Qwen3-VL: one tensor per deepstack layer.
        output_class (`type`, *optional*): the `ModelOutput` class the model's ``get_image_features`` returns (the
            model's forward takes the features back in it).
    """

    grid_thw: torch.Tensor
    embeds: torch.Tensor
    deepstack: list[torch.Tensor] | None = None
    output_class: type | None = None


def mm_token_types(input_ids: torch.Tensor, image_token_id: int, video_token_id: int | None = None) -> torch.Tensor:
    """``mm_token_type_ids`` as the Qwen-VL processors build them: 0 text, 1 image placeholder, 2 video placeholder."""
    types = (input_ids == image_token_id).int()
    if video_token_id is not None:
        types = types + 2 * (input_ids == video_token_id).int()
    return types


class ModelFamily(ABC):
    """What the streaming engine and the trainers need to know about one model family.

    Subclasses set `model_types` (the ``config.model_type`` values they serve), `image_key` and `core_methods`, and
    implement `positions` and `image_features`; the defaults suit a decoder with 1-D positions that takes image
    features back through ``mm_encoder_outputs``. A family with a tiny model sets `tiny_arch` and implements
    `build_tiny`. Register a subclass with `proactive_rl.models.families.register_family`.

    Args:
        core (`torch.nn.Module`): the module found by `find_core` (owns ``get_image_features``).
    """

    model_types: ClassVar[tuple[str, ...]] = ()
    # the processor output that describes each image, next to `pixel_values`
    image_key: ClassVar[str] = "image_grid_thw"
    # the attributes (methods, parameters) the module that `find_core` returns must have
    core_methods: ClassVar[tuple[str, ...]] = ("get_image_features",)
    # the `proactive_rl.models.build_tiny` arch name of the family's tiny model; None: it has none
    tiny_arch: ClassVar[str | None] = None

    def __init__(self, core: torch.nn.Module):
        self.core = core
        self.config = core.config

    @classmethod
    def find_core(cls, model: torch.nn.Module) -> torch.nn.Module | None:
        """The first submodule of `model` (through PEFT / accelerate / DeepSpeed wrappers) of one of `model_types`
        that has every `core_methods`; `None` when there is none."""
        for module in model.modules():
            config = getattr(module, "config", None)
            if getattr(config, "model_type", None) in cls.model_types:
                if all(hasattr(module, name) for name in cls.core_methods):
                    return module
        return None

    @property
    def image_token_id(self) -> int:
        return self.config.image_token_id

    @property
    def image_delimiters(self) -> tuple[int | None, int | None]:
        """The tokens around an image's placeholder run (removed with it when the image is evicted)."""
        return None, None

    def vision_token_ids(self) -> list[int]:
        """Tokens a turn never samples: the image placeholder and its delimiters."""
        return [t for t in (self.image_token_id, *self.image_delimiters) if t is not None]

    def token_types(self, input_ids: torch.Tensor) -> torch.Tensor | None:
        """The ``mm_token_type_ids`` the model's forward takes for `input_ids`; `None`: it takes none."""
        return None

    def image_inputs(self, processor, images: Sequence) -> dict:
        """``pixel_values`` and the `image_key` field of `images`, from the processor's image processor."""
        out = processor.image_processor(images=list(images), return_tensors="pt")
        return {"pixel_values": out["pixel_values"], self.image_key: out[self.image_key]}

    def pixel_rows(self, grids: torch.Tensor) -> int:
        """How many rows of ``pixel_values`` the images with these `image_key` rows take."""
        return len(grids)

    @abstractmethod
    def positions(self, input_ids: torch.Tensor, grids: torch.Tensor | None, start: int = 0) -> torch.Tensor:
        """Positions ``(3, len)`` of a 1-D chunk of ids (image placeholders expanded) starting at position `start`;
        a family with 1-D positions repeats them on the three rows (see `model_positions`)."""

    @abstractmethod
    def image_features(self, pixel_values: torch.Tensor, grids: torch.Tensor) -> list[ImageFeatures]:
        """Vision features of the images, one `ImageFeatures` each, in order."""

    def model_positions(self, positions: torch.Tensor) -> torch.Tensor:
        """`positions` ``(3, B, S)`` as the model's ``position_ids``; for 1-D positions, their first row."""
        return positions[0]

    def encoder_outputs(self, images: list[ImageFeatures]) -> dict:
        """The model-forward keyword arguments that carry `images`' features (in placeholder order)."""
        return {"mm_encoder_outputs": {"image": images[0].output_class(pooler_output=[im.embeds for im in images])}}

    def needs_full_forward(self, images: list[ImageFeatures]) -> bool:
        """Whether a chunk with `images` must run through the wrapper's ``forward`` (features the language model alone
        does not take, e.g. Qwen3-VL's deepstack), rather than embed + scatter + language model + head."""
        return False

    def vision_tower_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        """``(name, parameter)`` of the vision encoder, what `freeze_vision_tower` freezes; what maps its features
        into the language model (Qwen-VL's merger, LLaVA's projector) is not among them and stays trainable (P³I
        Appendix C). Default: none known (`freeze_vision_tower` refuses the model)."""
        return []

    @classmethod
    def build_tiny(cls, size: str, seed: int = 0, state_tokens: bool = True):
        """``(model, processor)``: the family's tiny model, built locally and deterministically (`tiny_arch`; see
        `proactive_rl.models.build_tiny` for the arguments)."""
        raise NotImplementedError(f"{cls.__name__} has no tiny model (set tiny_arch and implement build_tiny)")

    # ------------------------------------------------------------------ the processor's rules (class methods)
    @classmethod
    def serves_processor(cls, processor) -> bool:
        """Whether `processor` is this family's: by default, an instance of the processor class transformers pairs
        with one of `model_types` (`proactive_rl.models.families.family_of_processor`)."""
        # deferred: keeps transformers out of light import paths
        import transformers
        from transformers.models.auto.processing_auto import PROCESSOR_MAPPING_NAMES

        names = [PROCESSOR_MAPPING_NAMES.get(model_type) for model_type in cls.model_types]
        classes = [getattr(transformers, name, None) for name in names if name]
        return any(isinstance(c, type) and isinstance(processor, c) for c in classes)

    @classmethod
    def tokens_per_image(cls, processor, grids: torch.Tensor) -> torch.Tensor | None:
        """Placeholder tokens of each image ``(n,)``, from its `image_key` rows ``(n, k)``; None: not known from the
        rows (`proactive_rl.chat.encode_dialogue` then does not check its placeholders against them)."""
        return None

    @classmethod
    def frame_size(cls, processor, height: int, width: int) -> tuple[int, int] | None:
        """``(height, width)`` the processor's image processor resizes an ``height × width`` frame to; None: not
        known (the frames stay at full size, `proactive_rl.data.frames.frame_resizer`)."""
        return None

    @classmethod
    def resize_frame(cls, processor, frame: np.ndarray, size: tuple[int, int]) -> np.ndarray:
        """An ``H×W×3`` uint8 `frame` resized to `size` (from `frame_size`) exactly as the processor would."""
        raise NotImplementedError(f"{cls.__name__} gives no frame_size, so it resizes no frame")

    @classmethod
    def tokens_per_resized_frame(cls, processor, height: int, width: int) -> int:
        """Placeholder tokens of a frame already at the processor's size (`frame_size`), which the processor must not
        resize again."""
        raise NotImplementedError(f"{cls.__name__} gives no frame_size, so no frame is resized before processing")


def text_positions(length: int, start: int = 0, device=None) -> torch.Tensor:
    """``(3, length)`` positions of text tokens: one position shared by the three rows."""
    return torch.arange(length, device=device).view(1, -1).expand(3, -1) + start
