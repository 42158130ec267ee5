"""The decision frames of an episode (docs/spec.md §1): one ``(time, RGB array)`` per sampled step."""

from __future__ import annotations

import numpy as np

from proactive_eval.episodes import Episode
from proactive_eval.video import iter_frames
from proactive_rl.synthetic import render_frames


def frames_of(episode: Episode) -> list[tuple[float, np.ndarray]]:
    """Frames of an episode: drawn for in-memory synthetic episodes (no ``video``), decoded from its video otherwise."""
    if episode.video is None:
        return render_frames(episode)
    return list(iter_frames(episode))
