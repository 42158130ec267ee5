"""The KV-cache streaming engine (docs/spec.md §9).

References are independent of the engine: the model's own full forward pass (it computes its own 3-D rope
positions with `get_rope_index` and encodes every image again), and a naive greedy decoder that re-prefills the
whole dialogue at every step. Tolerance: fp32 on CPU, the cached and the full computation differ only in
floating-point summation order (attention over different key lengths, matmuls of different shapes), which moves
logits by ~1e-7; 1e-5 is docs/spec.md §9's bound.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from proactive_rl.models import build_tiny
from proactive_rl.models.families import family_of, mm_token_types
from proactive_rl.streaming import SamplingParams, StreamingSession, choose_tokens

ARCHS = ("qwen2_5_vl", "qwen3_vl")
TOL = 1e-5
SYSTEM = "<|im_start|>system\nYou are a proactive assistant.<|im_end|>\n"


def sharpened(model, std: float = 0.1, seed: int = 0):
    """Redraw the weight matrices with a larger scale. At build_tiny's init (std 0.02) greedy decoding repeats one
    token whatever the frames say; here the argmax depends on the input, so a decoder that fed stale logits or
    wrong positions would diverge from the reference. Logits grow to ~4, cached-vs-full differences to ~4e-6."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return model


@pytest.fixture(scope="module", params=ARCHS)
def tiny(request):
    model, processor = build_tiny(request.param, "xs", seed=0)
    return sharpened(model), processor


def frame(rng) -> np.ndarray:
    return rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)


def user_chunk(turn: int, first: bool) -> str:
    # the assistant's `<|im_end|>` is already in the dialogue; the template's newline opens the next chunk
    head = SYSTEM if first else "\n"
    body = f"<|im_start|>user\n<t={turn}.0s><|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
    return head + body + "<|im_start|>assistant\n"


def pixels(processor, frames: list[np.ndarray]) -> dict:
    if not frames:
        return {}
    enc = processor.image_processor(images=frames, return_tensors="pt")
    return dict(pixel_values=enc["pixel_values"], image_grid_thw=enc["image_grid_thw"])


def full_logits(
    model, processor, ids: list[int], frames: list[np.ndarray], vision: dict | None = None
) -> torch.Tensor:
    """One forward pass over the whole sequence; the model derives positions and encodes every image itself."""
    ids_t = torch.tensor([ids])
    vision = pixels(processor, frames) if vision is None else vision
    types = mm_token_types(ids_t, model.config.image_token_id, model.config.video_token_id)
    with torch.no_grad():
        return model(input_ids=ids_t, mm_token_type_ids=types, **vision).logits[0]


def suppressed(model, processor) -> list[int]:
    """What the engine never emits by default: vision placeholders and the embedding's padding rows."""
    c = model.config
    padding = list(range(len(processor.tokenizer), model.get_output_embeddings().weight.shape[0]))
    return [c.image_token_id, c.video_token_id, c.vision_start_token_id, c.vision_end_token_id] + padding


def naive_greedy(model, processor, ids: list[int], frames, max_new_tokens: int, stop: int) -> list[int]:
    """Greedy decoding by re-running the full forward pass over the dialogue at every step."""
    out, vision = [], pixels(processor, frames)
    while True:
        logits = full_logits(model, processor, ids + out, frames, vision)[-1].clone()
        logits[suppressed(model, processor)] = float("-inf")
        token = stop if len(out) == max_new_tokens else int(logits.argmax())
        out.append(token)
        if token == stop:
            return out


def chunk_ids(processor, text: str, frames) -> list[int]:
    return processor(text=[text], images=frames or None, return_tensors="pt")["input_ids"][0].tolist()


def test_chunk_positions_continue_the_models_rope_index(tiny):
    """Chunk-wise positions (offset by the running max + 1) equal `get_rope_index` over the whole sequence."""
    model, processor = tiny
    rng = np.random.default_rng(1)
    family = family_of(model)
    chunks = [(user_chunk(0, True), [frame(rng)]), ("</Silence><|im_end|>", []), (user_chunk(1, False), [frame(rng)])]
    chunks.append(("\n<|im_start|>user\ntwo<|vision_start|><|image_pad|><|vision_end|>frames", [frame(rng)]))
    chunks[-1][1].append(frame(rng))
    chunks[-1] = (chunks[-1][0] + "<|vision_start|><|image_pad|><|vision_end|>", chunks[-1][1])
    all_ids, all_frames, parts, start = [], [], [], 0
    for text, frames in chunks:
        enc = processor(text=[text], images=frames or None, return_tensors="pt")
        pos = family.positions(enc["input_ids"][0], enc.get("image_grid_thw"), start)
        start = int(pos.max()) + 1
        parts.append(pos)
        all_ids += enc["input_ids"][0].tolist()
        all_frames += frames
    ids = torch.tensor([all_ids])
    grids = processor.image_processor(images=all_frames, return_tensors="pt")["image_grid_thw"]
    types = mm_token_types(ids, model.config.image_token_id, model.config.video_token_id)
    expected, _ = family.core.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=grids)
    assert torch.equal(torch.cat(parts, dim=1), expected[:, 0])
    # the positions really are 3-D: the image tokens' h/w rows differ from the temporal row
    assert not torch.equal(expected[0], expected[1])


