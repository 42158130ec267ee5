"""One adapter per model family, looked up by ``config.model_type`` (docs/architecture.md, "A new model family").

Example::

    family = family_of(model)  # Qwen2_5_VLFamily bound to the model's inner Qwen2_5_VLModel
    positions = family.positions(input_ids, image_grid_thw, start=next_free_position)
"""

from __future__ import annotations

import torch

from .base import ImageFeatures, ModelFamily, mm_token_types
from .llava_next import LlavaNextFamily
from .qwen2_5_vl import Qwen2_5_VLFamily
from .qwen3_vl import Qwen3VLFamily

FAMILIES: dict[str, type[ModelFamily]] = {}


def register_family(family: type[ModelFamily]) -> type[ModelFamily]:
    """Make `family` serve its `model_types` (usable as a class decorator); a model type already served is an error."""
    taken = [t for t in family.model_types if t in FAMILIES and FAMILIES[t] is not family]
    if taken or not family.model_types:
        raise ValueError(f"{family.__name__}: model types {taken or '()'} are already served or none are given")
    for model_type in family.model_types:
        FAMILIES[model_type] = family
    return family


for _family in (Qwen2_5_VLFamily, Qwen3VLFamily, LlavaNextFamily):
    register_family(_family)


def family_of(model: torch.nn.Module) -> ModelFamily:
    """The `ModelFamily` of `model` (a transformers model, or a PEFT / accelerate / DeepSpeed wrapper of one)."""
    for module in model.modules():
        family = FAMILIES.get(getattr(getattr(module, "config", None), "model_type", None))
        core = None if family is None else family.find_core(model)
        if core is not None:
            return family(core)
    raise TypeError(
        f"{type(model).__name__} is of no registered model family (model types: {', '.join(sorted(FAMILIES))}); "
        "add one with proactive_rl.models.families.register_family (docs/architecture.md, 'A new model family')"
    )


__all__ = ["FAMILIES", "ImageFeatures", "ModelFamily", "family_of", "mm_token_types", "register_family"]
