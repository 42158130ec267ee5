"""Batched streaming (docs/spec.md §9): episodes in lockstep give what they give one at a time.

References are the one-at-a-time engine (`StreamingSession`, `HFStreamingPolicy`, `rollout_window` without a
batcher), whose own tests check it against the model's full forward pass; the batched runs here share nothing with
them but the per-episode code. Greedy outputs must be the same tokens; sampled rollouts with the same seeds the same
draws (so the same per-episode distribution); logits agree to docs/spec.md §9's 1e-5 (packed and unpacked matmuls
differ only in summation order).
"""

from __future__ import annotations

import numpy as np
import pytest

from proactive_rl.models import build_tiny
from proactive_rl.streaming import SamplingParams, StreamingSession, silent_draft
from proactive_rl.streaming.batch import Batcher
from tests.support.stand_in import ground_truth_dialogues, proactive_stand_in

ARCHS = ("qwen2_5_vl", "qwen3_vl")
TOL = 1e-5


@pytest.fixture(scope="module", params=ARCHS)
def proactive(request):
    """A tiny model that is silent at most frames and responds at some (drafts kept and rejected)."""
    model, processor = build_tiny(request.param, "xs", seed=0)
    examples = ground_truth_dialogues(processor, episodes=3)
    return proactive_stand_in(model, processor, respond=0.3, dialogues=examples, steps=150), processor


def held_out_episodes(per_size: int = 3):
    """Held-out episodes of the demo's generator (its test-split seed, generated in memory as `export_dataset`
    does), per PRS task, at the demo's frame size and at a smaller one: mixed lengths and mixed frame sizes. The
    10-14 s world at 1 FPS (the knobs' defaults) keeps the test's frame count, and so its time, bounded; the demo's
    own world is longer."""
    from proactive_rl.demo.settings import DemoSettings
    from proactive_rl.synthetic import generate_episodes
    from proactive_rl.synthetic.export import split_seed

    settings = DemoSettings()
    seed = split_seed(settings.seed, "test")
    episodes = []
    for size in (64, 48):
        for task in settings.tasks:
            for e in generate_episodes(task, per_size, seed, duration=(10, 14), size=size):
                e.id = f"{e.id}_px{size}"
                episodes.append(e)
    return episodes


@pytest.mark.parametrize("max_frames", [None, 3])
def test_batched_evaluation_equals_one_at_a_time(proactive, max_frames, monkeypatch):
    """Acceptance: the PRS evaluator gives the same predictions and metrics with batch_size 5 as with 1, on the
    demo's held-out episodes of mixed lengths and frame sizes (with `max_frames` re-prefills too)."""
    from proactive_rl.evaluation import EvaluatorConfig, PRSEvaluator

    model, processor = proactive
    episodes = held_out_episodes()
    assert len({e.duration for e in episodes}) > 1 and len({e.meta["scene"]["size"] for e in episodes}) == 2
    batchers = []
    monkeypatch.setattr(Batcher, "map", _spy(Batcher.map, batchers))
    runs = {}
    for batch_size in (1, 5):
        raw = {"type": "prs", "episodes": [{"source": "synthetic", "task": "atomic", "num_episodes": 1}]}
        config = {**raw, "batch_size": batch_size, "max_frames": max_frames, "max_new_tokens": 4}
        config = EvaluatorConfig.from_dict(config, "test")
        evaluator = PRSEvaluator(config, items=episodes)
        records = evaluator.generate(model, processor, episodes)
        assert all(len(r["step_seconds"]) >= len(r["responses"]) for r in records)  # a time per frame step
        untimed = [{k: v for k, v in r.items() if k != "step_seconds"} for r in records]
        runs[batch_size] = untimed, evaluator.score(records, None, plots=False).metrics
    assert runs[5] == runs[1]
    said = [r for record in runs[1][0] for r in record["responses"]]
    assert said and len(said) < sum(e.duration for e in episodes)  # responds at some frames, not all
    (batcher,) = batchers
    assert max(batcher.stats.rows_per_call) == 5 and batcher.stats.vision_calls < len(episodes)


def _spy(method, seen: list):
    def wrapped(self, *args, **kwargs):
        seen.append(self)
        return method(self, *args, **kwargs)

    return wrapped