def test_20_turns_equal_full_forward_and_naive_greedy(tiny):
    """Acceptance 1: 20 turns with a new image each. Greedy streaming output equals greedy re-prefill decoding at
    every turn, and at the end every position's logits match one full forward pass over the final sequence."""
    model, processor = tiny
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    rng = np.random.default_rng(2)
    session = StreamingSession(model, processor, record_logits=True)
    ids, frames, turns = [], [], []
    for turn in range(20):
        text = user_chunk(turn, turn == 0)
        frames.append(frame(rng))
        ids += chunk_ids(processor, text, [frames[-1]])
        session.append(text, [frames[-1]])
        got = session.generate(SamplingParams(max_new_tokens=2)).token_ids[0]
        want = naive_greedy(model, processor, ids, frames, 2, stop)
        assert got == want, f"turn {turn}"
        ids += want
        turns.append(tuple(got))
    # turns differ, and tokens within a turn differ: a decoder reusing stale logits or positions could not pass
    assert len(set(turns)) > 1 and any(t[0] != t[1] for t in turns)
    assert session.token_ids() == ids
    assert session.n_images_encoded == 20  # each frame's vision features computed once
    reference = full_logits(model, processor, ids[:-1], frames)  # the closing stop token is not fed yet
    assert session.logits().shape == reference.shape
    assert (session.logits() - reference).abs().max().item() <= TOL


def test_eviction_matches_full_forward_over_kept_frames(tiny):
    """Acceptance 1: with max_frames=K the session equals a full forward over the latest K frames (all text
    kept), and greedy decoding equals naive re-prefill over that dialogue."""
    model, processor = tiny
    k, turns = 3, 8
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    rng = np.random.default_rng(3)
    session = StreamingSession(model, processor, max_frames=k, record_logits=True)
    history, frames = [], []  # per turn: (chunk ids, generated ids)
    vs, ve = model.config.vision_start_token_id, model.config.vision_end_token_id
    for turn in range(turns):
        text = user_chunk(turn, turn == 0)
        frames.append(frame(rng))
        session.append(text, [frames[-1]])
        history.append([chunk_ids(processor, text, [frames[-1]]), []])
        # reference dialogue: drop the vision block (start..end) of every frame but the latest k
        ids = []
        for t, (c, g) in enumerate(history):
            if t < len(history) - k:
                a, z = c.index(vs), c.index(ve)
                c = c[:a] + c[z + 1 :]
            ids += c + g
        kept = frames[-k:]
        got = session.generate(SamplingParams(max_new_tokens=2)).token_ids[0]
        assert got == naive_greedy(model, processor, ids, kept, 2, stop), f"turn {turn}"
        history[-1][1] = got
        ids += got
        assert session.token_ids() == ids
        assert session.num_images == min(turn + 1, k)
        fed = ids[:-1]  # the closing stop token is fed with the next chunk
        since_rebuild = session.logits()
        reference = full_logits(model, processor, fed, kept)[-len(since_rebuild) :]
        assert (since_rebuild - reference).abs().max().item() <= TOL, f"turn {turn}"
    assert session.n_rebuilds == turns - k
    assert session.n_images_encoded == turns  # re-prefills reuse the kept frames' features


