"""Frames resized at decode time to the processor's size encode exactly like full-size frames (docs/spec.md §2)."""

import math
import warnings

import numpy as np
import pytest
import torch

from proactive_eval.episodes import Episode
from proactive_eval.video import iter_frames, write_video
from proactive_rl.chat import build_messages, encode_dialogue
from proactive_rl.data.frames import frame_resizer, frames_of, processor_frame_size
from proactive_rl.data.lazy import EpisodeEncoder
from proactive_rl.models import build_tiny
from proactive_rl.synthetic import generate_episodes


@pytest.fixture(scope="module")
def processor():
    return build_tiny("qwen2_5_vl", "xs")[1]


@pytest.fixture(scope="module")
def episode(tmp_path_factory):
    """A 12 s episode with a 640x360 mp4 (moving gradients and noise: the resize has real work to do)."""
    folder = tmp_path_factory.mktemp("video")
    rng = np.random.default_rng(0)
    y, x = np.mgrid[0:360, 0:640]
    frames = [
        np.stack([(x + 9 * k) % 256, (y * 2 + 5 * k) % 256, rng.integers(0, 256, (360, 640))], -1).astype(np.uint8)
        for k in range(12)
    ]
    write_video(folder / "clip.mp4", frames, fps=1.0)
    record = generate_episodes("object", 1, seed=5, duration=(12, 12))[0].to_dict()
    return Episode.from_dict({**record, "id": "clip", "video": "clip.mp4"}, base_dir=folder)


def full_size_encoding(processor, episode, max_length=None):
    """The path without resize at decode: full-size frames, the processor resizes them."""
    messages = build_messages(episode, frames_of(episode))
    return encode_dialogue(processor, messages, max_length, episode_id=episode.id)


def reference_size(height, width, min_pixels, max_pixels, factor=28):
    """Qwen2-VL's size rule written out from its description (round to the factor, rescale into the pixel range)."""
    h, w = factor * round(height / factor), factor * round(width / factor)
    if h * w > max_pixels:
        scale = math.sqrt(height * width / max_pixels)
        return max(factor, factor * math.floor(height / scale / factor)), max(
            factor, factor * math.floor(width / scale / factor)
        )
    if h * w < min_pixels:
        scale = math.sqrt(min_pixels / (height * width))
        return factor * math.ceil(height * scale / factor), factor * math.ceil(width * scale / factor)
    return h, w


@pytest.mark.parametrize("max_length", [None, 250])  # 250 drops early frame steps (the full dialogue has 433)
def test_resized_frames_encode_like_full_size_frames(processor, episode, max_length):
    new, old = EpisodeEncoder(processor, max_length)(episode), full_size_encoding(processor, episode, max_length)
    assert len(new["input_ids"]) <= (max_length or 10**9)
    assert sorted(new) == sorted(old)
    for key in ("input_ids", "labels", "attention_mask", "mm_token_type_ids", "image_grid_thw"):
        assert torch.equal(new[key], old[key]), key
    assert (new["pixel_values"] - old["pixel_values"]).abs().max().item() <= 1e-6


def test_the_resized_size_is_the_processors_grid(processor, episode):
    resize = frame_resizer(processor)
    grid = full_size_encoding(processor, episode)["image_grid_thw"]
    frames = frames_of(episode, resize)
    patch = processor.image_processor.patch_size
    assert [f.shape for _, f in frames] == [(int(h) * patch, int(w) * patch, 3) for _, h, w in grid.tolist()]
    size = processor.image_processor.size
    expected = reference_size(360, 640, size["shortest_edge"], size["longest_edge"])
    assert processor_frame_size(processor, 360, 640) == expected == frames[0][1].shape[:2]
    assert frames[0][1].dtype == np.uint8
    assert [t for t, _ in frames] == [t for t, _ in iter_frames(episode)]


@pytest.mark.parametrize("pixels", [(3136, 3136), (3136, 28 * 28 * 40)])  # the tiny processor's, and a wider range
def test_both_image_processor_backends_match_their_full_size_path(processor, episode, pixels):
    """The torchvision backend (the default) and the PIL one; the pixel range changes whether the size is reached
    in one step (min = max is not idempotent: a 28x56 frame would be resized again to 56x84)."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
    from transformers.models.qwen2_vl.image_processing_qwen2_vl import Qwen2VLImageProcessor

    for cls in (Qwen2VLImageProcessor, Qwen2VLImageProcessorPil):
        proc = build_tiny("qwen2_5_vl", "xs")[1]
        config = processor.image_processor.to_dict()
        config["size"] = {"shortest_edge": pixels[0], "longest_edge": pixels[1]}
        proc.image_processor = cls(**{k: v for k, v in config.items() if k != "image_processor_type"})
        assert processor_frame_size(proc, 360, 640) == reference_size(360, 640, *pixels)
        new, old = EpisodeEncoder(proc, None)(episode), full_size_encoding(proc, episode)
        assert torch.equal(new["input_ids"], old["input_ids"]), cls.__name__
        assert torch.equal(new["image_grid_thw"], old["image_grid_thw"]), cls.__name__
        assert (new["pixel_values"] - old["pixel_values"]).abs().max().item() <= 1e-6, cls.__name__


def test_an_unknown_processor_keeps_full_size_frames(processor):
    class Other:
        image_processor = object()

    assert processor_frame_size(Other(), 360, 640) is None and frame_resizer(Other()) is None


def test_full_size_frames_marked_resized_are_rejected(processor, episode):
    messages = build_messages(episode, frames_of(episode))
    with pytest.raises(ValueError, match="multiple of 28 px, got 360x640"):
        encode_dialogue(processor, messages, frames_resized=True)


def test_rendered_synthetic_frames_encode_like_full_size_frames(processor):
    episode = generate_episodes("object", 1, seed=5, duration=(10, 10))[0]  # 64x64 frames, resized to 56x56
    new, old = EpisodeEncoder(processor, None)(episode), full_size_encoding(processor, episode)
    assert torch.equal(new["input_ids"], old["input_ids"]) and torch.equal(
        new["image_grid_thw"], old["image_grid_thw"]
    )
    assert (new["pixel_values"] - old["pixel_values"]).abs().max().item() <= 1e-6
    assert {f.shape for _, f in frames_of(episode, frame_resizer(processor))} == {(56, 56, 3)}


def test_read_only_frame_resizes_without_warning_and_unchanged(processor):
    """Decoded or memory-mapped frames are read-only: the resize copies them, warns nothing, leaves them as they were."""
    frame = np.random.default_rng(1).integers(0, 256, (360, 640, 3)).astype(np.uint8)
    writable = frame_resizer(processor)(frame.copy())
    frame.flags.writeable = False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = frame_resizer(processor)(frame)
    np.testing.assert_array_equal(out, writable)
    assert not frame.flags.writeable
