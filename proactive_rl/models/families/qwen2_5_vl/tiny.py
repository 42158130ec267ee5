"""A tiny Qwen2.5-VL built locally: same architecture and processor as the real target, a few MB of weights.

Its config is small enough that one training step on a few frames takes well under a second on a laptop CPU; the
processor is the family's own class (its image processor set to a handful of vision tokens per frame) with the
released chat template, and a byte-level BPE tokenizer trained at build time (`proactive_rl.models.tokenizer`).
Nothing is downloaded. `save_pretrained` on the model and processor gives a directory that every code path taking
a hub id takes the same way. `build_qwen_vl`, `qwen_vl_processor` and `qwen_vl_fields` are shared with the tiny
Qwen3-VL, which extends this family.
"""

from __future__ import annotations

import torch

from proactive_rl.models.text_sizes import text_sizes
from proactive_rl.models.tokenizer import build_tokenizer

from .template import CHAT_TEMPLATE

# Pixel statistics of the tiny processors: centred on the embedded world's background (235, 235, 235), so a frame's
# vision tokens are its objects. With CLIP's statistics (what the real Qwen2.5-VL processor uses) a mostly-background
# 64 px frame is a near-constant input: the patch vectors of every frame differ from their mean by 4 % of its norm,
# the vision tokens by 7 %, and a model trained from scratch never learns to tell frames apart (it fits a timing
# prior instead: the study diary (git show ee8ae2d:benchmarks/RESULTS.md), "an assistant that sees"). Centred, they differ by about 3 times the mean.
PIXEL_MEAN = [235 / 255] * 3
PIXEL_STD = [0.25] * 3

# Per size: language model, vision tower, and the frame side the image processor resizes to (in patches).
# xs: a 64 px frame -> 4x4 patches -> 2x2 = 4 vision tokens; s: 8x8 patches -> 16 vision tokens.
SIZES = {
    "xs": dict(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, v_hidden=32, v_depth=2, v_heads=2, side=4),
    "s": dict(hidden=128, layers=4, heads=4, kv_heads=2, ffn=256, v_hidden=64, v_depth=2, v_heads=4, side=8),
}


def build_tiny(size: str = "xs", seed: int = 0, state_tokens: bool = True):
    """A tiny `Qwen2_5_VLForConditionalGeneration` (fp32, eval mode) and its `Qwen2_5_VLProcessor`
    (`proactive_rl.models.build_tiny` documents the arguments)."""
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen2_5_VLForConditionalGeneration

    return build_qwen_vl(size, seed, state_tokens, Qwen2_5_VLForConditionalGeneration, build_processor, build_config)


def build_processor(tokenizer, side: int):
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen2_5_VLProcessor, Qwen2VLVideoProcessor

    return qwen_vl_processor(tokenizer, side, 14, Qwen2_5_VLProcessor, Qwen2VLVideoProcessor, CHAT_TEMPLATE)


def build_config(d: dict, tokenizer):
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen2_5_VLConfig

    text, common, vision, section = qwen_vl_fields(d, tokenizer)
    text["rope_parameters"] = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": section}
    vision.update(patch_size=14, window_size=56, fullatt_block_indexes=[d["v_depth"] - 1], tokens_per_second=2)
    return Qwen2_5_VLConfig(text_config=text, vision_config=vision, **common)


def build_qwen_vl(size: str, seed: int, state_tokens: bool, model_class, build_processor, build_config):
    """A Qwen-VL tiny model: the shared tokenizer, the family's processor and config (`build_processor(tokenizer,
    side)`, `build_config(dims, tokenizer)`), weights seeded without disturbing the caller's RNG."""
    dims = SIZES[size]
    tokenizer = build_tokenizer(state_tokens=state_tokens)
    processor = build_processor(tokenizer, dims["side"])
    config = build_config(dims, tokenizer)
    # Seeded init without disturbing the caller's RNG (a training script may have seeded it already).
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = model_class(config)
    model.generation_config.eos_token_id = [
        tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")
    ]
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.do_sample = False
    return model.eval(), processor


def qwen_vl_processor(tokenizer, side: int, patch: int, processor_class, video_processor_class, template: str):
    """A Qwen-VL processor whose image processor resizes every frame to exactly ``side x side`` patches."""
    # deferred: keeps torch/transformers out of light import paths
    from transformers import Qwen2VLImageProcessor

    stats = dict(image_mean=PIXEL_MEAN, image_std=PIXEL_STD)  # the releases: CLIP's (Qwen2.5-VL), 0.5 (Qwen3-VL)
    pixels = (side * patch) ** 2
    image_processor = Qwen2VLImageProcessor(patch_size=patch, merge_size=2, temporal_patch_size=2, **stats)
    video_processor = video_processor_class(patch_size=patch, merge_size=2, temporal_patch_size=2, **stats)
    # Every frame is resized to exactly `side x side` patches whatever its size (min = max pixels), so a
    # frame costs a fixed, small number of vision tokens.
    image_processor.size = {"shortest_edge": pixels, "longest_edge": pixels}
    video_processor.size = {"shortest_edge": pixels, "longest_edge": pixels * 4}
    return processor_class(
        image_processor=image_processor, tokenizer=tokenizer, video_processor=video_processor, chat_template=template
    )


def qwen_vl_fields(d: dict, tokenizer) -> tuple[dict, dict, dict, list[int]]:
    """The config fields every Qwen-VL tiny model shares: ``(text, common, vision, mrope_section)``."""
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
    return text, common, vision, section