def test_deferred_capped_stop_equals_full_forward_and_naive_greedy(tiny):
    """`defer_capped_stop`: a capped turn's last content token and its stop are fed with the next chunk. Greedy
    output still equals re-prefill decoding, `token_ids()` holds the deferred tokens, every fed position's logits
    equal a full forward, and each capped turn costs one model call less."""
    model, processor = tiny
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    rng = np.random.default_rng(12)
    session = StreamingSession(model, processor, record_logits=True)
    ids, frames, capped = [], [], 0
    for turn in range(6):
        text = user_chunk(turn, turn == 0)
        frames.append(frame(rng))
        ids += chunk_ids(processor, text, [frames[-1]])
        session.append(text, [frames[-1]])
        calls = session.n_forward_calls
        out = session.generate(SamplingParams(max_new_tokens=2, defer_capped_stop=True))
        want = naive_greedy(model, processor, ids, frames, 2, stop)
        assert out.token_ids[0] == want, f"turn {turn}"
        ids += want
        assert session.token_ids() == ids  # the deferred tokens are part of the dialogue already
        if out.truncated[0]:
            capped += 1
            assert np.isnan(out.logprobs[0][-1]) and len(want) == 3
            assert session.n_forward_calls - calls == 1  # 2 content tokens: only the first is fed on its own
    assert capped >= 3
    # the last turn's content token and stop are still pending: the cache ends two tokens earlier
    reference = full_logits(model, processor, ids[:-2], frames)
    assert session.logits().shape == reference.shape
    assert (session.logits() - reference).abs().max().item() <= TOL


def test_deferred_capped_stop_in_a_forked_group_with_eviction(tiny):
    """Deferred tokens of different rows (after sampled turns of different lengths) survive a re-prefill."""
    model, processor = tiny
    rng = np.random.default_rng(13)
    session = StreamingSession(model, processor, max_frames=2, record_logits=True)
    frames = [frame(rng)]
    session.append(user_chunk(0, True), frames)
    group = session.fork(3)
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    params = SamplingParams(max_new_tokens=2, do_sample=True, temperature=1.5, seed=3, defer_capped_stop=True)
    for turn in range(1, 5):
        out = group.generate(params)
        assert all(t[-1] == stop for t in out.token_ids)
        frames.append(frame(rng))
        group.append(user_chunk(turn, False), [frames[-1]])
    assert group.n_rebuilds == 3
    for row in range(3):
        reference = full_logits(model, processor, group.token_ids(row), frames[-2:])
        assert (group.logits(row) - reference).abs().max().item() <= TOL, f"row {row}"


def test_forked_group_decodes_as_a_batch(tiny):
    """fork(G) after a shared prefix: sampled rows of different lengths (holes in the cache) each still equal a
    full forward over their own dialogue, and the shared frames are encoded once."""
    model, processor = tiny
    rng = np.random.default_rng(4)
    session = StreamingSession(model, processor, record_logits=True)
    frames = [frame(rng)]
    session.append(user_chunk(0, True), frames)
    group = session.fork(3)
    assert group.batch_size == 3 and session.batch_size == 1
    # many stop tokens so that rows end their turns at different lengths
    stops = [processor.tokenizer.convert_tokens_to_ids("<|im_end|>")] + list(range(20, 400, 3))
    params = SamplingParams(max_new_tokens=6, do_sample=True, temperature=1.5, stop_token_ids=stops, seed=0)
    lengths = set()
    for turn in range(1, 6):
        outs = group.generate(params)
        lengths |= {len(t) for t in outs.token_ids}
        frames.append(frame(rng))
        group.append(user_chunk(turn, False), [frames[-1]])
    assert len(lengths) > 1
    assert group.n_images_encoded == len(frames)
    for row in range(3):
        reference = full_logits(model, processor, group.token_ids(row), frames)
        assert (group.logits(row) - reference).abs().max().item() <= TOL, f"row {row}"
    assert len({tuple(group.token_ids(r)) for r in range(3)}) > 1


def test_forked_group_with_eviction(tiny):
    """Re-prefilling a group whose rows have different lengths (holes between history and chunk) keeps every row
    equal to a full forward over its own kept dialogue."""
    model, processor = tiny
    rng = np.random.default_rng(9)
    session = StreamingSession(model, processor, max_frames=2, record_logits=True)
    frames = [frame(rng)]
    session.append(user_chunk(0, True), frames)
    group = session.fork(3)
    stops = [processor.tokenizer.convert_tokens_to_ids("<|im_end|>")] + list(range(20, 400, 3))
    params = SamplingParams(max_new_tokens=5, do_sample=True, temperature=1.5, stop_token_ids=stops, seed=1)
    for turn in range(1, 5):
        group.generate(params)
        frames.append(frame(rng))
        group.append(user_chunk(turn, False), [frames[-1]])
    assert group.n_rebuilds == 3 and group.num_images == 2
    assert len({len(group.token_ids(r)) for r in range(3)}) > 1
    for row in range(3):
        ids = group.token_ids(row)
        assert ids.count(model.config.vision_start_token_id) == 2
        reference = full_logits(model, processor, ids, frames[-2:])
        assert (group.logits(row) - reference).abs().max().item() <= TOL, f"row {row}"


