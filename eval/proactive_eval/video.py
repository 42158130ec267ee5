"""Frames of an episode at its decision rate, from a video file (PyAV) or a folder of frames (docs/spec.md §1).

A decision step happens at every sampled time ``k / fps``. A sample time resolves to the frame on screen
at that moment (the last frame whose timestamp is at or before it); times that resolve to the same frame
are deduplicated, so a 0.5 FPS video sampled at 1 FPS yields each frame once. Videos are decoded in one
forward pass, seeking ahead only over long gaps, and only the selected frames are converted to arrays.

`av` and `PIL` are imported lazily: scoring predictions never needs them.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path

import numpy as np

from proactive_eval.errors import InputError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp")
# A forward gap (seconds) beyond which seeking to the previous keyframe beats decoding through.
_SEEK_GAP_S = 4.0
# Timestamps are floats from rationals; a frame "at" a sample time may be off by rounding.
_EPS = 1e-6


class VideoError(InputError):
    """A video or frame folder that cannot be read; the message names the file.

    Args:
        message (`str`): what went wrong.
        file (`str`, *optional*): the video file, frames folder or image at fault.
    """

    def __init__(self, message: str, *, file: str | Path | None = None):
        self.file = str(file) if file is not None else None
        self.reason = message
        super().__init__(f"{self.file}: {message}" if self.file else message)


def sample_times(duration: float, fps: float) -> list[float]:
    """Decision-step times ``k / fps`` for ``0 ≤ t < duration`` (and always ``t = 0``) (docs/spec.md §1).

    >>> sample_times(3.0, 1.0)
    [0.0, 1.0, 2.0]
    >>> sample_times(1.2, 2.0)
    [0.0, 0.5, 1.0]
    """
    if not (math.isfinite(duration) and duration > 0):
        raise ValueError(f"duration must be a positive finite number, got {duration}")
    if not (math.isfinite(fps) and fps > 0):
        raise ValueError(f"fps must be a positive finite number, got {fps}")
    count = max(1, math.ceil(duration * fps - 1e-9))
    return [k / fps for k in range(count)]


def iter_frames(episode, fps: float | None = None) -> Iterator[tuple[float, np.ndarray]]:
    """Yield ``(time, frame)`` for an episode's decision steps, frames as ``H×W×3`` uint8 arrays.

    Args:
        episode (`Episode`): an episode whose `video` is a file or ``{"frames_dir": ..., "fps": ...}``.
        fps (`float`, *optional*): the sampling rate; defaults to the episode's `fps`.

    Raises:
        `VideoError` naming the file for a missing, empty, corrupt, truncated (frames stop well before the end the
        file declares) or frameless video, a missing or empty frames folder, or an image that fails to decode.
    """
    fps = float(fps if fps is not None else episode.fps)
    path = episode.video_path()
    if path is None:
        raise VideoError(
            f"episode {episode.id!r} has no video (an in-memory synthetic episode: use "
            "proactive_rl.synthetic.render_frames)"
        )
    times = sample_times(episode.duration, fps)
    if isinstance(episode.video, dict):
        folder_fps = float(episode.video.get("fps", episode.fps))
        yield from read_folder_frames(path, times, folder_fps)
    else:
        yield from read_video_frames(path, times)


def frame_plan(episode, fps: float | None = None) -> list[tuple[float, tuple[int, int]]]:
    """``(time, (height, width))`` of each frame `iter_frames` would yield, read without decoding any pixels.

    A video's frame timestamps come from its packets (demuxed, not decoded) and its size from the stream header; a
    frames folder's sizes from each image header. Selection and deduplication are those of `iter_frames`
    (docs/spec.md §1), so the plan has the same times and sizes as the decoded frames of an intact file.

    Raises:
        `VideoError` naming the file when it is missing, empty, or cannot be opened or demuxed.
    """
    # deferred: optional extra
    fps = float(fps if fps is not None else episode.fps)
    path = episode.video_path()
    if path is None:
        raise VideoError(f"episode {episode.id!r} has no video")
    times = sorted(sample_times(episode.duration, fps))
    if isinstance(episode.video, dict):
        from PIL import Image

        files = list_frame_files(path)
        plan = []
        for t, index in _folder_picks(len(files), times, float(episode.video.get("fps", episode.fps))):
            _check_file(files[index])
            try:
                with Image.open(files[index]) as image:
                    width, height = image.size
            except (OSError, ValueError, SyntaxError) as err:
                raise VideoError(f"cannot read image header ({err})", file=files[index]) from None
            plan.append((t, (height, width)))
        return plan
    frame_times, size = _video_packet_times(path)
    plan, j, emitted = [], 0, None
    for t in times:
        while j + 1 < len(frame_times) and frame_times[j + 1] <= t + _EPS:
            j += 1
        if emitted is None or abs(frame_times[j] - emitted) >= _EPS:
            emitted = frame_times[j]
            plan.append((t, size))
    return plan


def _video_packet_times(path: Path) -> tuple[list[float], tuple[int, int]]:
    """Sorted presentation times of the first video stream's frames (from packets) and its ``(height, width)``."""
    # deferred: optional extra
    _check_file(path)
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise VideoError("no video stream", file=path)
            stream = container.streams.video[0]
            size = (int(stream.codec_context.height), int(stream.codec_context.width))
            base = float(stream.time_base) if stream.time_base is not None else None
            rate = float(stream.average_rate) if stream.average_rate else 1.0
            stamps, count = set(), 0
            for packet in container.demux(stream):
                if packet.size == 0:
                    continue  # the flush packet
                stamps.add(packet.pts * base if packet.pts is not None and base is not None else count / rate)
                count += 1
    except (av.error.FFmpegError, OSError) as err:
        raise VideoError(f"cannot open video ({err})", file=path) from None
    if not stamps or size[0] <= 0 or size[1] <= 0:
        raise VideoError("no frames" if not stamps else "no frame size in the stream header", file=path)
    return sorted(stamps), size


