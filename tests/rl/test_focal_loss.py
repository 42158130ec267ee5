"""docs/spec.md §3 loss against an independent per-token loop (acceptance 1)."""

import math

import pytest
import torch
import torch.nn.functional as F

from proactive_rl.sft.loss import focal_state_loss, state_token_counts, summarize_stats

SIL, RESP = 5, 7


def reference_loss(logits, labels, gamma, balance, state_ids=(SIL, RESP), power=1.0, content=1.0):
    """A slow loop written from the docs/spec.md §3 formulas, one token at a time, in float64."""
    logits = logits.double().reshape(-1, logits.size(-1))
    labels = labels.reshape(-1).tolist()
    supervised = [i for i, y in enumerate(labels) if y != -100]
    n = {y: sum(1 for i in supervised if labels[i] == y) for y in state_ids}
    n_s = sum(n.values())
    k = sum(1 for y in state_ids if n[y] > 0)
    total = 0.0
    for i in supervised:
        y = labels[i]
        log_z = math.log(sum(math.exp(v) for v in logits[i].tolist()))
        ce = log_z - logits[i, y].item()
        w = content
        if y in state_ids:
            p = math.exp(-ce)
            w = (1 - p) ** gamma
            if balance:
                w *= (n_s / (k * n[y])) ** power
        total += w * ce
    return total / len(supervised)


