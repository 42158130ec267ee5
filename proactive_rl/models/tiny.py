"""Tiny vision-language models built locally: the architecture and processor of a real target, a few MB of weights.

`build_tiny` builds the tiny model of a registered model family, looked up by its arch name
(`proactive_rl.models.families.tiny_family`; each family's folder has its builder, e.g.
``families/<family>/tiny.py``). Its config is small enough that one training step on a few frames takes well under a
second on a laptop CPU; its processor is the family's own class, with the released chat template. Nothing is
downloaded. `save_pretrained` on the model and processor gives a directory that every code path taking a hub id
takes the same way.
"""

from __future__ import annotations

from proactive_rl.models.families import TINY_ARCHS, tiny_family

# The library's tiny models (a family registered later is built too: `build_tiny` asks the registry).
ARCHS = tuple(TINY_ARCHS)
SIZES = ("xs", "s")


# `arch` defaults to the tiny model every entry point defaults to (`proactive_rl.models.spec.TINY_DEFAULTS`).
def build_tiny(arch: str = "qwen2_5_vl", size: str = "xs", seed: int = 0, state_tokens: bool = True):
    """A tiny model and its processor, built locally and deterministically.

    Args:
        arch (`str`, *optional*, defaults to `"qwen2_5_vl"`): a registered family's `tiny_arch` (`ARCHS`: Qwen2.5-VL,
            Qwen3-VL, LLaVA-NeXT-Mistral).
        size (`str`, *optional*, defaults to `"xs"`): `"xs"` (hidden 64, 2 layers, 4 vision tokens per Qwen-VL frame)
            or `"s"` (hidden 128, 4 layers, 16 vision tokens per Qwen-VL frame).
        seed (`int`, *optional*, defaults to `0`): weight initialisation seed; the caller's RNG state is left as it was.
        state_tokens (`bool`, *optional*, defaults to `True`): include ``</Silence>`` / ``</Response>`` in the
            vocabulary (docs/spec.md §2). `False` mimics a released checkpoint, for testing `add_state_tokens`.

    Returns:
        `(model, processor)`: the family's ``...ForConditionalGeneration`` in fp32 eval mode and its processor.
    """
    family = tiny_family(arch)
    if size not in SIZES:
        raise ValueError(f"unknown tiny-model size {size!r}; expected one of {', '.join(SIZES)}")
    return family.build_tiny(size, seed=seed, state_tokens=state_tokens)
