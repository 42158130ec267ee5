"""One folder per model family, one registry (docs/architecture.md, "A new model family").

A family's folder (``families/<family>/``) holds all that is specific to it: its `ModelFamily` adapter, its
processor's rules, its tiny model and its chat template. The registry finds a family by ``config.model_type``
(`family_of`), by processor (`family_of_processor`) and by tiny-model arch (`tiny_family`); nothing outside the
folders branches on the family.

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
# tiny-model arch (`ModelFamily.tiny_arch`) -> family: what `proactive_rl.models.build_tiny` builds
TINY_ARCHS: dict[str, type[ModelFamily]] = {}


def register_family(family: type[ModelFamily]) -> type[ModelFamily]:
    """Make `family` serve its `model_types` and, with a `tiny_arch`, build that tiny model (usable as a class
    decorator); a model type already served, or a tiny arch already built, by another family is an error."""
    taken = [t for t in family.model_types if t in FAMILIES and FAMILIES[t] is not family]
    if taken or not family.model_types:
        raise ValueError(f"{family.__name__}: model types {taken or '()'} are already served or none are given")
    arch = family.tiny_arch
    if arch is not None and TINY_ARCHS.get(arch, family) is not family:
        raise ValueError(f"{family.__name__}: tiny arch {arch!r} is already built by {TINY_ARCHS[arch].__name__}")
    for model_type in family.model_types:
        FAMILIES[model_type] = family
    if arch is not None:
        TINY_ARCHS[arch] = family
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


def family_of_processor(processor) -> type[ModelFamily] | None:
    """The first registered family whose processor `processor` is (`ModelFamily.serves_processor`), or None: the
    chat renderer and the frame resizer ask it the processor's rules (image field, tokens per image, resize)."""
    for family in dict.fromkeys(FAMILIES.values()):
        if family.serves_processor(processor):
            return family
    return None


def tiny_family(arch: str) -> type[ModelFamily]:
    """The family that builds the tiny model `arch` (`proactive_rl.models.build_tiny`)."""
    if arch not in TINY_ARCHS:
        raise ValueError(f"unknown tiny-model arch {arch!r}; expected one of {', '.join(TINY_ARCHS)}")
    return TINY_ARCHS[arch]


__all__ = [
    "FAMILIES",
    "TINY_ARCHS",
    "ImageFeatures",
    "ModelFamily",
    "family_of",
    "family_of_processor",
    "mm_token_types",
    "register_family",
    "tiny_family",
]
