"""A tiny Qwen3-VL built locally: the tiny Qwen2.5-VL's recipe (`proactive_rl.models.families.qwen2_5_vl.tiny`)
with Qwen3-VL's classes, 16 px patches, interleaved M-RoPE and one deepstack layer."""

from __future__ import annotations

from ..qwen2_5_vl.tiny import build_qwen_vl, qwen_vl_fields, qwen_vl_processor
from .template import CHAT_TEMPLATE


def build_tiny(size: str = "xs", seed: int = 0, state_tokens: bool = True):
    """A tiny `Qwen3VLForConditionalGeneration` (fp32, eval mode) and its `Qwen3VLProcessor`
    (`proactive_rl.models.build_tiny` documents the arguments)."""
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen3VLForConditionalGeneration

    return build_qwen_vl(size, seed, state_tokens, Qwen3VLForConditionalGeneration, build_processor, build_config)


def build_processor(tokenizer, side: int):
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor

    return qwen_vl_processor(tokenizer, side, 16, Qwen3VLProcessor, Qwen3VLVideoProcessor, CHAT_TEMPLATE)


def build_config(d: dict, tokenizer):
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen3VLConfig

    text, common, vision, section = qwen_vl_fields(d, tokenizer)
    text.update(head_dim=d["hidden"] // d["heads"])
    text["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": 5e6,
        "mrope_section": section,
        "mrope_interleaved": True,
    }
    vision.update(
        patch_size=16, num_position_embeddings=64, deepstack_visual_indexes=[0], hidden_act="gelu_pytorch_tanh"
    )
    return Qwen3VLConfig(text_config=text, vision_config=vision, **common)