def read_video_frames(path: str | Path, times: list[float]) -> Iterator[tuple[float, np.ndarray]]:
    """Decode the frames on screen at `times` (sorted seconds) from a video file, deduplicated.

    Each yielded time is the first sample time that resolved to that frame.
    """
    # deferred: optional extra
    path = Path(path)
    _check_file(path)
    try:
        import av
    except ImportError as err:  # pragma: no cover - av is a declared extra
        raise VideoError("reading videos needs PyAV: pip install 'proactive-eval[video]'", file=path) from err

    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError, ValueError) as err:
        raise VideoError(f"cannot open video ({err})", file=path) from None
    with container:
        if not container.streams.video:
            raise VideoError("no video stream", file=path)
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        try:
            yield from _select_frames(container, stream, sorted(times))
        except _Truncated as err:
            raise VideoError(f"truncated video ({err})", file=path) from None
        except (av.error.FFmpegError, OSError, ValueError) as err:
            raise VideoError(f"corrupt video ({err})", file=path) from None


class _Truncated(Exception):
    """The frames stop well before the end the video stream declares (a file cut short)."""


def _check_not_truncated(stream, last_time: float | None, last_wanted: float) -> None:
    """Raise `_Truncated` when decoding ended before `last_wanted` (the last sample time) and well before
    the video stream's declared end: a cut file (its index still says the full length) decodes only its head."""
    if last_time is None or stream.duration is None or stream.time_base is None:
        return
    base = float(stream.time_base)
    end = (stream.start_time or 0) * base + stream.duration * base
    interval = 1.0 / float(stream.average_rate) if stream.average_rate else 0.0
    # Tolerance: a frame interval for the last frame's own length, plus max(1 s, 2 intervals) of slack.
    if last_wanted > last_time + interval and end - (last_time + interval) > max(1.0, 2 * interval):
        raise _Truncated(f"frames stop at {last_time:.2f} s; the video stream says it lasts {end:.2f} s")


def _select_frames(container, stream, times: list[float]) -> Iterator[tuple[float, np.ndarray]]:
    base = float(stream.time_base) if stream.time_base is not None else None
    rate = float(stream.average_rate) if stream.average_rate else None
    i, prev, prev_time, decoded, last_emitted, last_time = 0, None, None, 0, None, None

    def emit(sample_time, frame, frame_time):
        nonlocal last_emitted
        if last_emitted is not None and abs(frame_time - last_emitted) < _EPS:
            return None  # same frame as the previous sample time: deduplicated (docs/spec.md §1)
        last_emitted = frame_time
        return sample_time, frame.to_ndarray(format="rgb24")

    while i < len(times):
        restarted = False
        for frame in container.decode(stream):
            if frame.pts is not None and base is not None:
                frame_time = frame.pts * base
            else:
                frame_time = decoded / rate if rate else float(decoded)
            decoded += 1
            last_time = frame_time if last_time is None else max(last_time, frame_time)
            # Every sample time before this frame resolves to the previous frame (or this one, at the start).
            while i < len(times) and frame_time > times[i] + _EPS:
                source, source_time = (prev, prev_time) if prev is not None else (frame, frame_time)
                out = emit(times[i], source, source_time)
                if out is not None:
                    yield out
                i += 1
            prev, prev_time = frame, frame_time
            if i >= len(times):
                return
            if base is not None and times[i] - frame_time > _SEEK_GAP_S:
                # Far ahead: jump to the keyframe before the next sample time instead of decoding through.
                container.seek(int(times[i] / base), stream=stream, backward=True, any_frame=False)
                prev = None
                restarted = True
                break
        if not restarted:
            break
    if decoded == 0:
        raise ValueError("no frames could be decoded")
    if i < len(times):
        _check_not_truncated(stream, last_time, times[-1])
    # Sample times after the last frame resolve to it.
    while i < len(times):
        out = emit(times[i], prev, prev_time) if prev is not None else None
        if out is not None:
            yield out
        i += 1