def test_greedy_group_rows_equal_the_single_session(tiny):
    model, processor = tiny
    rng = np.random.default_rng(5)
    frames = [frame(rng) for _ in range(4)]
    single, group = StreamingSession(model, processor), None
    for turn, f in enumerate(frames):
        single.append(user_chunk(turn, turn == 0), [f])
        if group is None:
            group = single.fork(2)
        else:
            group.append(user_chunk(turn, False), [f])
        a = single.generate(SamplingParams(max_new_tokens=3)).token_ids[0]
        b = group.generate(SamplingParams(max_new_tokens=3)).token_ids
        assert b == [a, a]


def test_recorded_logprobs_and_forced_stop(tiny):
    """Log-probs of the chosen tokens equal log_softmax(logits / T) of a full forward; the cap forces the stop."""
    model, processor = tiny
    rng = np.random.default_rng(6)
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    session = StreamingSession(model, processor)
    session.append(user_chunk(0, True), [f := frame(rng)])
    prompt = session.token_ids()
    out = session.generate(SamplingParams(max_new_tokens=4, do_sample=True, temperature=0.7, seed=1))
    tokens = out.token_ids[0]
    if out.truncated[0]:
        assert len(tokens) == 5 and tokens[-1] == stop
    reference = torch.log_softmax(full_logits(model, processor, prompt + tokens, [f]) / 0.7, dim=-1)
    want = [reference[len(prompt) - 1 + i, t].item() for i, t in enumerate(tokens)]
    assert np.allclose(out.logprobs[0], want, atol=1e-5)
    assert out.texts[0] == processor.tokenizer.decode(tokens[:-1], skip_special_tokens=False)


def test_lora_wrapped_model(tiny):
    peft = pytest.importorskip("peft")
    model, processor = tiny
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj"], init_lora_weights=False)
    lora = peft.get_peft_model(sharpened(build_tiny(model.config.model_type, "xs", seed=0)[0]), config)
    lora.train()  # the session switches to eval for its forwards and restores the mode
    rng = np.random.default_rng(7)
    session = StreamingSession(lora, processor, record_logits=True)
    frames = []
    for turn in range(4):
        frames.append(frame(rng))
        session.append(user_chunk(turn, turn == 0), [frames[-1]])
        session.generate(SamplingParams(max_new_tokens=2))
    assert lora.training
    lora.eval()
    fed = session.token_ids()[: session.n_fed[0]]
    reference = full_logits(lora, processor, fed, frames)
    assert (session.logits() - reference).abs().max().item() <= TOL
    base = full_logits(model, processor, fed, frames)
    assert (base - reference).abs().max().item() > 1e-3  # the adapters are active


def test_choose_tokens_filters():
    """Hand-made distribution p = (0.5, 0.3, 0.15, 0.05): top-k / top-p keep the expected supports."""
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(400, 1)
    gen = torch.Generator().manual_seed(0)

    def support(**kw):
        tokens, _ = choose_tokens(logits, SamplingParams(do_sample=True, **kw), None, gen)
        return set(tokens.tolist())

    assert support(top_k=1) == {0}
    assert support(top_k=2) == {0, 1}
    assert support(top_p=0.5) == {0}  # 0.5 reached by the first token
    assert support(top_p=0.8) == {0, 1}
    assert support(top_p=0.81) == {0, 1, 2}
    assert support() == {0, 1, 2, 3}
    greedy, logprob = choose_tokens(logits[:1], SamplingParams(), torch.tensor([0]))
    assert greedy.item() == 1 and logprob.item() == pytest.approx(np.log(0.3), abs=1e-6)


def test_bad_input_errors(tiny):
    model, processor = tiny
    session = StreamingSession(model, processor, max_frames=1)
    with pytest.raises(RuntimeError, match="append"):
        session.generate()
    with pytest.raises(ValueError, match="placeholders"):
        session.append(user_chunk(0, True), [])
    two = "<|vision_start|><|image_pad|><|vision_end|>" * 2
    rng = np.random.default_rng(8)
    with pytest.raises(ValueError, match="max_frames=1"):
        session.append(two, [frame(rng), frame(rng)])
    with pytest.raises(ValueError, match="max_new_tokens"):
        SamplingParams(max_new_tokens=0)
