"""Small real media files for the evaluation tests: mp4 videos (whole or cut short) and PNG images."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np


def frames(n: int, size: int = 32, seed: int = 0) -> list[np.ndarray]:
    """`n` noisy frames (noise keeps the encoded file long enough to cut in the middle of its frames)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 255, (size, size, 3), dtype=np.uint8) for _ in range(n)]


def write_head_indexed_video(path: str | Path, n: int, fps: float = 1.0, size: int = 32) -> Path:
    """An mp4 with its index at the head (``movflags=faststart``, as streaming sites serve them): cut short, it
    still opens and decodes its first frames, then stops, while the index says the full length."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rate = Fraction(fps).limit_denominator(1000)
    with av.open(str(path), "w", options={"movflags": "faststart"}) as container:
        codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
        stream = container.add_stream(codec, rate=rate)
        stream.width = stream.height = size
        stream.pix_fmt, stream.time_base = "yuv420p", 1 / rate
        for k, frame in enumerate(frames(n, size)):
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = k
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


def cut(path: str | Path, fraction: float = 0.5) -> Path:
    """Keep only the first `fraction` of the file's bytes (a download that stopped)."""
    path = Path(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * fraction)])
    return path


def write_png(path: str | Path, value: int, size: int = 8) -> Path:
    from PIL import Image

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((size, size, 3), value, np.uint8)).save(path)
    return path
