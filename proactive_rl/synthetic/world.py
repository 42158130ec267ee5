"""The embedded visual world: coloured shapes moving on a plain background, rendered with numpy.

A scene is plain JSON (it lives in ``episode.meta["scene"]``), so an episode re-renders byte for byte
from its record alone::

    {"size": 64, "background": [235, 235, 235], "noise": 0.0, "seed": 7,
     "sprites": [{"shape": "circle", "color": "red", "radius": 5,
                  "track": [[0, 10, 32], [20, 54, 32]],   # [time, x, y] keyframes, linear in between
                  "span": [0, 40],                        # visible for span[0] <= t < span[1]
                  "flash": [[12, 14]],                    # drawn white inside these intervals
                  "fill": [[5, 0.0], [15, 1.0]]}]}        # bars only: fill level keyframes

Sprites are drawn in list order (later ones on top). Pixel noise is Gaussian with standard deviation
``noise`` (in 0-255 units), drawn from ``default_rng([seed, frame_index])`` so any single frame can be
rendered alone.
"""

from __future__ import annotations

import numpy as np

# Named colours: the vocabulary of instructions and answers.
PALETTE: dict[str, tuple[int, int, int]] = {
    "red": (220, 40, 40),
    "green": (40, 170, 60),
    "blue": (40, 80, 220),
    "yellow": (230, 200, 20),
    "purple": (150, 60, 190),
    "orange": (245, 130, 20),
    "cyan": (20, 190, 210),
    "black": (20, 20, 20),
}
FLASH = (255, 255, 255)
BACKGROUND = (235, 235, 235)
SHAPES = ("circle", "square", "triangle", "diamond")
# Shapes used as scenery rather than characters.
SCENERY = ("ring", "bar", "board")


def position(track: list, t: float) -> tuple[float, float]:
    """Linear interpolation of ``[time, x, y]`` keyframes at `t` (held constant outside them)."""
    if t <= track[0][0]:
        return float(track[0][1]), float(track[0][2])
    for (t0, x0, y0), (t1, x1, y1) in zip(track, track[1:]):
        if t <= t1:
            a = 0.0 if t1 == t0 else (t - t0) / (t1 - t0)
            return x0 + a * (x1 - x0), y0 + a * (y1 - y0)
    return float(track[-1][1]), float(track[-1][2])


def level(keys: list, t: float) -> float:
    """Linear interpolation of ``[time, value]`` keyframes at `t` (held constant outside them)."""
    if t <= keys[0][0]:
        return float(keys[0][1])
    for (t0, v0), (t1, v1) in zip(keys, keys[1:]):
        if t <= t1:
            return v0 + (0.0 if t1 == t0 else (t - t0) / (t1 - t0)) * (v1 - v0)
    return float(keys[-1][1])


def visible(sprite: dict, t: float) -> bool:
    span = sprite.get("span")
    return span is None or span[0] <= t < span[1]


def shape_mask(shape: str, cx: float, cy: float, radius: float, size: int, yy=None, xx=None) -> np.ndarray:
    """Boolean ``size×size`` mask of a shape centred at ``(cx, cy)`` with half-extent `radius` pixels."""
    if yy is None:
        yy, xx = np.mgrid[0:size, 0:size]
    dx, dy = xx + 0.5 - cx, yy + 0.5 - cy
    if shape == "circle":
        return dx * dx + dy * dy <= radius * radius
    if shape == "square":
        return (np.abs(dx) <= radius) & (np.abs(dy) <= radius)
    if shape == "diamond":
        return np.abs(dx) + np.abs(dy) <= radius
    if shape == "triangle":  # pointing up: apex at the top, base at the bottom
        inside_rows = (dy >= -radius) & (dy <= radius)
        half_width = (dy + radius) / 2.0
        return inside_rows & (np.abs(dx) <= half_width)
    if shape == "ring":
        d2 = dx * dx + dy * dy
        return (d2 <= radius * radius) & (d2 >= (radius - 1.5) ** 2)
    raise ValueError(f"unknown shape {shape!r}; expected one of {', '.join(SHAPES + SCENERY)}")


def rgb(color) -> np.ndarray:
    """A palette name or an ``[r, g, b]`` triple as a uint8 array."""
    if isinstance(color, str):
        if color not in PALETTE:
            raise ValueError(f"unknown colour {color!r}; expected one of {', '.join(PALETTE)}")
        return np.array(PALETTE[color], dtype=np.uint8)
    return np.array(color, dtype=np.uint8)


def render(scene: dict, t: float, frame_index: int = 0) -> np.ndarray:
    """Render `scene` at time `t` as a ``size×size×3`` uint8 frame (deterministic)."""
    size = int(scene["size"])
    frame = np.empty((size, size, 3), dtype=np.uint8)
    frame[:] = np.array(scene.get("background", BACKGROUND), dtype=np.uint8)
    yy, xx = np.mgrid[0:size, 0:size]
    for sprite in scene["sprites"]:
        if not visible(sprite, t):
            continue
        x, y = position(sprite["track"], t)
        flashing = any(a <= t < b for a, b in sprite.get("flash", ()))
        color = np.array(FLASH, dtype=np.uint8) if flashing else rgb(sprite["color"])
        shape = sprite["shape"]
        if shape in ("bar", "board"):
            w, h = sprite["width"], sprite["height"]
            fill = level(sprite["fill"], t) if "fill" in sprite else 1.0
            x0 = x - w / 2.0
            mask = (xx + 0.5 >= x0) & (xx + 0.5 < x0 + w * fill) & (np.abs(yy + 0.5 - y) <= h / 2.0)
            if shape == "bar":  # a bar also shows its empty outline, so "not started" is visible
                outline = (np.abs(yy + 0.5 - y) <= h / 2.0 + 1) & (xx + 0.5 >= x0 - 1) & (xx + 0.5 <= x0 + w + 1)
                frame[outline & ~((np.abs(yy + 0.5 - y) <= h / 2.0) & (xx + 0.5 >= x0) & (xx + 0.5 <= x0 + w))] = 90
        else:
            mask = shape_mask(shape, x, y, sprite["radius"], size, yy, xx)
        frame[mask] = color
    noise = float(scene.get("noise", 0.0))
    if noise > 0:
        rng = np.random.default_rng([int(scene.get("seed", 0)), int(frame_index)])
        noisy = frame.astype(np.float32) + rng.normal(0.0, noise, frame.shape).astype(np.float32)
        frame = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
    return frame


def sprite(shape: str, color, radius: float, track: list, span=None, **extra) -> dict:
    """A sprite record (see the module docstring); coordinates rounded so the JSON stays short and stable."""
    record = {"shape": shape, "color": color, "radius": round(float(radius), 2)}
    record["track"] = [[round(float(v), 3) for v in key] for key in track]
    if span is not None:
        record["span"] = [round(float(span[0]), 3), round(float(span[1]), 3)]
    record.update(extra)
    return record
