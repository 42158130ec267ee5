"""Tiny models and checkpoint loading: forward on a multi-turn multi-frame chat, state
tokens as single tokens, save/load with identical logits, state tokens added to a checkpoint without them."""

import numpy as np
import pytest
import torch
from transformers import AutoModelForImageTextToText, AutoProcessor

from proactive_rl.errors import InputError
from proactive_rl.models import STATE_TOKENS, add_state_tokens, build_tiny, check_attn_implementation, load_model

ARCHS = ["qwen2_5_vl", "qwen3_vl"]


def _frames(n, size=64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (size, size, 3), dtype=np.uint8) for _ in range(n)]


def _chat(n_frames):
    """A multi-turn chat written by hand (not through proactive_rl.chat): one user turn per frame."""
    messages = [{"role": "system", "content": [{"type": "text", "text": "Watch and warn me."}]}]
    for k in range(n_frames):
        messages.append({"role": "user", "content": [{"type": "text", "text": f"<t={k}.0s>"}, {"type": "image"}]})
        answer = "</Response> Warning" if k == n_frames - 1 else "</Silence>"
        messages.append({"role": "assistant", "content": [{"type": "text", "text": answer}]})
    return messages


def _inputs(processor, n_frames=4, seed=0):
    text = processor.apply_chat_template(_chat(n_frames), tokenize=False)
    return processor(text=[text], images=_frames(n_frames, seed=seed), return_tensors="pt")


@pytest.fixture(scope="module", params=ARCHS)
def tiny(request):
    return build_tiny(request.param)


def test_forward_multi_frame_multi_turn(tiny):
    model, processor = tiny
    inputs = _inputs(processor, n_frames=4)
    # 64 px frames -> 4x4 patches -> 2x2 merged = 4 vision tokens per frame (xs).
    assert inputs["image_grid_thw"].tolist() == [[1, 4, 4]] * 4
    assert int((inputs["input_ids"] == processor.image_token_id).sum()) == 16
    with torch.no_grad():
        out = model(**inputs)
    assert out.logits.shape == (1, inputs["input_ids"].shape[1], model.config.text_config.vocab_size)
    assert torch.isfinite(out.logits).all()


