"""Tiny Qwen-VL models built locally: same architecture and processor as the real targets, a few MB of weights.

`build_tiny` makes a Qwen2.5-VL or Qwen3-VL model whose config is small enough that one training step on
a few frames takes well under a second on a laptop CPU, with the family's own processor class (its image
processor set to a handful of vision tokens per frame) and chat template, and a byte-level BPE tokenizer
trained at build time (`proactive_rl.models.tokenizer`). Nothing is downloaded. `save_pretrained` on the
model and processor gives a directory that every code path taking a hub id takes the same way.
``arch="llava_next"`` builds the LLaVA-NeXT-Mistral stand-in of `proactive_rl.models.tiny_llava_next` (single-turn
GRPO, ProactiveBench §5; the streaming engine and its 3-D rope positions are Qwen-VL only).
"""

from __future__ import annotations

import torch

from proactive_rl.models.templates import QWEN2_5_VL_CHAT_TEMPLATE, QWEN3_VL_CHAT_TEMPLATE
from proactive_rl.models.text_sizes import text_sizes
from proactive_rl.models.tiny_llava_next import build_tiny_llava_next
from proactive_rl.models.tokenizer import build_tokenizer

ARCHS = ("qwen2_5_vl", "qwen3_vl", "llava_next")
SIZES = ("xs", "s")

# Pixel statistics of the tiny processors: centred on the embedded world's background (235, 235, 235), so a frame's
# vision tokens are its objects. With CLIP's statistics (what the real Qwen2.5-VL processor uses) a mostly-background
# 64 px frame is a near-constant input: the patch vectors of every frame differ from their mean by 4 % of its norm,
# the vision tokens by 7 %, and a model trained from scratch never learns to tell frames apart (it fits a timing
# prior instead: the study diary (git show ee8ae2d:benchmarks/RESULTS.md), "an assistant that sees"). Centred, they differ by about 3 times the mean.
PIXEL_MEAN = [235 / 255] * 3
PIXEL_STD = [0.25] * 3

# Per size: language model, vision tower, and the frame side the image processor resizes to (in patches).
# xs: a 64 px frame -> 4x4 patches -> 2x2 = 4 vision tokens; s: 8x8 patches -> 16 vision tokens.
_SIZES = {
    "xs": dict(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, v_hidden=32, v_depth=2, v_heads=2, side=4),
    "s": dict(hidden=128, layers=4, heads=4, kv_heads=2, ffn=256, v_hidden=64, v_depth=2, v_heads=4, side=8),
}


def build_tiny(arch: str = "qwen2_5_vl", size: str = "xs", seed: int = 0, state_tokens: bool = True):
    """A tiny model and its processor, built locally and deterministically.

    Args:
        arch (`str`, *optional*, defaults to `"qwen2_5_vl"`): `"qwen2_5_vl"`, `"qwen3_vl"` or `"llava_next"`
            (`proactive_rl.models.tiny_llava_next.build_tiny_llava_next`).
        size (`str`, *optional*, defaults to `"xs"`): `"xs"` (hidden 64, 2 layers, 4 vision tokens per frame)
            or `"s"` (hidden 128, 4 layers, 16 vision tokens per frame).
        seed (`int`, *optional*, defaults to `0`): weight initialisation seed; the caller's RNG state is left as it was.
        state_tokens (`bool`, *optional*, defaults to `True`): include ``</Silence>`` / ``</Response>`` in the
            vocabulary (docs/spec.md §2). `False` mimics a released checkpoint, for testing `add_state_tokens`.

    Returns:
        `(model, processor)`: a `Qwen2_5_VLForConditionalGeneration` / `Qwen3VLForConditionalGeneration` /
        `LlavaNextForConditionalGeneration` in fp32 eval mode, and a `Qwen2_5_VLProcessor` / `Qwen3VLProcessor` /
        `LlavaNextProcessor`.
    """
    if arch not in ARCHS:
        raise ValueError(f"unknown tiny-model arch {arch!r}; expected one of {', '.join(ARCHS)}")
    if size not in SIZES:
        raise ValueError(f"unknown tiny-model size {size!r}; expected one of {', '.join(SIZES)}")
    if arch == "llava_next":
        return build_tiny_llava_next(size, seed=seed, state_tokens=state_tokens)
    dims = _SIZES[size]
    tokenizer = build_tokenizer(state_tokens=state_tokens)
    processor = _build_processor(arch, tokenizer, dims["side"])
    config = _build_config(arch, dims, tokenizer)
    model_cls = _model_class(arch)
    # Seeded init without disturbing the caller's RNG (a training script may have seeded it already).
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_cls(config)
    model.generation_config.eos_token_id = [
        tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")
    ]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.do_sample = False
    return model.eval(), processor


