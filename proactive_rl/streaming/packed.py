"""Packed attention: the tokens of many KV-cache rows in one language-model call, each row attending only to its own
past (docs/spec.md §9).

A batched step concatenates every row's new tokens into one sequence ``(1, S_1 + ... + S_B)``. Everything in a
Qwen-VL decoder but attention is per token (embeddings, norms, MLP, and the rope angles, which come from each
token's explicit 3-D position), so only attention needs the rows apart: `packed_attention`, registered in
transformers' `AttentionInterface` as ``"proactive_packed"``, appends each row's keys and values to its own
`RowKV` and runs that row's attention exactly as a one-row session does (`attention.cached_causal_attention` on a
CPU: the past without a mask, the chunk causally; elsewhere SDPA with the bottom-right causal mask). No padding,
no holes: a row's cache holds its own tokens only, so memory is the sum of the rows' lengths.

The model is called without a transformers cache (``use_cache=False``); `packed_rows` names the rows and their
token spans for the call.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from .attention import cached_causal_attention

NAME = "proactive_packed"
PRIVATE_TOUCHES = {
    "_attn_implementation": "transformers 5.25.0: PretrainedConfig._attn_implementation, read and set per call",
}


class RowKV:
    """One row's keys and values, per decoder layer, in buffers that double when full (amortised O(1) appends).

    `length` is the number of tokens kept; lowering it drops the tail (a rolled-back draft).
    """

    def __init__(self):
        self.length = 0
        self._layers: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}

    def write(self, layer: int, key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Put ``(1, KV, n, D)`` new keys / values after the kept ones; the row's keys / values through them."""
        end = self.length + key.shape[-2]
        buffers = self._layers.get(layer)
        if buffers is None or buffers[0].shape[-2] < end:
            capacity = max(64, 2 * end)
            kb = key.new_empty(*key.shape[:-2], capacity, key.shape[-1])
            vb = value.new_empty(*value.shape[:-2], capacity, value.shape[-1])
            if buffers is not None and self.length:
                kb[..., : self.length, :] = buffers[0][..., : self.length, :]
                vb[..., : self.length, :] = buffers[1][..., : self.length, :]
            buffers = self._layers[layer] = (kb, vb)
        buffers[0][..., self.length : end, :] = key
        buffers[1][..., self.length : end, :] = value
        return buffers[0][..., :end, :], buffers[1][..., :end, :]

    def clone(self) -> RowKV:
        """An independent copy of the kept tokens."""
        new = RowKV()
        new.length = self.length
        for layer, (k, v) in self._layers.items():
            new._layers[layer] = (k[..., : self.length, :].clone(), v[..., : self.length, :].clone())
        return new

    def nbytes(self) -> int:
        """Bytes allocated (buffers included)."""
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self._layers.values())

    def used_bytes(self) -> int:
        """Bytes of the kept tokens' keys and values."""
        return sum(
            (k.numel() // k.shape[-2] * k.element_size() + v.numel() // v.shape[-2] * v.element_size()) * self.length
            for k, v in self._layers.values()
        )


@dataclass
class Span:
    """A row's new tokens in the packed sequence: ``[start, start + length)``."""

    row: RowKV
    start: int
    length: int


_ACTIVE: list[list[Span]] = []


@contextlib.contextmanager
def packed_rows(config, spans: list[Span]):
    """Run `config`'s attention as `packed_attention` over `spans` inside the block; the rows' `length` advance
    by their spans' lengths when it ends without error."""
    saved = config._attn_implementation
    config._attn_implementation = NAME
    _ACTIVE.append(spans)
    try:
        yield
    finally:
        _ACTIVE.pop()
        config._attn_implementation = saved
    for span in spans:
        span.row.length += span.length


def _bottom_right_causal(q_len: int, k_len: int, device) -> torch.Tensor:
    # query i (the (k_len - q_len + i)-th token) sees keys 0 .. k_len - q_len + i
    keys = torch.arange(k_len, device=device)
    queries = torch.arange(k_len - q_len, k_len, device=device)
    return (keys[None, :] <= queries[:, None])[None, None]


def row_attention(module, query, key, value, dropout=0.0, scaling=None) -> torch.Tensor:
    """One row's attention: query ``(1, H, q, D)`` after ``key``/``value`` ``(1, KV, p + q, D)`` (the row's past, then
    the query tokens' own); returns ``(1, q, H, D)``."""
    q_len, past = query.shape[2], key.shape[2] - query.shape[2]
    if query.device.type == "cpu" or q_len == 1 or past == 0:
        return cached_causal_attention(module, query, key, value, None, dropout, scaling)[0]
    mask = _bottom_right_causal(q_len, key.shape[2], query.device)
    return sdpa_attention_forward(module, query, key, value, mask, dropout, scaling)[0]


def packed_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers' attention signature over a packed sequence (see the module docstring): query ``(1, H, S, D)``,
    key/value ``(1, KV, S, D)`` of the new tokens only; returns ``(1, S, H, D)`` and no weights."""
    if not _ACTIVE:
        raise RuntimeError(f"the {NAME!r} attention runs only inside packed_rows()")
    out = query.new_empty(query.shape[0], query.shape[2], query.shape[1], query.shape[3])
    for span in _ACTIVE[-1]:
        a, z = span.start, span.start + span.length
        k, v = span.row.write(module.layer_idx, key[:, :, a:z], value[:, :, a:z])
        out[:, a:z] = row_attention(module, query[:, :, a:z], k, v, dropout, scaling)
    return out, None


AttentionInterface.register(NAME, packed_attention)
