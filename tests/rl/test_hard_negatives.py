"""Hard negatives for the MS-COCO options: the lexical fallback by hand, and the CLIP text miner on a tiny local
CLIP (random weights: the path runs; its similarity is the cosine of the text features, checked here)."""

import numpy as np
import pytest

from proactive_rl.data.proactivebench.negatives import NegativeMiner, lexical_similarity

NAMES = ["dog", "cat", "horse", "car", "truck", "bus"]
SUPER = ["animal", "animal", "animal", "vehicle", "vehicle", "vehicle"]


def test_lexical_fallback_prefers_the_same_supercategory_then_shared_trigrams():
    miner = NegativeMiner(NAMES, SUPER)
    assert miner.method == "lexical"
    # "truck" and "bus" share the supercategory with "car" (+1); neither shares a trigram with it; then the
    # animals at 0, ties broken by name.
    assert miner.negatives("car") == ["bus", "truck", "cat"]
    sims = lexical_similarity(["dog", "dogs"])
    # {"  d", " do", "dog", "og "} and {"  d", " do", "dog", "ogs", "gs "}: 3 shared, 6 in all
    assert sims[0, 1] == pytest.approx(3 / 6)
    with pytest.raises(ValueError, match="need more than 3 categories"):
        NegativeMiner(NAMES[:3]).negatives("dog")


def test_clip_miner_uses_the_text_features_cosine(tmp_path):
    import torch
    from transformers import CLIPConfig, CLIPModel

    from proactive_rl.models import build_tiny

    _, processor = build_tiny("qwen2_5_vl", "xs")
    tokenizer = processor.tokenizer
    # CLIP pools the text at its first eos token; make it the closing ".", which (causal attention) sees the name.
    period = tokenizer.encode(".", add_special_tokens=False)[0]
    text = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=37, num_hidden_layers=1,
                num_attention_heads=2, max_position_embeddings=64, bos_token_id=period, eos_token_id=period)  # fmt: skip
    vision = dict(hidden_size=32, intermediate_size=37, num_hidden_layers=1, num_attention_heads=2, image_size=30,
                  patch_size=15)  # fmt: skip
    torch.manual_seed(0)
    model = CLIPModel(CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)).eval()
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    miner = NegativeMiner(NAMES, SUPER, clip_model=str(tmp_path))
    assert miner.method == "clip"
    with torch.no_grad():
        inputs = tokenizer([f"a photo of a {n}." for n in NAMES], padding=True, return_tensors="pt")
        out = model.get_text_features(**inputs)
        feats = getattr(out, "pooler_output", out).numpy()
    feats = feats / np.linalg.norm(feats, axis=1, keepdims=True)
    assert np.allclose(miner.similarity, feats @ feats.T, atol=1e-5)
    row = miner.similarity[0]
    assert len(set(np.round(row, 6))) == len(NAMES)  # no ties: the order below is the similarity's alone
    assert miner.negatives("dog") == [NAMES[j] for j in np.argsort(-row) if j != 0][:3]
    with pytest.raises(ValueError, match="cannot be loaded"):
        NegativeMiner(NAMES, clip_model=str(tmp_path / "missing"))
