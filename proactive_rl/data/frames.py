"""The decision frames of an episode (docs/spec.md §1): one ``(time, RGB array)`` per sampled step.

A frame can be resized right after it is decoded to the size the processor will resize it to
(:func:`frame_resizer`), so an episode's frames are held at the processor's size, not the video's: the
processor's own arithmetic and resampling are used, and the processor then skips its resize, so the
``pixel_values`` are those of the full-size path (docs/spec.md §2).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np

from proactive_eval.episodes import Episode
from proactive_eval.video import iter_frames
from proactive_rl.synthetic import render_frames

# The Qwen2-VL image processors (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) of transformers 5: torchvision and PIL backends.
# Their resize is ``smart_resize`` (patch_size × merge_size, min/max pixels) then the backend's resize; nothing
# else in their preprocessing depends on the input size. Any other processor keeps its frames at full size.
_KNOWN_IMAGE_PROCESSORS = ("Qwen2VLImageProcessor", "Qwen2VLImageProcessorPil")


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
    an image processor not known here (or one that does not resize)."""
    image_processor = getattr(processor, "image_processor", None)
    if type(image_processor).__name__ not in _KNOWN_IMAGE_PROCESSORS or not image_processor.do_resize:
        return None
    smart_resize = sys.modules[type(image_processor).__module__].smart_resize
    size = image_processor.size
    return smart_resize(
        height,
        width,
        factor=image_processor.patch_size * image_processor.merge_size,
        min_pixels=size["shortest_edge"],
        max_pixels=size["longest_edge"],
    )


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
    """Picklable (DataLoader workers): the image processor's backend resize to `processor_frame_size`."""

    def __init__(self, processor):
        self.processor = processor

    def __call__(self, frame: np.ndarray) -> np.ndarray:
        # deferred: keeps torch/transformers out of light import paths
        from transformers.image_utils import SizeDict

        ip = self.processor.image_processor
        height, width = frame.shape[:2]
        target = processor_frame_size(self.processor, height, width)
        if target == (height, width):
            return frame
        # The backend's own resize (what the processor's resize calls after smart_resize), on the channel-first
        # array the processor itself would build from this frame.
        backend_resize = super(type(ip), ip).resize
        size = SizeDict(height=target[0], width=target[1])
        if type(ip).__name__ == "Qwen2VLImageProcessorPil":
            out = backend_resize(np.ascontiguousarray(np.moveaxis(frame, -1, 0)), size, resample=ip.resample)
            return np.ascontiguousarray(np.moveaxis(np.asarray(out), 0, -1))
        import torch

        frame = np.ascontiguousarray(frame)
        if not frame.flags.writeable:  # torch warns on read-only arrays (decoded or memory-mapped frames)
            frame = frame.copy()
        image = torch.from_numpy(frame).permute(2, 0, 1).contiguous()
        out = backend_resize(image, size, resample=ip.resample)
        return np.ascontiguousarray(out.permute(1, 2, 0).numpy())
