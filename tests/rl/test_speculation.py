"""Speculative silence and batched vision in the streaming engine (docs/spec.md §9).

The reference is the frame-by-frame engine (append a frame, decode its turn token by token), itself tested against
full forward passes in test_streaming_engine.py, and, for logits, the model's own full forward pass. Sampling is
checked against the model's distribution by chi-square tests over >= 10,000 draws (fixed seeds, so deterministic).
The model is a random tiny model with a proactive head (`proactive_stand_in`): silent at most frames, responding
at some, so drafts are both kept and rejected.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from proactive_eval.streaming import run_episode
from proactive_rl.models import build_tiny
from proactive_rl.models.families import mm_token_types
from proactive_rl.streaming import HFStreamingPolicy, SamplingParams, StreamingSession, choose_tokens
from proactive_rl.streaming.speculation import Lookahead, silent_draft
from proactive_rl.synthetic import generate_episodes, render_frames
from tests.support.stand_in import proactive_stand_in

ARCHS = ("qwen2_5_vl", "qwen3_vl")
TOL = 1e-5
SYSTEM = "<|im_start|>system\nYou are a proactive assistant.<|im_end|>\n"


def sharpened(model, std: float = 0.1, seed: int = 0):
    """Larger random weights, so that the argmax depends on the input (see test_streaming_engine.py)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * std)
    return model


@pytest.fixture(scope="module", params=ARCHS)
def tiny(request):
    model, processor = build_tiny(request.param, "xs", seed=0)
    return proactive_stand_in(sharpened(model), processor, respond=0.3), processor


def user_chunk(turn: int) -> str:
    head = SYSTEM if turn == 0 else "\n"
    body = f"<|im_start|>user\n<t={turn}.0s><|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
    return head + body + "<|im_start|>assistant\n"


def frames(n: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8) for _ in range(n)]


def full_logits(model, processor, ids: list[int], images: list[np.ndarray]) -> torch.Tensor:
    """One forward pass over the whole sequence; the model derives positions and encodes every image itself."""
    t = torch.tensor([ids])
    enc = processor.image_processor(images=images, return_tensors="pt")
    types = mm_token_types(t, model.config.image_token_id, model.config.video_token_id)
    with torch.no_grad():
        return model(input_ids=t, mm_token_type_ids=types, **enc).logits[0].float()


def decide(session: StreamingSession, chunks, params, draft, k: int) -> list:
    """Every chunk's turn, K chunks per speculative call (the dropped ones are appended again)."""
    turns = []
    while len(turns) < len(chunks):
        turns += session.step(chunks[len(turns) : len(turns) + k], params, draft)
    return turns