def test_state_tokens_are_single_plain_tokens(tiny):
    _, processor = tiny
    tok = processor.tokenizer
    for token in STATE_TOKENS:
        ids = tok(token, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and tok.convert_ids_to_tokens(ids) == [token]
        assert token not in tok.all_special_tokens  # so skip_special_tokens=True decoding keeps them
    text = "<t=5.0s></Response> Warning</Silence><|im_end|>"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    assert tok.decode(ids, skip_special_tokens=True) == "<t=5.0s></Response> Warning</Silence>"
    assert processor.batch_decode([ids], skip_special_tokens=True) == ["<t=5.0s></Response> Warning</Silence>"]
    # Inside running text too, and the chat template keeps them intact.
    ids = tok("x</Response> 3</Silence>", add_special_tokens=False)["input_ids"]
    assert tok.convert_tokens_to_ids("</Response>") in ids and tok.convert_tokens_to_ids("</Silence>") in ids
    text = processor.apply_chat_template(_chat(2), tokenize=False)
    assert text.count("</Silence>") == 1 and text.count("</Response> Warning") == 1


def test_image_tokens_per_frame_by_size():
    _, processor = build_tiny("qwen2_5_vl", size="s")
    inputs = _inputs(processor, n_frames=2)
    assert inputs["image_grid_thw"].tolist() == [[1, 8, 8]] * 2  # 16 vision tokens per frame
    # Any frame size lands on the same fixed grid (min = max pixels).
    out = processor.image_processor(images=_frames(1, size=112), return_tensors="pt")
    assert out["image_grid_thw"].tolist() == [[1, 8, 8]]


@pytest.mark.parametrize("arch", ARCHS)
def test_save_load_identical_logits(arch, tmp_path):
    model, processor = build_tiny(arch, seed=3)
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    inputs = _inputs(processor, n_frames=3, seed=1)
    with torch.no_grad():
        reference = model(**inputs).logits
    for loaded_model, loaded_processor in [
        (AutoModelForImageTextToText.from_pretrained(tmp_path), AutoProcessor.from_pretrained(tmp_path)),
        load_model(tmp_path),
    ]:
        assert type(loaded_processor) is type(processor) and type(loaded_model) is type(model)
        again = _inputs(loaded_processor, n_frames=3, seed=1)
        assert all(torch.equal(inputs[k], again[k]) for k in inputs)
        with torch.no_grad():
            assert torch.equal(loaded_model(**again).logits, reference)


def test_deterministic_from_seed():
    a, pa = build_tiny("qwen3_vl", seed=5)
    state = torch.get_rng_state()
    b, pb = build_tiny("qwen3_vl", seed=5)
    assert torch.equal(torch.get_rng_state(), state), "build_tiny must not consume the caller's RNG"
    c, _ = build_tiny("qwen3_vl", seed=6)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    assert pa.tokenizer.get_vocab() == pb.tokenizer.get_vocab()


@pytest.mark.parametrize("arch", ARCHS)
def test_one_training_step_runs(arch):
    model, processor = build_tiny(arch)
    model.train()
    inputs = _inputs(processor, n_frames=8)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        loss = model(**inputs, labels=inputs["input_ids"]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_unknown_arch_and_size():
    with pytest.raises(ValueError, match="qwen2_5_vl, qwen3_vl"):
        build_tiny("llava")
    with pytest.raises(ValueError, match="xs, s"):
        build_tiny("qwen3_vl", size="xl")


@pytest.mark.parametrize("arch", ARCHS)
def test_load_model_adds_state_tokens_and_they_persist(arch, tmp_path):
    model, processor = build_tiny(arch, state_tokens=False)
    tok = processor.tokenizer
    assert len(tok("</Silence>", add_special_tokens=False)["input_ids"]) > 1
    old_len, rows = len(tok), model.get_input_embeddings().weight.shape[0]
    sample = "Tell me each time a red circle appears.<|im_end|>"
    before = tok(sample, add_special_tokens=False)["input_ids"]
    model.save_pretrained(tmp_path / "base")
    processor.save_pretrained(tmp_path / "base")

    loaded, loaded_processor = load_model(tmp_path / "base")
    tok = loaded_processor.tokenizer
    ids = [tok.convert_tokens_to_ids(t) for t in STATE_TOKENS]
    assert ids == [old_len, old_len + 1]
    assert [tok(t, add_special_tokens=False)["input_ids"] for t in STATE_TOKENS] == [[i] for i in ids]
    assert tok(sample, add_special_tokens=False)["input_ids"] == before  # existing ids untouched
    assert sorted(tok.get_vocab().values()) == list(range(old_len + 2))
    # The checkpoint had spare rows: no resize; each new row starts at the mean row of its word's pieces, so the
    # two rows differ (a LoRA run that trains them does not start from tied logits).
    weight = loaded.get_input_embeddings().weight
    assert weight.shape[0] == rows
    for token, row in zip(STATE_TOKENS, ids):
        pieces = tok(token.strip("</>"), add_special_tokens=False)["input_ids"]
        expected = torch.stack([weight[i] for i in pieces]).mean(0)  # slow loop over the pieces
        assert torch.allclose(weight[row], expected, atol=1e-6)
    assert not torch.allclose(weight[ids[0]], weight[ids[1]])

    loaded.save_pretrained(tmp_path / "sft")
    loaded_processor.save_pretrained(tmp_path / "sft")
    again, again_processor = load_model(tmp_path / "sft", state_tokens=False)
    assert [again_processor.tokenizer.convert_tokens_to_ids(t) for t in STATE_TOKENS] == ids
    assert not any(t in again_processor.tokenizer.all_special_tokens for t in STATE_TOKENS)
    assert torch.equal(again.get_input_embeddings().weight, weight)
    assert add_state_tokens(again, again_processor) == dict(zip(STATE_TOKENS, ids))  # idempotent
    assert len(again_processor.tokenizer) == old_len + 2


@pytest.mark.parametrize("arch", ARCHS)
def test_checkpoint_with_special_state_tokens_is_reregistered(arch, tmp_path):
    """An older checkpoint saved the state tokens as special: loading makes them plain, same ids, text kept."""
    from tokenizers import AddedToken

    model, processor = build_tiny(arch)
    tok = processor.tokenizer
    ids = [tok.convert_tokens_to_ids(t) for t in STATE_TOKENS]
    tok._tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in STATE_TOKENS])
    tok.extra_special_tokens = [*tok.extra_special_tokens, *STATE_TOKENS]
    model.save_pretrained(tmp_path / "old")
    processor.save_pretrained(tmp_path / "old")
    from transformers import AutoProcessor

    raw = AutoProcessor.from_pretrained(tmp_path / "old").tokenizer  # as saved: the tokens vanish from decoded text
    text = "</Response> Warning"
    assert raw.decode(raw(text, add_special_tokens=False)["input_ids"], skip_special_tokens=True).strip() == "Warning"
    for state_tokens in (False, True):
        _, loaded = load_model(tmp_path / "old", state_tokens=state_tokens)
        tok = loaded.tokenizer
        assert [tok.convert_tokens_to_ids(t) for t in STATE_TOKENS] == ids
        enc = tok(text, add_special_tokens=False)["input_ids"]
        assert ids[1] in enc and tok.decode(enc, skip_special_tokens=True).startswith("</Response>")


