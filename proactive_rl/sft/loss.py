"""Focal + frequency-balanced cross-entropy on the state tokens (docs/spec.md §3, P³I Appendix C).

Silence outnumbers responses by orders of magnitude, so plain cross-entropy teaches a streaming model never to
speak. The two state tokens (``</Silence>``, ``</Response>``) are reweighted by a focal factor ``(1 - p)^γ`` and a
frequency-balancing factor ``(N_s / (K · n_y))^β`` (β = 1 in P³I); every other supervised token has weight ``c``
(1 in P³I), and every token is divided by the same global count ``|V|``:

    w_i = (1 - p_i)^γ · (N_s / (K · n_{y_i}))^β   if i ∈ S
    w_i = c                                         otherwise
    L   = Σ_{i∈V} w_i · CE_i / |V|

The counts ``n_y``, ``N_s``, ``K`` and ``|V|`` belong to the *global* batch of an optimizer step (all ranks, all
accumulation steps); :func:`state_token_counts` computes them for a list of micro-batches and the trainer
all-reduces them, so this function receives them ready. Without them it uses the batch it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from proactive_rl.chat.messages import IGNORE_INDEX


@dataclass
class FocalLossOutput:
    """The loss and what the trainer logs about it (sums, so they add across micro-batches and ranks).

    Args:
        loss (`torch.Tensor`): ``Σ_{i∈V} w_i CE_i / |V|`` for this micro-batch (its share of the global loss).
        stats (`torch.Tensor`): float vector of local sums, laid out by :data:`STAT_NAMES` for ``C`` classes.
    """

    loss: torch.Tensor
    stats: torch.Tensor


def state_token_counts(labels: list[torch.Tensor] | torch.Tensor, state_token_ids: list[int]) -> torch.Tensor:
    """Counts over (micro-)batches of already shifted labels: ``[|V|, n_{y_1}, ..., n_{y_C}]`` as int64.

    Args:
        labels (`torch.Tensor` or `list[torch.Tensor]`): next-token labels (``-100`` = not supervised).
        state_token_ids (`list[int]`): the state-token ids, in class order.
    """
    if isinstance(labels, torch.Tensor):
        labels = [labels]
    counts = torch.zeros(1 + len(state_token_ids), dtype=torch.long)
    for lab in labels:
        lab = lab.detach().cpu()
        counts[0] += int((lab != IGNORE_INDEX).sum())
        for c, tok in enumerate(state_token_ids):
            counts[1 + c] += int((lab == tok).sum())
    return counts


def focal_state_loss(
    logits: torch.Tensor,
    labels: torch.Tensor,
    state_token_ids: list[int],
    *,
    gamma: float = 2.0,
    balance: bool = True,
    balance_power: float = 1.0,
    content_weight: float = 1.0,
    counts: torch.Tensor | None = None,
) -> FocalLossOutput:
    """docs/spec.md §3 loss for one micro-batch, normalised by the global supervised-token count.

    Args:
        logits (`torch.Tensor` of shape `(..., vocab)`): next-token logits, aligned with `labels`.
        labels (`torch.Tensor` of shape `(...)`): next-token labels, ``-100`` where not supervised.
        state_token_ids (`list[int]`): ids of the state tokens (docs/spec.md §2: ``</Silence>``, ``</Response>``).
        gamma (`float`, *optional*, defaults to `2.0`): focal exponent ``γ``; the gradient flows through
            ``(1 - p)^γ`` as in focal loss.
        balance (`bool`, *optional*, defaults to `True`): multiply state tokens by ``(N_s / (K · n_y))^β``.
        balance_power (`float`, *optional*, defaults to `1.0`): the exponent ``β`` of that factor (1: P³I's
            balancing; below 1 a smoothed one, which leaves more of the loss to the content tokens).
        content_weight (`float`, *optional*, defaults to `1.0`): the weight ``c`` of every other supervised token (the
            answers' words and the end-of-turn tokens).
        counts (`torch.Tensor`, *optional*): ``[|V|, n_{y_1}, ...]`` of the global batch (from
            :func:`state_token_counts`, summed over ranks). Defaults to the counts of this micro-batch.

    Returns:
        [`FocalLossOutput`]. With ``γ = 0`` and ``balance=False`` the loss is
        ``cross_entropy(reduction="sum") / |V|``: plain token-mean cross-entropy, bit for bit.
    """
    vocab = logits.size(-1)
    logits = logits.reshape(-1, vocab).float()
    labels = labels.reshape(-1).to(logits.device)
    if counts is None:
        counts = state_token_counts(labels, state_token_ids)
    counts = counts.to(logits.device)
    num_items = counts[0].clamp(min=1).to(logits.dtype)

    ce = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="none")
    supervised = labels != IGNORE_INDEX
    ids = torch.tensor(state_token_ids, device=labels.device)
    # class index of each position: 0..C-1 for a state token, -1 otherwise
    is_class = labels.unsqueeze(-1) == ids  # (N, C)
    in_s = is_class.any(-1)
    cls = torch.where(in_s, is_class.float().argmax(-1), torch.full_like(labels, -1))

    p = torch.exp(-ce)
    focal = (1.0 - p).clamp(min=0.0) ** gamma if gamma != 0 else torch.ones_like(p)
    if gamma == 0 and not balance and content_weight == 1.0:
        # the plain path: exactly what transformers' ForCausalLMLoss computes for a token mean
        loss = F.cross_entropy(logits, labels, ignore_index=IGNORE_INDEX, reduction="sum") / num_items
        weights = torch.ones_like(ce)
    else:
        class_counts = counts[1:].to(logits.dtype)
        n_s = class_counts.sum()
        k = (class_counts > 0).sum().to(logits.dtype)
        if balance:
            # a class absent from the global batch never indexes its (zero) count
            per_class = torch.where(class_counts > 0, n_s / (k * class_counts.clamp(min=1)), torch.zeros_like(n_s))
            per_class = per_class**balance_power  # pow(x, 1) = x exactly: β = 1 is P³I bit for bit
            bal = per_class[cls.clamp(min=0)]
        else:
            bal = torch.ones_like(ce)
        weights = torch.where(in_s, focal * bal, torch.full_like(ce, content_weight))
        loss = (weights * ce).masked_fill(~supervised, 0.0).sum() / num_items

    with torch.no_grad():
        pred = logits.argmax(-1)
        stats = [
            supervised.sum(),
            (pred == labels).logical_and(supervised).sum(),
            focal[in_s].sum(),
            weights[in_s].sum(),
        ]
        for c, tok in enumerate(state_token_ids):
            at_c = cls == c
            stats += [at_c.sum(), (at_c & (pred == tok)).sum(), (in_s & (pred == tok)).sum()]
        stats = torch.stack([torch.as_tensor(s, dtype=torch.float64, device=logits.device) for s in stats])
    return FocalLossOutput(loss=loss, stats=stats)


def stat_names(class_names: list[str]) -> list[str]:
    """Names of the entries of `FocalLossOutput.stats` for classes named `class_names`."""
    names = ["supervised", "correct", "focal_sum", "weight_sum"]
    for c in class_names:
        names += [f"{c}_n", f"{c}_hit", f"{c}_pred"]
    return names


def summarize_stats(stats: torch.Tensor, class_names: list[str]) -> dict[str, float]:
    """Per-step metrics from summed stats: token accuracy, per-class state accuracy, response recall/precision.

    ``<class>_recall`` = fraction of that class's state positions where the greedy token is that class;
    ``<class>_precision`` = of the state positions where the greedy token is that class, the fraction that are it.
    ``focal_weight`` is the mean ``(1 - p)^γ`` over state positions, ``state_weight`` the mean full weight ``w_i``.
    """
    s = dict(zip(stat_names(class_names), stats.tolist()))
    n_state = sum(s[f"{c}_n"] for c in class_names)
    out = {
        "token_accuracy": s["correct"] / max(s["supervised"], 1),
        "focal_weight": s["focal_sum"] / max(n_state, 1),
        "state_weight": s["weight_sum"] / max(n_state, 1),
        "state_accuracy": sum(s[f"{c}_hit"] for c in class_names) / max(n_state, 1),
    }
    for c in class_names:
        out[f"{c}_accuracy"] = out[f"{c}_recall"] = s[f"{c}_hit"] / max(s[f"{c}_n"], 1)
        out[f"{c}_precision"] = s[f"{c}_hit"] / max(s[f"{c}_pred"], 1)
    return out
