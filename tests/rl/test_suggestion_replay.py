"""Streaming replay of the suggestion stage: the distillation term against a slow per-position reference (silence
decisions, response decisions and response words weighing the same)."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tiny():
    from proactive_rl.models import build_tiny

    return build_tiny("qwen2_5_vl", "xs", seed=0)


@pytest.fixture
def replay(tiny, tmp_path):
    from proactive_eval.episodes import save_episodes
    from proactive_rl.data import parse_mixture
    from proactive_rl.grpo.replay import StreamingReplay
    from proactive_rl.synthetic import generate_episodes

    path = tmp_path / "accident.json"
    save_episodes(path, generate_episodes("accident", 3, seed=5, duration=(10, 10)))
    model, processor = tiny
    return StreamingReplay(model, processor, parse_mixture([{"source": str(path)}]), batch_size=2, seed=0)


def test_replay_is_zero_for_the_starting_model_and_positive_after_a_change(tiny, replay):
    model, _ = tiny
    assert replay.loss(model).item() == pytest.approx(0.0, abs=1e-6)
    changed = type(model)(model.config)
    changed.load_state_dict(model.state_dict())
    with torch.no_grad():
        changed.lm_head.weight.add_(0.05 * torch.randn_like(changed.lm_head.weight))
    assert replay.loss(changed).item() > 1e-4
    # the reference is a frozen copy: training the policy leaves it as it was
    assert all(not p.requires_grad for p in replay.reference.parameters())


def test_replay_equals_a_slow_kl_over_the_supervised_positions(tiny, replay):
    model, _ = tiny
    changed = type(model)(model.config)
    changed.load_state_dict(model.state_dict())
    # moving the input embedding of </Response> changes the positions after it (the response words) far more than
    # the decisions, so the groups' means differ and a different grouping gives a different loss (checked below)
    torch.manual_seed(0)
    with torch.no_grad():
        embedding = changed.get_input_embeddings().weight
        embedding[int(replay.state_ids[1])].add_(torch.randn_like(embedding[0]))
    state = replay.rng.getstate()
    batch = replay.batch()
    replay.rng.setstate(state)  # loss() draws the same batch
    fast = replay.loss(changed).item()
    labels = batch.pop("labels")
    with torch.no_grad():
        ref_logits = model(**batch).logits
        cur_logits = changed(**batch).logits
    silence_id, response_id = (int(i) for i in replay.state_ids)
    groups = {silence_id: [], response_id: [], "word": []}
    for b in range(labels.shape[0]):
        for i in range(labels.shape[1] - 1):
            target = int(labels[b, i + 1])
            if target == -100:
                continue
            p = torch.softmax(ref_logits[b, i].double(), -1).tolist()
            q = torch.softmax(cur_logits[b, i].double(), -1).tolist()
            kl = sum(pi * (math.log(pi) - math.log(qi)) for pi, qi in zip(p, q) if pi > 0)
            groups[target if target in groups else "word"].append(kl)
    assert all(groups.values())  # silence decisions, response decisions and response words all present
    expected = sum(sum(g) / len(g) for g in groups.values()) / 3
    assert fast == pytest.approx(expected, rel=1e-3, abs=1e-7)
    decisions = groups[silence_id] + groups[response_id]
    two_groups = (sum(decisions) / len(decisions) + sum(groups["word"]) / len(groups["word"])) / 2
    assert abs(two_groups - expected) > 0.1 * expected  # the test tells three groups from two