def test_add_state_tokens_resizes_when_no_spare_rows():
    model, processor = build_tiny("qwen2_5_vl", state_tokens=False)
    n = len(processor.tokenizer)
    model.resize_token_embeddings(n)
    ids = add_state_tokens(model, processor)
    assert ids == {"</Silence>": n, "</Response>": n + 1}
    assert model.get_input_embeddings().weight.shape[0] >= n + 2
    assert model.config.text_config.vocab_size == model.get_input_embeddings().weight.shape[0]
    inputs = _inputs(processor, n_frames=2)
    with torch.no_grad():
        assert torch.isfinite(model(**inputs).logits).all()


def test_load_model_dtype_and_attention(tmp_path):
    model, processor = build_tiny("qwen3_vl")
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    loaded, _ = load_model(tmp_path, torch_dtype="bfloat16", attn_implementation="eager")
    assert loaded.dtype == torch.bfloat16 and loaded.config._attn_implementation == "eager"
    loaded, _ = load_model(tmp_path)
    assert loaded.config._attn_implementation == "sdpa"
    with pytest.raises(ValueError, match="expected one of"):
        load_model(tmp_path, dtype="float8")
    with pytest.raises(ValueError, match="expected one of sdpa"):
        load_model(tmp_path, attn_implementation="fast")
    with pytest.raises(FileNotFoundError, match="no model directory"):
        load_model(tmp_path / "missing")


def test_flash_attention_missing_is_a_clear_error():
    from transformers.utils import is_flash_attn_2_available

    if is_flash_attn_2_available():
        pytest.skip("flash-attn is installed here")
    with pytest.raises(InputError, match="flash-attn"):
        check_attn_implementation("flash_attention_2")


def _variation(x: torch.Tensor) -> float:
    """Mean distance of the rows of `x` from their mean row, relative to the mean row's norm."""
    return ((x - x.mean(0)).norm(dim=-1).mean() / x.mean(0).norm()).item()


@pytest.mark.parametrize("arch", ARCHS)
def test_the_tiny_processors_centre_pixels_on_the_worlds_background(arch):
    """With CLIP's statistics a frame of the synthetic world is a near-constant input (its patches differ from their
    mean by 4 % of its norm) and a model trained from scratch learns no vision; centred on the background they
    differ by more than the mean itself (models/families/qwen2_5_vl/tiny.py, benchmarks/RESULTS.md)."""
    from proactive_rl.synthetic import generate_episodes, render_frames
    from proactive_rl.synthetic.world import BACKGROUND

    _, processor = build_tiny(arch)
    assert processor.image_processor.image_mean == pytest.approx([c / 255 for c in BACKGROUND])
    assert processor.video_processor.image_mean == processor.image_processor.image_mean
    episodes = generate_episodes("atomic", 3, seed=1, duration=[30, 40], fps=0.5, scale=2.0, distractors=0)
    frames = [f for e in episodes for _, f in render_frames(e)]
    centred = processor.image_processor(images=frames, return_tensors="pt")["pixel_values"]
    processor.image_processor.image_mean, processor.image_processor.image_std = [0.48, 0.46, 0.41], [0.27] * 3
    clip = processor.image_processor(images=frames, return_tensors="pt")["pixel_values"]
    assert _variation(clip) < 0.1 < 1.0 < _variation(centred)
