"""Grounding episodes: every frame of a synthetic episode answered with what is on screen (docs/spec.md §10).

A caption is read off the scene record at the frame's time, so it is exact: the visible objects (``red circle``,
sorted by colour then shape), ``near`` for two objects whose centres are closer than twice the sum of their radii
(the distance at which the accident task's warning falls due), and the tank's state (``tank empty`` /
``tank filling`` / ``tank full``). A grounding SFT stage on these dense targets teaches a model trained from scratch
to read its frames before the proactive SFT, whose 1-3 responses per episode do not (the study diary (git show ee8ae2d:benchmarks/RESULTS.md),
"an assistant that sees")::

    >>> from proactive_rl.synthetic import generate_episodes
    >>> ep = generate_episodes("compositional", 1, seed=0, distractors=0)[0]
    >>> grounding_episode(ep).targets[0].text
    'tank empty'
"""

from __future__ import annotations

import dataclasses
import math

from proactive_eval.episodes import Episode
from proactive_eval.video import sample_times
from proactive_rewards import Target, TaskSpec, register_task
from proactive_rewards.task_table import list_tasks
from proactive_rl.synthetic.generate import episode_scene
from proactive_rl.synthetic.world import SCENERY, level, position, visible

GROUNDING_TASK = "caption"
# Free-text content (token-F1 in PRS), no reward: a training and evaluation task of the synthetic world, registered
# when this module is imported (a recipe names it as ``register_tasks: [proactive_rl.synthetic.captions]``).
CAPTION_TASK = TaskSpec(GROUNDING_TASK, content="free_text")
if GROUNDING_TASK not in list_tasks():
    register_task(CAPTION_TASK)
INSTRUCTION = "Say what is on screen at every frame: the objects, which are near each other, and the tank's state."
# Two objects are "near" when their centres are closer than this many times the sum of their radii: at the
# accident task's warning step the ratio is 1.6-2.0 (5th-95th percentile), one step earlier 2.0-2.4.
NEAR = 2.0


def caption(scene: dict, step: float) -> str:
    """What a frame of `scene` at decision step `step` shows, in a few words (``nothing`` for an empty frame)."""
    objects, parts = [], []
    for sprite in scene["sprites"]:
        if not visible(sprite, step):
            continue
        if sprite["shape"] == "bar":
            fill = level(sprite["fill"], step) if "fill" in sprite else 1.0
            parts.append("tank " + ("empty" if fill <= 1e-3 else "full" if fill >= 1 - 1e-3 else "filling"))
        elif sprite["shape"] not in SCENERY:
            objects.append((sprite["color"], sprite["shape"], *position(sprite["track"], step), sprite["radius"]))
    objects.sort()
    words = [f"{c} {s}" for c, s, *_ in objects]
    if any(_near(a, b) for i, a in enumerate(objects) for b in objects[i + 1 :]):
        words.append("near")
    return ", ".join(words + parts) or "nothing"


def _near(a: tuple, b: tuple) -> bool:
    return math.hypot(a[2] - b[2], a[3] - b[3]) < NEAR * (a[4] + b[4])


def grounding_episode(episode: Episode) -> Episode:
    """`episode` with one target per decision frame, its caption, and the grounding instruction (same video)."""
    scene = episode_scene(episode, "caption")
    scene_fps = float(scene.get("fps", 1.0))
    targets = [Target(t, caption(scene, t * scene_fps)) for t in sample_times(episode.duration, episode.fps)]
    return dataclasses.replace(
        episode,
        id=f"{episode.id}_caption",
        task=GROUNDING_TASK,
        instruction=INSTRUCTION,
        targets=targets,
        meta={**episode.meta, "grounded_task": episode.task},
    )