def random_batch(seed, absent=None, shape=(3, 11), vocab=12):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(*shape, vocab, generator=g) * 2
    labels = torch.randint(0, vocab, shape, generator=g)
    choice = torch.rand(shape, generator=g)
    labels[choice < 0.4] = SIL
    labels[(choice >= 0.4) & (choice < 0.5)] = RESP
    labels[choice > 0.85] = -100
    if absent is not None:
        labels[labels == absent] = 0
    return logits, labels


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("absent", [None, SIL, RESP])
@pytest.mark.parametrize("gamma,balance", [(2.0, True), (0.0, True), (2.0, False), (0.5, True)])
def test_matches_reference_loop(seed, absent, gamma, balance):
    logits, labels = random_batch(seed, absent)
    out = focal_state_loss(logits, labels, [SIL, RESP], gamma=gamma, balance=balance)
    assert out.loss.item() == pytest.approx(reference_loss(logits, labels, gamma, balance), rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("power", [0.0, 0.5, 0.25])
def test_balance_power_matches_reference_loop(seed, power):
    logits, labels = random_batch(seed)
    out = focal_state_loss(logits, labels, [SIL, RESP], gamma=2.0, balance_power=power)
    expected = reference_loss(logits, labels, 2.0, True, power=power)
    assert out.loss.item() == pytest.approx(expected, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("gamma,balance", [(2.0, True), (0.0, False)])
def test_content_weight_matches_reference_loop(seed, gamma, balance):
    logits, labels = random_batch(seed)
    out = focal_state_loss(logits, labels, [SIL, RESP], gamma=gamma, balance=balance, content_weight=4.0)
    expected = reference_loss(logits, labels, gamma, balance, content=4.0)
    assert out.loss.item() == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert expected != pytest.approx(reference_loss(logits, labels, gamma, balance), rel=1e-3)


def test_balance_power_on_the_worked_example_of_the_spec():
    # docs/spec.md §3: 6 silences p = 0.9, 2 responses p = 0.5, 12 content tokens p = 0.8; with β = 0.5 the balance
    # factors are sqrt(8/12) and sqrt(2): L = [6·0.01·0.8165·0.10536 + 2·0.25·1.4142·0.69315 + 12·0.22314] / 20
    probs = [0.9] * 6 + [0.5] * 2 + [0.8] * 12
    labels = torch.tensor([1] * 6 + [2] * 2 + [3] * 12)
    logits = torch.full((20, 4), -1e4)
    for i, (p, y) in enumerate(zip(probs, labels.tolist())):  # two live tokens: the label with probability p
        logits[i, y], logits[i, 0] = math.log(p), math.log(1 - p)
    plain = focal_state_loss(logits, labels, [1, 2], gamma=2.0)
    smoothed = focal_state_loss(logits, labels, [1, 2], gamma=2.0, balance_power=0.5)
    assert plain.loss.item() == pytest.approx(0.16875, abs=5e-5)
    assert smoothed.loss.item() == pytest.approx(0.15865, abs=5e-5)
    # content weight 4: the 12 content tokens count four times, L = (0.69736 + 4·2.67772) / 20 = 0.57041
    weighted = focal_state_loss(logits, labels, [1, 2], gamma=2.0, content_weight=4.0)
    assert weighted.loss.item() == pytest.approx(0.57041, abs=5e-5)


def test_hand_computed_case():
    # two positions, uniform logits over 4 tokens: p = 1/4, CE = ln 4 at both.
    # one silence (id 1) and one response (id 2): N_s = 2, K = 2, n = 1 each -> balance 1; focal (3/4)^2.
    logits = torch.zeros(2, 4)
    labels = torch.tensor([1, 2])
    out = focal_state_loss(logits, labels, [1, 2], gamma=2.0)
    assert out.loss.item() == pytest.approx((0.75**2) * math.log(4), rel=1e-6)
    # three silences and one response: silence weight 4/(2·3), response 4/(2·1); plus one text token (weight 1)
    logits = torch.zeros(5, 4)
    labels = torch.tensor([1, 1, 1, 2, 3])
    out = focal_state_loss(logits, labels, [1, 2], gamma=0.0)
    expected = (3 * (4 / 6) + 1 * 2 + 1) * math.log(4) / 5
    assert out.loss.item() == pytest.approx(expected, rel=1e-6)


def test_gamma0_unbalanced_is_token_mean_ce_bit_for_bit():
    for seed in range(5):
        logits, labels = random_batch(seed, shape=(4, 17), vocab=33)
        out = focal_state_loss(logits, labels, [SIL, RESP], gamma=0.0, balance=False)
        ref = F.cross_entropy(logits.reshape(-1, 33), labels.reshape(-1), ignore_index=-100)
        assert torch.equal(out.loss, ref)


def test_global_counts_split_into_micro_batches():
    """Summing per-micro-batch losses with the global counts gives the full-batch loss (docs/spec.md §3 invariance)."""
    logits, labels = random_batch(3, shape=(4, 9))
    full = focal_state_loss(logits, labels, [SIL, RESP], gamma=2.0).loss
    counts = state_token_counts([labels[i] for i in range(4)], [SIL, RESP])
    parts = sum(focal_state_loss(logits[i], labels[i], [SIL, RESP], gamma=2.0, counts=counts).loss for i in range(4))
    assert parts.item() == pytest.approx(full.item(), rel=1e-6)


def test_gradient_flows_through_focal_factor():
    # d/dz of (1-p)^γ·CE differs from the gradient with the factor detached; check against autograd on a formula
    z = torch.tensor([[0.3, -0.2, 1.0]], requires_grad=True)
    out = focal_state_loss(z, torch.tensor([0]), [0, 1], gamma=2.0, balance=False)
    out.loss.backward()
    z2 = z.detach().clone().requires_grad_(True)
    p = torch.softmax(z2, -1)[0, 0]
    ((1 - p) ** 2 * -torch.log(p)).backward()
    assert torch.allclose(z.grad, z2.grad, atol=1e-6)


def test_metrics_from_stats():
    # greedy token = argmax; positions: silence predicted silence, silence predicted response, response predicted response
    logits = torch.full((4, 4), -5.0)
    logits[0, 1] = logits[1, 2] = logits[2, 2] = logits[3, 3] = 5.0
    labels = torch.tensor([1, 1, 2, 0])  # last: text token predicted wrong
    out = focal_state_loss(logits, labels, [1, 2])
    m = summarize_stats(out.stats, ["silence", "response"])
    assert m["silence_accuracy"] == 0.5
    assert m["response_recall"] == 1.0
    assert m["response_precision"] == 0.5
    assert m["state_accuracy"] == pytest.approx(2 / 3)
    assert m["token_accuracy"] == 0.5
