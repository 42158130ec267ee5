"""A KV cache that appends in amortised O(1) (docs/spec.md §9).

transformers' `DynamicLayer` concatenates on every update, so decoding token by token copies the whole cache at
every step: O(L²) memory traffic over a long stream. `GrowingLayer` writes into a buffer that doubles when full
and exposes its filled part as `keys` / `values` (views). Anything that replaces `keys` with a new tensor
(`batch_repeat_interleave`, `batch_select_indices`, `copy.deepcopy`) is noticed at the next update, which
re-seeds the buffer from it.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """A `DynamicLayer` whose appends write into a doubling buffer instead of concatenating."""

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        cur, n = self.get_seq_length(), key_states.shape[-2]
        buf = self._kbuf
        stale = (
            buf is None
            or cur + n > buf.shape[-2]
            or buf.shape[0] != key_states.shape[0]
            or (cur > 0 and self.keys.data_ptr() != buf.data_ptr())
        )
        if stale:
            capacity = max(64, 2 * (cur + n))
            kb = key_states.new_empty(*key_states.shape[:-2], capacity, key_states.shape[-1])
            vb = value_states.new_empty(*value_states.shape[:-2], capacity, value_states.shape[-1])
            if cur:
                kb[..., :cur, :] = self.keys
                vb[..., :cur, :] = self.values
            self._kbuf, self._vbuf = kb, vb
        self._kbuf[..., cur : cur + n, :] = key_states
        self._vbuf[..., cur : cur + n, :] = value_states
        self.keys = self._kbuf[..., : cur + n, :]
        self.values = self._vbuf[..., : cur + n, :]
        return self.keys, self.values


def new_cache(config) -> DynamicCache:
    """A `DynamicCache` of `GrowingLayer`s when every decoder layer is full attention (Qwen-VL), else the stock one."""
    text = config.get_text_config(decoder=True)
    layer_types = getattr(text, "layer_types", None) or ["full_attention"]
    if any(t != "full_attention" for t in layer_types):
        return DynamicCache(config=config)
    cache = DynamicCache()
    cache.layer_class_to_replicate = GrowingLayer
    return cache
