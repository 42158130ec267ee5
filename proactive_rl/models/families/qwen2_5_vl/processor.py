"""The Qwen-VL processors' rules: tokens per image, and the resize of a frame (docs/spec.md §2).

Qwen2.5-VL and Qwen3-VL use the Qwen2-VL image processor of transformers 5 (a torchvision and a PIL backend). Its
resize is ``smart_resize`` (patch_size × merge_size, min/max pixels) then the backend's resize; nothing else in its
preprocessing depends on the input size, so a frame resized here once (`proactive_rl.data.frames.frame_resizer`)
and processed without the processor's resize gives the ``pixel_values`` of the full-size frame. Any other image
processor keeps its frames at full size.
"""

from __future__ import annotations

import sys

import numpy as np
import torch


def image_processor_classes() -> tuple[type, ...]:
    """The image processors whose resize rule is known here: the torchvision and the PIL backend."""
    # deferred: keeps transformers out of light import paths
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    return Qwen2VLImageProcessor, Qwen2VLImageProcessorPil


def tokens_per_image(processor, grids: torch.Tensor) -> torch.Tensor:
    """One placeholder per merged patch: ``t·h·w / merge²`` per ``image_grid_thw`` row."""
    merge = getattr(processor.image_processor, "merge_size", 2)
    return grids.prod(-1) // merge**2


def frame_size(processor, height: int, width: int) -> tuple[int, int] | None:
    """``smart_resize`` of a known image processor that resizes; None otherwise."""
    image_processor = getattr(processor, "image_processor", None)
    if type(image_processor) not in image_processor_classes() or not image_processor.do_resize:
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


def resize_frame(processor, frame: np.ndarray, target: tuple[int, int]) -> np.ndarray:
    """The backend's own resize (what the processor's resize calls after ``smart_resize``), on the channel-first
    array the processor itself would build from this frame."""
    # deferred: keeps torch/transformers out of light import paths
    from transformers.image_utils import SizeDict

    ip = processor.image_processor
    backend_resize = super(type(ip), ip).resize
    size = SizeDict(height=target[0], width=target[1])
    if type(ip) is image_processor_classes()[1]:  # the PIL backend: channel-first numpy arrays
        out = backend_resize(np.ascontiguousarray(np.moveaxis(frame, -1, 0)), size, resample=ip.resample)
        return np.ascontiguousarray(np.moveaxis(np.asarray(out), 0, -1))
    frame = np.ascontiguousarray(frame)
    if not frame.flags.writeable:  # torch warns on read-only arrays (decoded or memory-mapped frames)
        frame = frame.copy()
    image = torch.from_numpy(frame).permute(2, 0, 1).contiguous()
    out = backend_resize(image, size, resample=ip.resample)
    return np.ascontiguousarray(out.permute(1, 2, 0).numpy())


def tokens_per_resized_frame(processor, height: int, width: int) -> int:
    """Vision tokens of a frame already at the processor's size (one token per merged patch)."""
    ip = processor.image_processor
    factor = ip.patch_size * ip.merge_size
    if height % factor or width % factor:
        raise ValueError(f"a frame marked resized must be a multiple of {factor} px, got {height}x{width}")
    return (height // factor) * (width // factor)