def test_silent_draft_is_the_chat_rendering_of_a_silent_turn(tiny):
    _, processor = tiny
    tokenizer = processor.tokenizer
    draft = silent_draft(processor)
    assert tokenizer.convert_ids_to_tokens(draft) == ["</Silence>", "<|im_end|>"]
    rendered = tokenizer("<|im_start|>assistant\n</Silence><|im_end|>\n", add_special_tokens=False)["input_ids"]
    header = tokenizer("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    assert rendered[len(header) : len(header) + len(draft)] == draft


def test_greedy_speculation_equals_frame_by_frame_over_50_episodes(tiny):
    """Acceptance: greedy outputs with speculation (K = 1 and K = 16) are token-identical to the frame-by-frame
    engine over 50 synthetic episodes, many of which respond; every episode's session holds the same tokens."""
    model, processor = tiny
    episodes = generate_episodes("accident", 25, 7, duration=[10, 10]) + generate_episodes(
        "atomic", 25, 7, duration=[10, 10]
    )
    video = {e.id: render_frames(e) for e in episodes}
    sampling = SamplingParams(max_new_tokens=4)
    runs = {}
    for name, kwargs in {"frame": dict(speculate=False, lookahead=1), "K=1": {"lookahead": 1}, "K=16": {}}.items():
        policy = HFStreamingPolicy(model, processor, sampling, **kwargs)
        runs[name] = []
        for e in episodes:
            responses = run_episode(policy, e, frame_source=lambda e: video[e.id])
            s = policy.session
            runs[name].append((responses, s.token_ids(), s.n_forward_calls, s.n_vision_calls, s.n_drafts_kept))
    reference = [(r, ids) for r, ids, *_ in runs["frame"]]
    for name in ("K=1", "K=16"):
        assert [(r, ids) for r, ids, *_ in runs[name]] == reference, name
    responding = sum(bool(r) for r, _ in reference)
    assert 5 <= responding <= 50 and sum(len(r) for r, _ in reference) >= 20  # the drafts are rejected often
    calls = {name: sum(run[2] for run in runs[name]) for name in runs}
    assert calls["K=16"] < calls["K=1"] < calls["frame"]
    vision = {name: sum(run[3] for run in runs[name]) for name in runs}
    assert vision["frame"] == vision["K=1"] == 500 > vision["K=16"]  # one call per frame vs per block
    assert sum(run[4] for run in runs["K=16"]) > 200  # most frames kept their draft


@pytest.mark.parametrize("k", [1, 4])
def test_forked_rows_check_drafts_independently(tiny, k):
    """A group whose rows have different histories (sampled turns) continues with speculation. Greedy: each row
    equals the same group decoded frame by frame. Sampled: rows keep and reject drafts independently, and every
    row's logits equal a full forward over its own dialogue (the rollback leaves holes where rows kept different
    numbers of draft tokens)."""
    model, processor = tiny
    draft = silent_draft(processor)
    images = frames(10, seed=k)
    session = StreamingSession(model, processor, record_logits=True)
    session.append(user_chunk(0), images[:1])
    group = session.fork(4)
    sampled = SamplingParams(max_new_tokens=3, do_sample=True, temperature=2.0, seed=0)
    group.generate(sampled)
    for turn in (1, 2):
        group.append(user_chunk(turn), images[turn : turn + 1])
        group.generate(sampled)
    assert len({tuple(group.token_ids(b)) for b in range(4)}) > 1
    chunks = [group.chunk(user_chunk(t), images[t : t + 1]) for t in range(3, 10)]

    greedy, reference = group.fork(1), group.fork(1)
    params = SamplingParams(max_new_tokens=3)
    got = decide(greedy, chunks, params, draft, k)
    want = reference.step(chunks, params)
    assert [t.token_ids for t in got] == [t.token_ids for t in want]
    assert all(greedy.token_ids(b) == reference.token_ids(b) for b in range(4))

    turns = decide(group, chunks, SamplingParams(max_new_tokens=3, do_sample=True, temperature=1.5, seed=1), draft, k)
    kept = [sum(t == draft for t in turn.token_ids) for turn in turns]
    assert any(0 < n < 4 for n in kept)  # some frames: some rows kept the draft, others did not
    for b in range(4):
        fed = group.token_ids(b)[: group.n_fed[b]]
        assert (group.logits(b) - full_logits(model, processor, fed, images)).abs().max().item() <= TOL, b
    # each frame encoded once: re-fed chunks keep their features, and sessions appending the same chunks share them
    assert greedy.n_images_encoded == 10 and group.n_images_encoded == reference.n_images_encoded == 3


@pytest.mark.parametrize("draft_kind", ["silent", "long", "response_first"])
def test_rejections_anywhere_in_a_draft_with_max_frames(tiny, draft_kind):
    """Drafts rejected at their first or second token, or kept, with `max_frames` evicting between frames (a block
    is cut where an eviction would fall): the turns and logits equal frame-by-frame decoding's."""
    model, processor = tiny
    images = frames(8, seed=11)
    silence, end = silent_draft(processor)
    response = processor.tokenizer.convert_tokens_to_ids("</Response>")
    draft = {"silent": [silence, end], "long": [silence, response, end], "response_first": [response, end]}
    draft = draft[draft_kind]
    params = SamplingParams(max_new_tokens=3)
    spec = StreamingSession(model, processor, max_frames=3, record_logits=True)
    plain = StreamingSession(model, processor, max_frames=3, record_logits=True)
    chunks = [spec.chunk(user_chunk(t), images[t : t + 1]) for t in range(8)]
    got = decide(spec, chunks, params, draft, 4)
    want = plain.step(chunks, params)
    assert [t.token_ids for t in got] == [t.token_ids for t in want]
    assert [t.truncated for t in got] == [t.truncated for t in want]
    assert spec.token_ids() == plain.token_ids() and spec.n_rebuilds == plain.n_rebuilds == 5
    turns = [t.token_ids[0] for t in got]
    if draft_kind == "silent":
        assert spec.n_drafts_kept >= 4
    else:  # the model's silent turns reject these drafts: at the second token, or at the first
        assert spec.n_drafts_kept == 0 and [silence, end] in turns
    reference = full_logits(model, processor, spec.token_ids()[: spec.n_fed[0]], images[-3:])
    assert (spec.logits() - reference[-len(spec.logits()) :]).abs().max().item() <= TOL


def test_sampled_turn_start_has_the_models_distribution(tiny):
    """Chi-square over 12,000 draws: with speculation, the first token of a turn and the second token after a
    kept ``</Silence>`` follow the model's softmax(logits / T), as does frame-by-frame sampling. T is the one of a
    few where the model keeps ``</Silence>`` closest to half the time (both branches are drawn often)."""
    model, processor = tiny
    image = frames(1, seed=5)
    draft = silent_draft(processor)
    session = StreamingSession(model, processor)
    chunk = session.chunk(user_chunk(0), image)
    logits = full_logits(model, processor, list(chunk.input_ids) + draft[:1], image)[-2:]
    suppressed = [model.config.image_token_id, model.config.video_token_id, model.config.vision_start_token_id]
    suppressed += [model.config.vision_end_token_id, *range(len(processor.tokenizer), logits.shape[-1])]
    logits[:, suppressed] = float("-inf")
    temperature = min([0.75, 1.0, 1.5, 2.0, 3.0], key=lambda t: abs(torch.softmax(logits[0] / t, -1)[draft[0]] - 0.5))
    p_first, p_second = torch.softmax(logits / temperature, dim=-1).double()
    assert 0.2 < p_first[draft[0]] < 0.8

    n = 12_000
    params = SamplingParams(max_new_tokens=2, do_sample=True, temperature=temperature, seed=0)
    session.speculate([chunk], draft)
    (spec,) = session.fork(n).resolve(params)
    plain = StreamingSession(model, processor)
    plain.append_chunk(chunk)
    frame = plain.fork(n).generate(params)
    for turns in (spec, frame):
        first = [t[0] for t in turns.token_ids]
        assert chi_square_p(first, p_first) > 1e-3
        second = [t[1] for t in turns.token_ids if t[0] == draft[0]]
        assert chi_square_p(second, p_second) > 1e-3


def chi_square_p(samples: list[int], probs: torch.Tensor) -> float:
    """Pearson's chi-square p-value of `samples` against `probs`; categories expected < 5 times are pooled."""
    n = len(samples)
    counts = torch.bincount(torch.tensor(samples), minlength=len(probs)).double()
    expected = probs * n
    big = expected >= 5
    observed = torch.cat([counts[big], counts[~big].sum().view(1)])
    expected = torch.cat([expected[big], expected[~big].sum().view(1)])
    if expected[-1] < 5:  # too little mass left to test on its own: join the smallest tested category
        observed, expected = observed[:-1], expected[:-1]
        observed[expected.argmin()] += counts[~big].sum()
        expected[expected.argmin()] += (probs * n)[~big].sum()
    stat = ((observed - expected) ** 2 / expected).sum()
    df = len(expected) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2.0, dtype=torch.double), stat / 2))


