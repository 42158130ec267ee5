"""The streaming GRPO loss covers the policy's own in-window tokens only (docs/spec.md §8).

The loss is TRL's (`GRPOTrainer._compute_loss`, ``loss_type="dapo"``) on a real streaming batch. The per-token
log-probabilities it receives are replaced by a leaf tensor laid over the *whole* sequence (prompt + completion), so
every position -- ground-truth prefix, frame tokens, timestamps, template tokens, policy tokens -- can be perturbed
and differentiated. Reference (hand-derived): with ``old = current`` the DAPO loss is
``-Σ_{b,t} A_b · exp(lp_bt - old_bt) · m_bt / N`` with ``N`` the number of policy tokens in the batch, so
``∂L/∂lp_bt = -A_b · m_bt / N`` -- zero wherever the env mask ``m`` is 0.
"""

from __future__ import annotations

import pytest
import torch

from proactive_rl.grpo.streaming.windows import build_windows


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer
    from proactive_rl.models import build_tiny
    from proactive_rl.synthetic import generate_episodes

    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    episodes = generate_episodes("accident", 1, seed=5, duration=(10, 12))
    episodes += generate_episodes("atomic", 1, seed=5, duration=(10, 12))
    windows = build_windows(episodes, lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)
    args = StreamingGRPOConfig(
        output_dir=str(tmp_path_factory.mktemp("masks")),
        per_device_train_batch_size=4,
        num_generations=2,
        max_turn_tokens=3,
        loss_type="dapo",
        report_to="none",
        use_cpu=True,
        bf16=False,
        seed=0,
    )
    trainer = StreamingGRPOTrainer(model=model, args=args, windows=windows, processing_class=processor)
    trainer.current_gradient_accumulation_steps = 1
    model.train()
    batch = trainer._generate_and_score_completions([w.row() for w in windows for _ in range(2)])
    # fixed, distinct advantages: the test is about where the loss looks, not about the reward
    batch["advantages"] = torch.tensor([1.0, -2.0, 0.5, -1.5])
    return trainer, batch


def loss_with_logps(trainer, batch, perturb: dict | None = None):
    """TRL's loss with the current log-probs on a full-sequence leaf tensor (+ optional perturbations)."""
    real = trainer._get_per_token_logps_and_entropies
    captured = {}

    def fake(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs):
        with torch.no_grad():
            logps, entropies, aux = real(model, input_ids, attention_mask, logits_to_keep, *args, **kwargs)
        full = torch.zeros(input_ids.shape)
        full[:, -logits_to_keep:] = logps
        for (b, t), delta in (perturb or {}).items():
            full[b, t] += delta
        full.requires_grad_(True)
        captured["full"] = full
        return full[:, -logits_to_keep:], entropies, aux

    trainer._get_per_token_logps_and_entropies = fake
    try:
        loss = trainer._compute_loss(trainer.model, batch)
    finally:
        del trainer._get_per_token_logps_and_entropies
    loss.backward()
    return loss.detach(), captured["full"].grad, captured["full"].detach()


def positions(trainer, batch):
    """(row, full-sequence column) of: a prefix assistant token, a frame token, a timestamp token, a policy token."""
    tok = trainer.processing_class.tokenizer
    P = batch["prompt_ids"].size(1)
    b = 0
    prompt, completion = batch["prompt_ids"][b], batch["completion_ids"][b]
    env = batch["tool_mask"][b] * batch["completion_mask"][b]
    silence = tok.convert_tokens_to_ids("</Silence>")
    prefix = int((prompt == silence).nonzero()[0])  # a ground-truth assistant turn of the prefix
    frame = P + int((completion == trainer.model.config.image_token_id).nonzero()[0])
    t_ids = set(tok("<t=", add_special_tokens=False)["input_ids"])
    stamp = P + next(i for i, x in enumerate(completion.tolist()) if x in t_ids and not env[i])
    policy = P + int(env.nonzero()[0])
    return {"prefix": (b, prefix), "frame": (b, frame), "timestamp": (b, stamp), "policy": (b, policy)}


def test_gradient_is_the_hand_derived_one_and_zero_off_the_env_mask(setup):
    trainer, batch = setup
    _, grad, _ = loss_with_logps(trainer, batch)
    P = batch["prompt_ids"].size(1)
    mask = (batch["completion_mask"] * batch["tool_mask"]).float()
    n_policy = mask.sum()
    assert n_policy == batch["num_items_in_batch"]
    expected = -batch["advantages"][:, None] * mask / n_policy
    assert torch.allclose(grad[:, P:], expected, atol=1e-7)
    assert torch.count_nonzero(grad[:, :P]) == 0  # the ground-truth prefix is never optimised
    assert torch.count_nonzero(grad[:, P:][mask == 0]) == 0  # frames, timestamps, template tokens


@pytest.mark.parametrize("where", ["prefix", "frame", "timestamp"])
def test_env_and_prefix_logprobs_cannot_change_the_loss(setup, where):
    trainer, batch = setup
    pos = positions(trainer, batch)[where]
    base, _, _ = loss_with_logps(trainer, batch)
    moved, _, _ = loss_with_logps(trainer, batch, {pos: 0.7})
    assert torch.equal(base, moved)


def test_a_policy_logprob_changes_the_loss(setup):
    trainer, batch = setup
    pos = positions(trainer, batch)["policy"]
    _, _, full = loss_with_logps(trainer, batch)
    # old log-probs fixed at the unperturbed values (otherwise TRL takes old = current and the ratio stays 1)
    batch = {**batch, "old_per_token_logps": full[:, batch["prompt_ids"].size(1) :]}
    base, _, _ = loss_with_logps(trainer, batch)
    moved, _, _ = loss_with_logps(trainer, batch, {pos: 0.1})
    assert not torch.equal(base, moved)
    # the hand-derived effect on one token: -A · (e^0.1 - 1) / N (e^0.1 = 1.105 is inside the clip range 1 ± 0.2)
    A = float(batch["advantages"][pos[0]])
    n_policy = float(batch["num_items_in_batch"])
    expected = -A * (torch.exp(torch.tensor(0.1)).item() - 1) / n_policy
    assert abs(float(moved - base) - expected) < 1e-6


@pytest.mark.parametrize("where", ["frame", "timestamp"])
def test_env_old_logprobs_cannot_change_the_loss(setup, where):
    """The same through the importance ratio's denominator: a perturbed old log-prob off the mask changes nothing
    (the prefix has no old log-prob entry at all: TRL scores completion positions only)."""
    trainer, batch = setup
    pos = positions(trainer, batch)[where]
    P = batch["prompt_ids"].size(1)
    old = batch["sampling_per_token_logps"].clone()
    base, _, _ = loss_with_logps(trainer, {**batch, "old_per_token_logps": old})
    old[pos[0], pos[1] - P] += 0.7
    moved, _, _ = loss_with_logps(trainer, {**batch, "old_per_token_logps": old})
    assert torch.equal(base, moved)
    policy = positions(trainer, batch)["policy"]
    old[policy[0], policy[1] - P] += 0.1
    moved, _, _ = loss_with_logps(trainer, {**batch, "old_per_token_logps": old})
    assert not torch.equal(base, moved)
