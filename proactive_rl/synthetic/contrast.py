"""Contrast episodes: another task's video asked the `pvqa` question, so the same frames need other words
(docs/spec.md §10).

A model that learns which words to say from the frames alone (the accident warnings answered with pvqa's
``A black square appears.`` in every response of an episode) has not read its instruction. A contrast episode keeps
an episode's video and asks it the pvqa question instead: each object that comes into view is a turn, answered on
the first decision frame that shows it (objects that enter together on consecutive frames; none on the last frame,
which leaves no reply span), with pvqa's reply span
(``event_duration`` steps) and related span (until it leaves the view). The targets are read off the scene record,
so they are exact: relabelling a pvqa episode's own video gives its generator's targets (tests/rl/test_contrast.py)::

    >>> from proactive_rl.synthetic import generate_episodes
    >>> ep = generate_episodes("accident", 1, seed=0, distractors=0, fps=0.5, max_events=1)[0]
    >>> [t.text for t in pvqa_episode(ep).targets]
    ['A black diamond appears.', 'A yellow circle appears.']
"""

from __future__ import annotations

import dataclasses

from proactive_eval.episodes import Episode
from proactive_eval.video import sample_times
from proactive_rewards import Target
from proactive_rl.synthetic.generate import episode_scene
from proactive_rl.synthetic.tasks.tracking import PVQA_QUESTION, pvqa_answer
from proactive_rl.synthetic.world import SCENERY, position, visible

CONTRAST_TASK = "pvqa"


def in_view(sprite: dict, step: float, size: float) -> bool:
    """Whether any part of `sprite` is inside the ``size×size`` frame at decision step `step`."""
    if not visible(sprite, step):
        return False
    x, y = position(sprite["track"], step)
    r = float(sprite["radius"])
    return x + r > 0 and x - r < size and y + r > 0 and y - r < size


def pvqa_episode(episode: Episode) -> Episode:
    """`episode`'s video with the pvqa question: a turn per object that comes into view (not those at frame 0)."""
    scene = episode_scene(episode, "relabel")
    scene_fps, size = float(scene.get("fps", 1.0)), float(scene["size"])
    times = sample_times(episode.duration, episode.fps)
    reply = float((episode.meta.get("knobs") or {}).get("event_duration", 3)) / scene_fps
    arrivals = []  # (first frame in view, colour, shape, first frame out of view after it)
    for sprite in scene["sprites"]:
        if sprite["shape"] in SCENERY:
            continue
        shown = [in_view(sprite, t * scene_fps, size) for t in times]
        if shown[0] or not any(shown):
            continue
        k = shown.index(True)
        gone = next((j for j in range(k, len(times)) if not shown[j]), None)
        arrivals.append((k, sprite["color"], sprite["shape"], times[gone] if gone is not None else episode.duration))
    targets, free = [], 0
    for first, colour, shape, gone in sorted(arrivals):
        k = max(first, free)  # entering together: one answer per frame
        if k >= len(times) - 1:  # the last frame leaves no reply span (pvqa's own arrivals end a frame earlier)
            break
        free, t = k + 1, times[k]
        targets.append(Target(t, pvqa_answer(colour, shape), (t, min(t + reply, times[-1])), (times[first], gone)))
    return dataclasses.replace(
        episode,
        id=f"{episode.id}_pvqa",
        task=CONTRAST_TASK,
        instruction=PVQA_QUESTION,
        targets=targets,
        user_turns=[],
        meta={**episode.meta, "asked_of": episode.task},
    )