def test_choose_tokens_with_a_draft_keeps_the_distribution():
    """Hand-made p = (0.5, 0.3, 0.15, 0.05) with the draft on each token in turn, and with top-k = 2 (p renormalised
    to (0.625, 0.375)): 40,000 draws follow p; greedy keeps a draft only when it is the argmax."""
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(40_000, 1)
    gen = torch.Generator().manual_seed(0)
    for kwargs, p in [({}, [0.5, 0.3, 0.15, 0.05]), ({"top_k": 2}, [0.625, 0.375, 0.0, 0.0])]:
        params = SamplingParams(do_sample=True, **kwargs)
        for d in range(4):
            draft = torch.full((len(logits),), d)
            tokens, logprobs = choose_tokens(logits, params, None, gen, draft=draft)
            assert chi_square_p(tokens.tolist(), torch.tensor(p, dtype=torch.double)) > 1e-3, (kwargs, d)
            assert torch.allclose(logprobs, torch.log(torch.tensor([0.5, 0.3, 0.15, 0.05]))[tokens])
    greedy = SamplingParams()
    for d in range(4):
        tokens, _ = choose_tokens(logits[:1], greedy, None, draft=torch.tensor([d]))
        assert tokens.item() == 0


def test_lookahead_doubles_after_kept_blocks_and_falls_back_after_a_rejection():
    size = Lookahead(16)
    assert size.size == 16
    size.update(16, all_held=False)
    assert size.size == 1
    for want in (2, 4, 8, 16, 16):
        size.update(size.size, all_held=True)
        assert size.size == want
    with pytest.raises(ValueError, match="lookahead"):
        Lookahead(0)


def test_speculation_errors(tiny):
    model, processor = tiny
    session = StreamingSession(model, processor)
    chunk = session.chunk(user_chunk(0), frames(1, seed=0))
    with pytest.raises(RuntimeError, match="speculate"):
        session.resolve()
    session.speculate([chunk], [processor.tokenizer.convert_tokens_to_ids("</Silence>")])
    with pytest.raises(RuntimeError, match="resolve"):
        session.append_chunk(chunk)
    with pytest.raises(ValueError, match="stop token"):
        session.resolve()  # a draft that is not a whole turn


def test_stand_in_changes_only_the_head_rows_of_said_tokens():
    """`proactive_stand_in` unties the head and changes only the rows of tokens the example assistant turns say;
    fit to a dialogue, greedy decoding is silent at most of its frames."""
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    embedding = model.get_input_embeddings().weight.detach().clone()
    before = {n: p.detach().clone() for n, p in model.named_parameters() if "embed_tokens" not in n}
    proactive_stand_in(model, processor)
    head = model.get_output_embeddings().weight
    assert head is not model.get_input_embeddings().weight and not model.config.tie_word_embeddings
    assert torch.equal(model.get_input_embeddings().weight, embedding)
    changed = (head.detach() != embedding).any(-1).nonzero().squeeze(-1).tolist()
    said = processor.tokenizer.convert_tokens_to_ids(["</Silence>", "</Response>", "<|im_end|>"])
    assert set(said) <= set(changed) and len(changed) < 10
    for name, p in model.named_parameters():
        if name in before:
            assert torch.equal(p, before[name]), name
    episode = generate_episodes("accident", 1, 3, duration=[12, 12])[0]
    policy = HFStreamingPolicy(model, processor, SamplingParams(max_new_tokens=4))
    run_episode(policy, episode, frame_source=lambda e: render_frames(e))
    assert policy.session.n_drafts_kept >= 9  # of 12 frames
