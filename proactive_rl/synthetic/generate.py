"""Seeded episode generation and deterministic re-rendering (docs/spec.md §10).

`generate_episodes` builds in-memory `Episode`s (``video=None``) whose ``meta["scene"]`` holds every sprite,
track and event, so `render_frames` redraws the frames from the record alone (a JSON round trip included).
Same task, n, seed and knobs give byte-identical episodes JSON.
"""

from __future__ import annotations

import zlib

import numpy as np

from proactive_eval.episodes import Episode
from proactive_eval.video import sample_times
from proactive_rewards.task_table import get_task
from proactive_rl.synthetic.tasks import GENERATORS, Knobs
from proactive_rl.synthetic.world import BACKGROUND, render

SOURCE = "proactive_rl.synthetic"


def episode_seed(task: str, seed: int, index: int) -> int:
    """The seed of episode `index` of `task` in a run seeded `seed` (stable across processes and versions)."""
    state = np.random.SeedSequence([int(seed), zlib.crc32(task.encode()), int(index)]).generate_state(1)
    return int(state[0])


def generate_episodes(task: str, n: int, seed: int = 0, **knobs) -> list[Episode]:
    """Generate `n` synthetic episodes of one task kind.

    Args:
        task (`str`): one of ``accident, crime, atomic, event_type, compositional, object, intervention, pvqa``.
        n (`int`): how many episodes.
        seed (`int`, *optional*, defaults to `0`): the run seed; episode i uses ``episode_seed(task, seed, i)``.
        **knobs: difficulty knobs of `Knobs` (``size, duration, fps, distractors, speed, event_duration, noise``).

    Returns:
        `list[Episode]` with ``video=None``, ids ``{task}_s{seed}_{i:05d}`` and the scene in ``meta["scene"]``.
    """
    get_task(task)  # an unknown task: the task table's error, listing the tasks
    if task not in GENERATORS:
        raise ValueError(
            f"task {task!r} has no synthetic generator; the synthetic world generates {', '.join(GENERATORS)}"
        )
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    kn = Knobs.from_kwargs(**knobs)
    return [_one(task, i, seed, kn) for i in range(n)]


def _one(task: str, index: int, seed: int, kn: Knobs) -> Episode:
    ep_seed = episode_seed(task, seed, index)
    rng = np.random.default_rng(ep_seed)
    lo, hi = kn.duration
    steps = int(round(int(rng.integers(lo, hi + 1)) * kn.fps))
    scenario = GENERATORS[task](rng, kn, steps)
    scene = {
        "size": kn.size,
        "fps": kn.fps,
        "noise": kn.noise,
        "seed": ep_seed,
        "background": list(BACKGROUND),
        "sprites": scenario.sprites,
    }
    meta = {"source": SOURCE, "seed": ep_seed, "knobs": kn.to_dict(), **scenario.extra, "scene": scene}
    return Episode(
        id=f"{task}_s{seed}_{index:05d}",
        task=task,
        duration=round(steps / kn.fps, 6),
        instruction=scenario.instruction,
        targets=scenario.targets,
        video=None,
        fps=kn.fps,
        meta=meta,
    )


def episode_scene(episode: Episode, action: str) -> dict:
    """The synthetic scene of `episode` (``meta["scene"]``); a clear error naming the episode when it has none."""
    scene = (episode.meta or {}).get("scene")
    if not isinstance(scene, dict) or "sprites" not in scene:
        raise ValueError(f"episode {episode.id!r}: meta has no synthetic scene (field 'meta.scene'); cannot {action}")
    return scene


def render_frames(episode: Episode, fps: float | None = None) -> list[tuple[float, np.ndarray]]:
    """The frames of a synthetic episode at its decision times, as ``(time, H×W×3 uint8)`` pairs.

    Args:
        episode (`Episode`): a generated episode (or one loaded from JSON) with ``meta["scene"]``.
        fps (`float`, *optional*): sampling rate; defaults to the episode's `fps`.
    """
    scene = episode_scene(episode, "render")
    scene_fps = float(scene.get("fps", 1.0))
    out = []
    for t in sample_times(episode.duration, float(fps or episode.fps)):
        step = t * scene_fps
        out.append((t, render(scene, step, frame_index=int(round(step)))))
    return out
