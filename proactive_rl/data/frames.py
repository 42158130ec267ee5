"""The decision frames of an episode (docs/spec.md §1): one ``(time, RGB array)`` per sampled step.

A frame can be resized right after it is decoded to the size the processor will resize it to
(:func:`frame_resizer`), so an episode's frames are held at the processor's size, not the video's: the
processor's own arithmetic and resampling are used, and the processor then skips its resize, so the
``pixel_values`` are those of the full-size path (docs/spec.md §2). The size rule and the resize are the processor's
model family's (`ModelFamily.frame_size`, `ModelFamily.resize_frame`); a processor of no registered family, or one
whose family gives no rule, keeps its frames at full size.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from proactive_eval.episodes import Episode
from proactive_eval.video import iter_frames
from proactive_rl.models.families import family_of_processor
from proactive_rl.synthetic import render_frames


def frames_of(
    episode: Episode, resize: Callable[[np.ndarray], np.ndarray] | None = None
) -> list[tuple[float, np.ndarray]]:
    """Frames of an episode: drawn for in-memory synthetic episodes (no ``video``), decoded from its video otherwise.

    Args:
        episode (`Episode`): the episode.
        resize (`Callable`, *optional*): applied to each frame as soon as it is decoded (e.g. `frame_resizer`), so
            one full-size frame is alive at a time.
    """
    frames = render_frames(episode) if episode.video is None else iter_frames(episode)
    if resize is None:
        return list(frames)
    return [(t, resize(frame)) for t, frame in frames]


def processor_frame_size(processor, height: int, width: int) -> tuple[int, int] | None:
    """``(height, width)`` the processor's image processor resizes an ``height × width`` frame to, or ``None`` for
    a processor whose family gives no size rule (or an image processor that does not resize)."""
    family = family_of_processor(processor)
    return None if family is None else family.frame_size(processor, height, width)


def frame_resizer(processor) -> Callable[[np.ndarray], np.ndarray] | None:
    """A function resizing an ``H×W×3`` uint8 frame exactly as the processor's image processor would (its size, its
    resampling, its backend's resize), or ``None`` when `processor_frame_size` does not know the processor.

    Frames so resized must be processed without the processor's resize (``encode_dialogue(...,
    frames_resized=True)``): the processor's size rule is not idempotent (with min_pixels = max_pixels a frame
    at its target size would be resized again), so the resize is done once, here.
    """
    if processor_frame_size(processor, 32, 32) is None:
        return None
    return _FrameResizer(processor)


class _FrameResizer:
    """Picklable (DataLoader workers): the processor's own resize to `processor_frame_size` (its family's)."""

    def __init__(self, processor):
        self.processor = processor
        self.family = family_of_processor(processor)

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        height, width = frame.shape[:2]
        target = self.family.frame_size(self.processor, height, width)
        if target == (height, width):
            return frame
        return self.family.resize_frame(self.processor, frame, target)