def dialogue(processor, rng, n_turns: int, side: int):
    """Chunk texts and frames of a dialogue of `n_turns` frame turns of `side` px frames."""
    system = "<|im_start|>system\nYou are a proactive assistant.<|im_end|>\n"
    texts, frames = [], []
    for turn in range(n_turns):
        head = system if turn == 0 else "\n"
        body = f"<|im_start|>user\n<t={turn}.0s><|vision_start|><|image_pad|><|vision_end|><|im_end|>\n"
        texts.append(head + body + "<|im_start|>assistant\n")
        frames.append([rng.integers(0, 255, size=(side, side, 3), dtype=np.uint8)])
    return texts, frames


def play(session, processor, texts, frames, fork: int, params):
    """The first chunk fed and forked into `fork` rows, then every chunk speculated and resolved: the session and
    every turn's tokens."""
    draft = silent_draft(processor)
    chunks = session.chunks(texts, frames)
    turns = []
    session.speculate(chunks[:1], draft)
    session = session.fork(fork)
    while True:
        turns += session.resolve(params)
        if len(turns) == len(chunks):
            return session, [t.token_ids for t in turns], [t.logprobs for t in turns]
        session.speculate(chunks[len(turns) : len(turns) + 4], draft)


def test_batched_sessions_equal_single_sessions(proactive):
    """Sessions of different lengths, frame sizes and row counts (a forked group has holes) in one batch: every
    row's logits equal the one-at-a-time session's to 1e-5, and the sampled tokens (same seeds) are the same."""
    model, processor = proactive
    rng = np.random.default_rng(0)
    cases = [dialogue(processor, rng, n, side) for n, side in ((6, 64), (3, 48), (9, 80), (5, 64))]
    forks = (1, 3, 1, 2)
    params = [SamplingParams(max_new_tokens=3, do_sample=True, temperature=1.5, seed=k) for k in range(len(cases))]

    def alone(k):
        session = StreamingSession(model, processor, record_logits=True)
        return play(session, processor, *cases[k], forks[k], params[k])

    batcher = Batcher(model, processor)

    def batched(k):
        return play(batcher.session(record_logits=True), processor, *cases[k], forks[k], params[k])

    want = [alone(k) for k in range(len(cases))]
    got = batcher.map(range(len(cases)), batched, batch_size=len(cases))
    kept = rejected = 0
    for (ref, ref_tokens, ref_lp), (out, tokens, lp) in zip(want, got):
        assert tokens == ref_tokens
        assert np.allclose(np.array(sum(sum(lp, []), [])), np.array(sum(sum(ref_lp, []), [])), atol=TOL)
        for b in range(ref.batch_size):
            assert out.token_ids(b) == ref.token_ids(b)
            assert (out.logits(b) - ref.logits(b)).abs().max().item() <= TOL
        kept += out.n_drafts_kept
        rejected += out.n_drafts - out.n_drafts_kept
    assert kept and rejected  # both paths ran
    assert max(batcher.stats.rows_per_call) > len(cases)  # a forked group's rows with other sessions' in one call


def test_continuous_batching_refills_slots_and_stops_on_an_error(proactive):
    """An item that ends frees its slot for the next (results in item order); an item's error stops the batch."""
    model, processor = proactive
    batcher = Batcher(model, processor)
    rng = np.random.default_rng(1)
    cases = [dialogue(processor, rng, n, 64) for n in (2, 7, 1, 3, 4)]

    def greedy(k):
        session = batcher.session()
        for text, frames in zip(*cases[k]):
            session.append(text, frames)
            session.generate(SamplingParams(max_new_tokens=2))
        return k, session.token_ids()

    got = batcher.map(range(len(cases)), greedy, batch_size=2)
    assert [k for k, _ in got] == list(range(len(cases)))
    assert max(batcher.stats.rows_per_call) == 2 and min(batcher.stats.rows_per_call) == 1

    def failing(k):
        if k == 2:
            raise KeyError("episode 2")
        return greedy(k)

    with pytest.raises(KeyError, match="episode 2"):
        batcher.map(range(len(cases)), failing, batch_size=2)
    with pytest.raises(ValueError, match="batch_size"):
        batcher.map([1], greedy, batch_size=0)


