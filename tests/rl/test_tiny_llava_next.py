"""The tiny LLaVA-NeXT-Mistral (ProactiveBench §5's second post-trained model): same classes, template, tokenizer
layout and image-token arithmetic as llava-hf/llava-v1.6-mistral-7b-hf, and a saved copy loads like the hub one."""

import numpy as np
import pytest
import torch
from PIL import Image

from proactive_rl.models import build_tiny, load_model


@pytest.fixture(scope="module")
def tiny():
    return build_tiny("llava_next", "xs", seed=0)


def _prompt(question="Which category? A. cat B. dog"):
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}]


def _image(height=64, width=64, seed=0):
    return Image.fromarray(np.random.default_rng(seed).integers(0, 256, (height, width, 3), dtype=np.uint8))


def test_chat_template_is_mistral_instruct_with_the_image_first(tiny):
    _, processor = tiny
    text = processor.apply_chat_template(_prompt(), add_generation_prompt=True, tokenize=False)
    assert text == "[INST] <image>\nWhich category? A. cat B. dog [/INST]"


@pytest.mark.parametrize(
    ("height", "width", "expected"),
    [
        # 64x64 -> best grid 56x56 = 2x2 crops of 2x2 patches: 4 base + 4x4 + 4 row ends = 24.
        (64, 64, 4 + 16 + 4),
        # 28x84 (1:3) -> grid 28x84: 2 patch rows x 6 columns, no unpadding: 4 base + 2x6 + 2 row ends = 18.
        (28, 84, 4 + 12 + 2),
    ],
)
def test_image_tokens_follow_llava_next_any_resolution(tiny, height, width, expected):
    model, processor = tiny
    text = processor.apply_chat_template(_prompt(), add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[_image(height, width)], return_tensors="pt")
    assert int((inputs["input_ids"] == model.config.image_token_id).sum()) == expected
    assert inputs["image_sizes"].tolist() == [[height, width]]
    with torch.no_grad():  # the model takes exactly that many image features
        logits = model(**inputs).logits
    assert logits.shape[1] == inputs["input_ids"].shape[1] and torch.isfinite(logits).all()


def test_tokenizer_is_laid_out_like_mistral(tiny):
    _, processor = tiny
    tok = processor.tokenizer
    assert tok.convert_ids_to_tokens([0, 1, 2, 3, 258]) == ["<unk>", "<s>", "</s>", "<0x00>", "<0xFF>"]
    assert tok("x")["input_ids"][0] == tok.bos_token_id == 1 and tok.eos_token == "</s>" and tok.pad_token == "<pad>"
    # The legacy normaliser prepends "▁": the option letter a model writes after " [/INST]" is one piece.
    from proactive_rl.data.mcqa import letter_token_ids

    ids = letter_token_ids(tok, 9)
    assert tok.convert_ids_to_tokens(ids) == [f"▁{chr(65 + k)}" for k in range(9)]
    assert [tok.decode([i]) for i in ids] == list("ABCDEFGHI")
    # Characters outside the corpus fall back to bytes and decode back.
    text = "Ünïcödé ✓ 12"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_save_and_load_like_a_hub_checkpoint(tiny, tmp_path):
    from transformers import LlavaNextForConditionalGeneration, LlavaNextProcessor

    model, processor = tiny
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    loaded, loaded_processor = load_model(tmp_path, state_tokens=False)
    assert isinstance(loaded, LlavaNextForConditionalGeneration)
    assert isinstance(loaded_processor, LlavaNextProcessor)
    text = processor.apply_chat_template(_prompt(), add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[_image()], return_tensors="pt")
    again = loaded_processor(text=[text], images=[_image()], return_tensors="pt")
    assert torch.equal(inputs["input_ids"], again["input_ids"])
    with torch.no_grad():
        assert torch.allclose(model(**inputs).logits, loaded(**again).logits, atol=1e-6)


def test_deterministic_from_seed_and_sizes():
    a, _ = build_tiny("llava_next", "xs", seed=3)
    b, _ = build_tiny("llava_next", "xs", seed=3)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))
    s, _ = build_tiny("llava_next", "s", seed=3)
    assert s.config.text_config.hidden_size == 128 and a.config.text_config.hidden_size == 64
    with pytest.raises(ValueError, match="unknown tiny-model size 'xl'"):
        build_tiny("llava_next", "xl")
