"""What a streaming session appends: chunks of dialogue, and the vision features of their frames (docs/spec.md §9).

A `Chunk` is one tokenised piece of dialogue (typically one frame's user turn) with its frames. Its frames are
encoded once: the session stores the features in the chunk (`Chunk.images`), so a chunk appended again after a
rolled-back speculation, or by another session (the G rows of a GRPO group), is not re-encoded, and the frames of
chunks known in advance are encoded together in one vision call (`StreamingSession.encode`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from proactive_rl.models.families import ImageFeatures


@dataclass
class Chunk:
    """One already tokenised piece of dialogue to append (e.g. one frame's user turn + the assistant header).

    Args:
        input_ids (`Sequence[int]`): the chunk, every image's placeholder tokens expanded.
        pixel_values (`torch.Tensor`, *optional*): the processed images of the chunk.
        image_grid_thw (`torch.Tensor`, *optional*): their rows of the family's per-image field
            (`ModelFamily.image_key`: ``(n_images, 3)`` grids for Qwen-VL, image sizes for LLaVA-NeXT).
        text_only_ids (`Sequence[int]`, *optional*): the chunk as rendered *without* its (single) image, used in its
            place once `max_frames` evicts the image (see `StreamingSession.append_tokens`).
        images (`list[ImageFeatures]`, *optional*): the images' vision features; filled in by the first session that
            encodes the chunk.
    """

    input_ids: Sequence[int]
    pixel_values: torch.Tensor | None = None
    image_grid_thw: torch.Tensor | None = None
    text_only_ids: Sequence[int] | None = None
    images: list[ImageFeatures] | None = None

    @property
    def n_images(self) -> int:
        if self.image_grid_thw is not None:
            return len(self.image_grid_thw)
        return len(self.images or [])


def image_spans(ids: list[int], image_token_id: int, start_id: int | None, end_id: int | None) -> list[tuple]:
    """One ``(start, end, ())`` per image of `ids`: its run of placeholders plus the vision start/end tokens around
    it; evicted, it leaves nothing behind."""
    spans, i = [], 0
    while i < len(ids):
        if ids[i] != image_token_id:
            i += 1
            continue
        j = i
        while j < len(ids) and ids[j] == image_token_id:
            j += 1
        a = i - 1 if i > 0 and ids[i - 1] == start_id else i
        z = j + 1 if j < len(ids) and ids[j] == end_id else j
        spans.append((a, z, ()))
        i = j
    return spans


def evict(tokens: list[int], spans: list[tuple], n: int) -> tuple[list[int], list[tuple]]:
    """`tokens` with the first `n` spans replaced by their text-only form; the other spans, re-indexed."""
    out, kept, i = [], [], 0
    for k, (a, z, replacement) in enumerate(spans):
        out += tokens[i:a]
        if k < n:
            out += list(replacement)
        else:
            kept.append((len(out), len(out) + z - a, replacement))
            out += tokens[a:z]
        i = z
    return out + tokens[i:], kept
