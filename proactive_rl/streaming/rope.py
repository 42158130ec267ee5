"""3-D (m-RoPE) positions for a chunk appended to a Qwen-VL KV cache (docs/spec.md §9).

Qwen2.5-VL and Qwen3-VL give text tokens one position shared by the three rope axes (t, h, w) and
give an image's tokens a ``(t, h, w)`` grid that starts at the current position; after an image the
running position is ``start + max(h, w)`` — larger than the number of tokens so far. The model's
own incremental default (``rope_deltas`` frozen at the first prefill) is wrong as soon as an image
arrives in a later turn, so the engine passes explicit ``position_ids`` for every chunk.

The rope index of a sequence is shift-invariant: the model's ``get_rope_index`` applied to a chunk
alone, plus the position the chunk starts at, equals the rows of ``get_rope_index`` over the whole
sequence (tests check this against the model's own full-sequence computation).
"""

from __future__ import annotations

import torch


def find_vl_core(model: torch.nn.Module) -> torch.nn.Module:
    """The inner Qwen-VL model that owns ``get_rope_index`` and ``get_image_features``.

    Works through PEFT and accelerate/DeepSpeed wrappers by walking the module tree instead of
    assuming an attribute path.
    """
    for module in model.modules():
        if hasattr(module, "get_rope_index") and hasattr(module, "get_image_features"):
            return module
    raise TypeError(
        f"{type(model).__name__} has no submodule with `get_rope_index`; the streaming engine supports "
        "Qwen2.5-VL and Qwen3-VL (and PEFT/DeepSpeed wrappers of them)."
    )


def mm_token_types(input_ids: torch.Tensor, image_token_id: int, video_token_id: int | None = None) -> torch.Tensor:
    """``mm_token_type_ids`` as the processors build them: 0 text, 1 image placeholder, 2 video placeholder."""
    types = (input_ids == image_token_id).int()
    if video_token_id is not None:
        types = types + 2 * (input_ids == video_token_id).int()
    return types


def chunk_positions(
    core: torch.nn.Module,
    input_ids: torch.Tensor,
    image_grid_thw: torch.Tensor | None,
    start: int | torch.Tensor = 0,
) -> torch.Tensor:
    """Positions ``(3, len)`` of a 1-D chunk of token ids that starts at rope position ``start``.

    Args:
        core (`torch.nn.Module`): the inner model (see `find_vl_core`); its ``get_rope_index`` is reused so the
            engine follows the model's own rules.
        input_ids (`torch.Tensor` of shape `(len,)`): the chunk, with every image's placeholder tokens expanded.
        image_grid_thw (`torch.Tensor` of shape `(n_images, 3)`, *optional*): the grids of the chunk's images,
            in order.
        start (`int`): the first free position (the previous chunk's maximum position + 1, docs/spec.md §9).
    """
    config = core.config
    ids = input_ids.view(1, -1)
    types = mm_token_types(ids, config.image_token_id, getattr(config, "video_token_id", None))
    if image_grid_thw is None or image_grid_thw.numel() == 0:
        if bool(types.any()):
            raise ValueError("chunk has image placeholder tokens but no image grids")
        pos = torch.arange(ids.shape[1], device=ids.device).view(1, -1).expand(3, -1)
    else:
        pos, _ = core.get_rope_index(ids, mm_token_type_ids=types, image_grid_thw=image_grid_thw)
        pos = pos[:, 0]
    return pos + start


def next_position(positions: torch.Tensor) -> int:
    """The first free position after a chunk: its maximum position + 1 (what ``get_rope_index`` continues from)."""
    return int(positions.max()) + 1