def test_evaluator_batch_size_is_validated():
    from proactive_rl.evaluation import EvaluatorConfig

    raw = {"type": "prs", "episodes": [{"source": "synthetic", "task": "atomic", "num_episodes": 1}]}
    assert EvaluatorConfig.from_dict(raw, "e").batch_size == 8
    with pytest.raises(ValueError, match=r"e\.batch_size: must be an integer >= 1"):
        EvaluatorConfig.from_dict({**raw, "batch_size": 0}, "e")


# --------------------------------------------------------------------------- streaming GRPO rollouts


@pytest.fixture(scope="module")
def windows():
    from proactive_rl.grpo.streaming.windows import build_windows
    from proactive_rl.synthetic import generate_episodes

    episodes = generate_episodes("accident", 2, seed=3, duration=(10, 14))
    episodes += generate_episodes("atomic", 2, seed=3, duration=(10, 12))
    return build_windows(episodes, lead_s=2, tail_s=1, max_window_s=5, prefix_s=2)


@pytest.mark.parametrize("do_sample", [False, True])
def test_batched_rollouts_equal_one_group_after_another(proactive, windows, do_sample):
    """The G rollouts of several windows played in lockstep are the rollouts each window gives alone: greedy, the
    same tokens; sampled with the same seeds, the same draws; log-probabilities to 1e-5."""
    from proactive_rl.grpo.streaming.rollout import rollout_window

    model, processor = proactive
    params = [SamplingParams(max_new_tokens=3, do_sample=do_sample, temperature=1.5, seed=k) for k in range(4)]
    batcher = Batcher(model, processor)

    def roll(k, batcher=None):
        return rollout_window(model, processor, windows[k], 3, params[k], batcher=batcher)

    want = [roll(k) for k in range(len(params))]
    got = batcher.map(range(len(params)), lambda k: roll(k, batcher), batch_size=len(params))
    for group, ref_group in zip(got, want):
        for traj, ref in zip(group, ref_group):
            assert traj.completion_ids == ref.completion_ids and traj.env_mask == ref.env_mask
            assert traj.texts == ref.texts and traj.prompt_ids == ref.prompt_ids
            assert np.allclose(traj.logprobs, ref.logprobs, atol=TOL)
    texts = [t for group in want for traj in group for t in traj.texts]
    assert any(t == "</Silence>" for t in texts) and any(t != "</Silence>" for t in texts)
    if do_sample:  # the rows of a group differ: sampling, not a copy
        assert any(len({tuple(t.completion_ids) for t in group}) > 1 for group in want)
    assert max(batcher.stats.rows_per_call) > 3


def test_grpo_step_with_batched_rollouts_has_todays_rollouts_and_loss(windows, tmp_path):
    """One streaming GRPO step (sampled rollouts) with rollout_batch_size 4 and with 1: the same rollouts, the
    same loss."""
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer

    logs, rollouts = {}, {}
    for batch_size in (1, 4):
        model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
        model = proactive_stand_in(model, processor, respond=0.3)
        args = StreamingGRPOConfig(
            output_dir=str(tmp_path / str(batch_size)),
            per_device_train_batch_size=8,
            num_generations=2,
            max_steps=1,
            max_turn_tokens=3,
            learning_rate=1e-3,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            logging_steps=1,
            seed=0,
            bf16=False,
            rollout_batch_size=batch_size,
        )
        trainer = StreamingGRPOTrainer(model=model, args=args, windows=windows, processing_class=processor)
        seen = rollouts[batch_size] = []
        original = trainer.rollout_func
        trainer.rollout_func = lambda prompts, t, _f=original, _seen=seen: _seen.append(_f(prompts, t)) or _seen[-1]
        trainer.train()
        logs[batch_size] = trainer.state.log_history[0]
    assert len(rollouts[4]) == len(rollouts[1]) > 0
    for got, want in zip(rollouts[4], rollouts[1]):
        for key in ("prompt_ids", "completion_ids", "env_mask", "times"):
            assert got[key] == want[key], key
        assert np.allclose(sum(got["logprobs"], []), sum(want["logprobs"], []), atol=TOL)
    assert logs[4]["loss"] == pytest.approx(logs[1]["loss"], abs=1e-6)
    assert logs[4]["reward"] == logs[1]["reward"]