def _model_class(arch: str):
    # deferred: keeps torch/transformers out of light import paths
    if arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLForConditionalGeneration

        return Qwen2_5_VLForConditionalGeneration
    from transformers import Qwen3VLForConditionalGeneration

    return Qwen3VLForConditionalGeneration


def _build_processor(arch: str, tokenizer, side: int):
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen2VLImageProcessor

    stats = dict(image_mean=PIXEL_MEAN, image_std=PIXEL_STD)  # the releases: CLIP's (Qwen2.5-VL), 0.5 (Qwen3-VL)
    if arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLProcessor, Qwen2VLVideoProcessor

        pixels = (side * 14) ** 2
        image_processor = Qwen2VLImageProcessor(patch_size=14, merge_size=2, temporal_patch_size=2, **stats)
        video_processor = Qwen2VLVideoProcessor(patch_size=14, merge_size=2, temporal_patch_size=2, **stats)
        cls, template = Qwen2_5_VLProcessor, QWEN2_5_VL_CHAT_TEMPLATE
    else:
        from transformers import Qwen3VLProcessor, Qwen3VLVideoProcessor

        pixels = (side * 16) ** 2
        image_processor = Qwen2VLImageProcessor(patch_size=16, merge_size=2, temporal_patch_size=2, **stats)
        video_processor = Qwen3VLVideoProcessor(patch_size=16, merge_size=2, temporal_patch_size=2, **stats)
        cls, template = Qwen3VLProcessor, QWEN3_VL_CHAT_TEMPLATE
    # Every frame is resized to exactly `side x side` patches whatever its size (min = max pixels), so a
    # frame costs a fixed, small number of vision tokens.
    image_processor.size = {"shortest_edge": pixels, "longest_edge": pixels}
    video_processor.size = {"shortest_edge": pixels, "longest_edge": pixels * 4}
    return cls(
        image_processor=image_processor, tokenizer=tokenizer, video_processor=video_processor, chat_template=template
    )


def _build_config(arch: str, d: dict, tokenizer):
    # deferred: keeps torch/transformers out of light import paths
    ids = {
        t: tokenizer.convert_tokens_to_ids(t)
        for t in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")
    }
    head_dim = d["hidden"] // d["heads"]
    text = dict(
        **text_sizes(d, tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.pad_token_id,  # Qwen: <|endoftext|>
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
    )
    common = dict(
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )
    vision = dict(
        depth=d["v_depth"],
        hidden_size=d["v_hidden"],
        intermediate_size=2 * d["v_hidden"],
        num_heads=d["v_heads"],
        spatial_merge_size=2,
        temporal_patch_size=2,
        out_hidden_size=d["hidden"],
    )
    # M-RoPE splits the rotary half-dimension into (temporal, height, width) sections.
    half = head_dim // 2
    section = [half - 2 * (half // 3), half // 3, half // 3]
    if arch == "qwen2_5_vl":
        from transformers import Qwen2_5_VLConfig

        text["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": section}
        vision.update(patch_size=14, window_size=56, fullatt_block_indexes=[d["v_depth"] - 1], tokens_per_second=2)
        return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **common)
    from transformers import Qwen3VLConfig

    text.update(head_dim=head_dim)
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
