"""Stroke drawings for the sketch environment (a QuickDraw stand-in) and image corruptions.

A drawing is a list of strokes; a stroke is a polyline in unit coordinates (x right, y down). The first
stroke alone is deliberately generic (a line, a box, a circle), so the category needs more strokes.
"""

from __future__ import annotations

import numpy as np


def _circle(cx, cy, r, n=16):
    return [(cx + r * np.cos(a), cy + r * np.sin(a)) for a in np.linspace(0, 2 * np.pi, n + 1)]


DRAWINGS: dict[str, list[list[tuple[float, float]]]] = {
    "house": [
        [(0.2, 0.5), (0.2, 0.9), (0.8, 0.9), (0.8, 0.5), (0.2, 0.5)],
        [(0.15, 0.5), (0.5, 0.15), (0.85, 0.5)],
        [(0.43, 0.9), (0.43, 0.68), (0.57, 0.68), (0.57, 0.9)],
    ],
    "envelope": [
        [(0.15, 0.3), (0.15, 0.75), (0.85, 0.75), (0.85, 0.3), (0.15, 0.3)],
        [(0.15, 0.3), (0.5, 0.55), (0.85, 0.3)],
    ],
    "tree": [
        [(0.45, 0.9), (0.45, 0.6)],
        [(0.55, 0.9), (0.55, 0.6)],
        [(0.2, 0.6), (0.5, 0.1), (0.8, 0.6), (0.2, 0.6)],
    ],
    "arrow": [
        [(0.15, 0.5), (0.85, 0.5)],
        [(0.6, 0.3), (0.85, 0.5), (0.6, 0.7)],
    ],
    "sun": [
        _circle(0.5, 0.5, 0.2),
        [(0.5, 0.1), (0.5, 0.22)],
        [(0.5, 0.78), (0.5, 0.9)],
        [(0.1, 0.5), (0.22, 0.5)],
        [(0.78, 0.5), (0.9, 0.5)],
    ],
    "face": [
        _circle(0.5, 0.5, 0.35),
        [(0.38, 0.4), (0.4, 0.42)],
        [(0.6, 0.4), (0.62, 0.42)],
        [(0.35, 0.62), (0.5, 0.72), (0.65, 0.62)],
    ],
    "boat": [
        [(0.1, 0.65), (0.25, 0.85), (0.75, 0.85), (0.9, 0.65), (0.1, 0.65)],
        [(0.5, 0.65), (0.5, 0.15)],
        [(0.5, 0.15), (0.8, 0.55), (0.5, 0.55)],
    ],
    "ladder": [
        [(0.3, 0.1), (0.3, 0.9)],
        [(0.7, 0.1), (0.7, 0.9)],
        [(0.3, 0.3), (0.7, 0.3)],
        [(0.3, 0.5), (0.7, 0.5)],
        [(0.3, 0.7), (0.7, 0.7)],
    ],
}


def draw_strokes(strokes, size: int, thickness: float = 1.2) -> np.ndarray:
    """Black strokes on white, ``size×size×3`` uint8: pixels within `thickness` of a segment are inked."""
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    ink = np.zeros((size, size), dtype=bool)
    for stroke in strokes:
        pts = np.asarray(stroke, dtype=np.float64) * (size - 1)
        for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
            dx, dy = x1 - x0, y1 - y0
            # Distance from each pixel to the segment: project, clamp to the ends, measure.
            a = np.clip(((xx - x0) * dx + (yy - y0) * dy) / max(dx * dx + dy * dy, 1e-12), 0.0, 1.0)
            ink |= (xx - x0 - a * dx) ** 2 + (yy - y0 - a * dy) ** 2 <= thickness**2
    canvas = np.where(ink, 0, 255).astype(np.uint8)
    return np.repeat(canvas[:, :, None], 3, axis=2)


# Corruptions (an ImageNet-C stand-in): severity 0 is the clean image.
CORRUPTIONS = ("noise", "blur", "pixelate", "contrast")


def corrupt(image: np.ndarray, kind: str, severity: int, levels: int, seed: int) -> np.ndarray:
    """`image` corrupted by `kind` at `severity` in ``0..levels`` (0 = clean; `levels` = unrecognisable)."""
    if severity <= 0:
        return image.copy()
    a = severity / levels
    img = image.astype(np.float32)
    size = image.shape[0]
    if kind == "noise":
        rng = np.random.default_rng([seed, severity])
        img = img + rng.normal(0, 140 * a, img.shape)
    elif kind == "blur":
        img = _box_blur(img, 1 + 2 * int(round(a * size / 6)))
    elif kind == "pixelate":
        block = max(2, int(round(a * size / 4)))
        small = img[::block, ::block]
        img = np.repeat(np.repeat(small, block, 0), block, 1)[:size, :size]
    elif kind == "contrast":
        img = 128 + (img - 128) * (1 - 0.97 * a)
    else:
        raise ValueError(f"unknown corruption {kind!r}; expected one of {', '.join(CORRUPTIONS)}")
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def _box_blur(img: np.ndarray, k: int) -> np.ndarray:
    pad = k // 2
    for axis in (0, 1):
        padded = np.pad(img, [(pad, pad) if i == axis else (0, 0) for i in range(3)], mode="edge")
        c = np.cumsum(padded, axis=axis, dtype=np.float64)
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis=axis)), c], axis=axis)
        n = img.shape[axis]
        img = (np.take(c, np.arange(k, k + n), axis=axis) - np.take(c, np.arange(0, n), axis=axis)) / k
    return img.astype(np.float32)