def list_frame_files(folder: str | Path) -> list[Path]:
    """The image files of a frames folder in natural order (``2.png`` before ``10.png``)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise VideoError("frames folder not found" if not folder.exists() else "not a folder", file=folder)
    files = [p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file()]
    if not files:
        raise VideoError(f"frames folder has no images ({', '.join(IMAGE_SUFFIXES)})", file=folder)
    return sorted(files, key=lambda p: [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", p.name)])


def read_folder_frames(
    folder: str | Path, times: list[float], folder_fps: float = 1.0
) -> Iterator[tuple[float, np.ndarray]]:
    """Frames on screen at `times` from a folder whose k-th image (natural order) shows at ``k / folder_fps``."""
    files = list_frame_files(folder)
    for t, index in _folder_picks(len(files), times, folder_fps):
        yield t, load_image(files[index])


def _folder_picks(count: int, times: list[float], folder_fps: float) -> list[tuple[float, int]]:
    """``(time, index)`` of the image on screen at each of `times` in a folder of `count` images, a repeat of the
    previous image dropped (docs/spec.md §1)."""
    picks, last = [], None
    for t in sorted(times):
        index = min(count - 1, int(math.floor(t * folder_fps + _EPS)))
        if index != last:
            last = index
            picks.append((t, index))
    return picks


def load_image(path: str | Path) -> np.ndarray:
    """An image file as an ``H×W×3`` uint8 array; `VideoError` naming the file if it cannot be decoded."""
    # deferred: optional extra
    path = Path(path)
    _check_file(path)
    try:
        from PIL import Image, UnidentifiedImageError
    except ImportError as err:  # pragma: no cover - pillow is a declared extra
        raise VideoError("reading images needs Pillow: pip install pillow", file=path) from err
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"), dtype=np.uint8)
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as err:
        raise VideoError(f"cannot decode image ({err})", file=path) from None


def _check_file(path: Path) -> None:
    if not path.exists():
        raise VideoError("file not found", file=path)
    if not path.is_file():
        raise VideoError("not a file", file=path)
    if path.stat().st_size == 0:
        raise VideoError("empty file (0 bytes)", file=path)


def write_video(
    path: str | Path, frames, fps: float = 1.0, crf: int = 12, keyframe_interval: int | None = None
) -> str:
    """Encode ``H×W×3`` uint8 frames as an mp4 (H.264 ``libx264`` if available, else MPEG-4 Part 2), ``yuv420p``.

    Frame k gets timestamp ``k / fps``, so a decoder sampling at `fps` sees each frame once. The file is written
    next to `path` and renamed into place, so an interrupted run never leaves a truncated video behind.

    The same frames write the same bytes on every run (docs/spec.md §10): the encoder runs on one thread with
    x264's plain-C kernels (``no-asm``). With its AVX-512 kernels, encoding the same frames twice gave different
    bitstreams on a loaded machine (45 of 150 encodes of one episode; 0 of 150 with AVX2 or plain C); the SIMD
    level and the thread count also change the bitstream between machines, which plain C on one thread rules out
    for one PyAV build (verified on one machine only). Plain C costs ~2× encoding time, negligible at 64 px.

    Args:
        path (`str` or `Path`): the output file.
        frames (`Iterable[np.ndarray]`): the frames, all the same even-sided size.
        fps (`float`, *optional*, defaults to `1.0`): frames per second.
        crf (`int`, *optional*, defaults to `12`): x264 quality (lower is closer to lossless).
        keyframe_interval (`int`, *optional*): frames between keyframes (the codec's default if `None`); short
            intervals make seeking cheap in long videos.

    Returns:
        `str`: the codec used.
    """
    # deferred: optional extra

    import av

    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.mp4")
    codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
    rate = Fraction(fps).limit_denominator(1000)
    try:
        with av.open(str(tmp), mode="w") as container:
            stream = None
            for k, frame in enumerate(frames):
                frame = np.ascontiguousarray(frame, dtype=np.uint8)
                if stream is None:
                    h, w = frame.shape[:2]
                    if h % 2 or w % 2:
                        raise VideoError(f"frame size {w}x{h} must be even for yuv420p", file=path)
                    stream = container.add_stream(codec, rate=rate)
                    stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
                    stream.time_base = 1 / rate
                    # One thread: the implicit RGB -> yuv420p conversion and x264 follow the codec's thread count.
                    stream.codec_context.thread_count = 1
                    if keyframe_interval is not None:
                        stream.codec_context.gop_size = int(keyframe_interval)
                    if codec == "libx264":
                        stream.options = {"crf": str(crf), "preset": "veryfast", "x264-params": "no-asm=1"}
                    else:
                        stream.options = {"flags": "+bitexact"}  # FFmpeg's own DSP: its bit-exact C paths
                        stream.bit_rate = 4_000_000
                video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
                video_frame.pts = k
                container.mux(stream.encode(video_frame))
            if stream is None:
                raise VideoError("no frames to write", file=path)
            container.mux(stream.encode(None))
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return codec
