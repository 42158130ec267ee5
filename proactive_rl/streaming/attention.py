"""Attention of a chunk appended to a KV cache, computed without a mask on CPU (docs/spec.md §9).

A chunk of q tokens appended after p cached ones attends to all p cached keys and causally to itself. transformers
builds a (q, p + q) boolean mask for that, every call, and SDPA then runs its masked kernel over every block: at
T = 256 frames on the tiny model, the mask costs more than the attention it masks. Without holes in the cache the
structure is known, so `cached_causal_attention` computes the two parts with the CPU flash kernel and no mask --
the past (every query, every cached key; a key/value head's query heads stacked along the sequence, so grouped
heads are not copied) and the chunk (causal) -- and merges them by their log-sum-exps, which is exactly softmax
attention over the union. Registered in transformers' `AttentionInterface` as ``"proactive_cached_causal"``;
`StreamingSession` switches a model's text config to it around its own calls when the cache has no holes and the
model runs SDPA on a CPU. Anything else (a mask, one query, no past, another device) goes to transformers' SDPA.
"""

from __future__ import annotations

import contextlib

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

NAME = "proactive_cached_causal"
PRIVATE_TOUCHES = {
    "_scaled_dot_product_flash_attention_for_cpu": "torch 2.14.1: the CPU flash kernel op, returns (out, lse)",
    "_attn_implementation": "transformers 5.25.0: PretrainedConfig._attn_implementation, read and set per call",
}
_FLASH = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)


def cached_causal_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers' attention signature: query ``(B, H, q, D)``, key/value ``(B, KV, p + q, D)`` with the chunk's
    own keys last; returns ``(B, q, H, D)`` and no weights."""
    q_len, past = query.shape[2], key.shape[2] - query.shape[2]
    plain = attention_mask is not None or q_len == 1 or past <= 0 or dropout or kwargs.get("position_bias") is not None
    if plain or _FLASH is None or query.device.type != "cpu":
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout, scaling, **kwargs)
    B, H, _, D = query.shape
    groups = H // key.shape[1]
    scale = scaling if scaling is not None else D**-0.5
    stacked = query.reshape(B, key.shape[1], groups * q_len, D)
    out_past, lse_past = _FLASH(stacked, key[:, :, :past], value[:, :, :past], scale=scale)[:2]
    out_past, lse_past = out_past.reshape(B, H, q_len, D), lse_past.reshape(B, H, q_len)
    own_k = key[:, :, past:].repeat_interleave(groups, dim=1)
    own_v = value[:, :, past:].repeat_interleave(groups, dim=1)
    out_own, lse_own = _FLASH(query, own_k, own_v, is_causal=True, scale=scale)[:2]
    top = torch.maximum(lse_past, lse_own)
    w_past, w_own = (lse_past - top).exp()[..., None], (lse_own - top).exp()[..., None]
    out = (out_past.float() * w_past + out_own.float() * w_own) / (w_past + w_own)
    return out.to(query.dtype).transpose(1, 2).contiguous(), None


AttentionInterface.register(NAME, cached_causal_attention)


@contextlib.contextmanager
def maskless_chunks(config, enabled: bool):
    """Run `config`'s attention through `cached_causal_attention` inside the block when `enabled` and the config
    uses SDPA (transformers then builds no mask: the implementation has no mask function)."""
    if not enabled or config._attn_implementation != "sdpa":
        yield
        return
    config._attn_implementation = NAME
    try:
        yield
    finally:
        config._attn_implementation = "sdpa"
