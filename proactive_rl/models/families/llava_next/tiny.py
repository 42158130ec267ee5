"""A tiny LLaVA-NeXT-Mistral built locally: the architecture of llava-hf/llava-v1.6-mistral-7b-hf, a few MB of weights.

ProactiveBench §5 post-trains LLaVA-NeXT-Mistral-7B next to Qwen2.5-VL-3B; this is its stand-in for CPU tests
(`proactive_rl.models.build_tiny`), as the tiny Qwen-VL models are for theirs. Same classes as the released checkpoint
(`LlavaNextForConditionalGeneration` with a CLIP vision tower and a Mistral language model, `LlavaNextProcessor`
with `LlavaNextImageProcessor`, the llava-hf chat template, a Mistral-style tokenizer with ``<image>`` and
``<pad>``), with every size divided down: 28 px crops of 2x2 CLIP patches (the real 336 px / 14 = 24x24) and the
real any-resolution grid scaled by 1/12, so a 64 px frame costs 24 ``<image>`` tokens (4 base + 4x4 high-res +
4 row ends). Nothing is downloaded; `save_pretrained` on the model and processor gives a directory that
`AutoModelForImageTextToText` / `AutoProcessor` load like the hub checkpoint.
"""

from __future__ import annotations

import torch

from proactive_rl.models.text_sizes import text_sizes
from proactive_rl.models.tokenizer import build_mistral_tokenizer

from .template import CHAT_TEMPLATE

# Per size: language model and CLIP vision tower (its crop side is 2x2 patches of 14 px in both sizes).
_SIZES = {
    "xs": dict(hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, v_hidden=32, v_layers=2, v_heads=2),
    "s": dict(hidden=128, layers=4, heads=4, kv_heads=2, ffn=256, v_hidden=64, v_layers=2, v_heads=4),
}
PATCH = 14
CROP = 2 * PATCH
# The released grid [[336, 672], [672, 336], [672, 672], [1008, 336], [336, 1008]] with 336 px crops, in 28 px crops.
GRID_PINPOINTS = [[CROP, 2 * CROP], [2 * CROP, CROP], [2 * CROP, 2 * CROP], [3 * CROP, CROP], [CROP, 3 * CROP]]


def build_tiny(size: str = "xs", seed: int = 0, state_tokens: bool = True):
    """A tiny LLaVA-NeXT-Mistral model and its processor, built locally and deterministically.

    Args:
        size (`str`, *optional*, defaults to `"xs"`): `"xs"` (hidden 64, 2 layers) or `"s"` (hidden 128, 4 layers).
        seed (`int`, *optional*, defaults to `0`): weight initialisation seed; the caller's RNG state is left as it was.
        state_tokens (`bool`, *optional*, defaults to `True`): include ``</Silence>`` / ``</Response>`` (docs/spec.md §2).

    Returns:
        `(model, processor)`: a `LlavaNextForConditionalGeneration` in fp32 eval mode and a `LlavaNextProcessor`.
    """
    # deferred: keeps torch/transformers out of light import paths
    from transformers import LlavaNextForConditionalGeneration

    if size not in _SIZES:
        raise ValueError(f"unknown tiny-model size {size!r}; expected one of {', '.join(_SIZES)}")
    tokenizer = build_mistral_tokenizer(state_tokens=state_tokens)
    processor = _build_processor(tokenizer)
    config = _build_config(_SIZES[size], tokenizer)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlavaNextForConditionalGeneration(config)
    model.generation_config.bos_token_id = tokenizer.bos_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.do_sample = False
    return model.eval(), processor


def _build_processor(tokenizer):
    # deferred: keeps torch/transformers out of light import paths
    from transformers import LlavaNextImageProcessor, LlavaNextProcessor

    image_processor = LlavaNextImageProcessor(
        size={"shortest_edge": CROP},
        crop_size={"height": CROP, "width": CROP},
        image_grid_pinpoints=GRID_PINPOINTS,
    )
    # As llava-hf/llava-v1.6-mistral-7b-hf: the CLIP class token is counted, then dropped ("default" strategy).
    return LlavaNextProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        patch_size=PATCH,
        vision_feature_select_strategy="default",
        num_additional_image_tokens=1,
        chat_template=CHAT_TEMPLATE,
    )


def _build_config(d: dict, tokenizer):
    # deferred: keeps torch/transformers out of light import paths
    from transformers import CLIPVisionConfig, LlavaNextConfig, MistralConfig

    # text_sizes rounds the vocabulary up as the released checkpoint does (32064 rows for 32002 tokens).
    text = MistralConfig(
        **text_sizes(d, tokenizer),
        rope_parameters={"rope_type": "default", "rope_theta": 1e6},
        sliding_window=None,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=False,
    )
    vision = CLIPVisionConfig(
        hidden_size=d["v_hidden"],
        intermediate_size=2 * d["v_hidden"],
        num_hidden_layers=d["v_layers"],
        num_attention_heads=d["v_heads"],
        image_size=CROP,
        patch_size=PATCH,
        projection_dim=d["v_hidden"],
    )
    return LlavaNextConfig(
        text_config=text,
        vision_config=vision,
        image_token_index=tokenizer.convert_tokens_to_ids("<image>"),
        image_grid_pinpoints=GRID_PINPOINTS,
        vision_feature_select_strategy="default",
        vision_feature_layer=-2,
        image_seq_length=(CROP // PATCH) ** 2,
        tie_word_embeddings=False,
    )
