"""Grounding captions (proactive_rl.synthetic.captions): hand-built scenes with known answers, and the episodes."""

from __future__ import annotations

import pytest

from proactive_eval.episodes import load_episodes, save_episodes
from proactive_eval.video import sample_times
from proactive_rl.synthetic import generate_episodes
from proactive_rl.synthetic.captions import GROUNDING_TASK, caption, grounding_episode
from proactive_rl.synthetic.world import sprite


def _scene(*sprites):
    return {"size": 64, "fps": 1.0, "sprites": list(sprites)}


def test_objects_are_listed_by_colour_then_shape_and_only_while_visible():
    scene = _scene(
        sprite("square", "red", 4, [[0, 10, 10]]),
        sprite("circle", "blue", 4, [[0, 50, 50]], span=[2, 5]),
        sprite("circle", "red", 4, [[0, 50, 10]]),
    )
    assert caption(scene, 0) == "red circle, red square"
    assert caption(scene, 2) == "blue circle, red circle, red square"
    assert caption(scene, 5) == "red circle, red square"
    assert caption(_scene(), 0) == "nothing"


def test_near_is_centre_distance_under_twice_the_radii():
    # radii 4 + 5 = 9: near below 18 px between centres. One object moves 1 px per step towards the other from 30 px.
    scene = _scene(sprite("circle", "red", 4, [[0, 10, 30]]), sprite("square", "blue", 5, [[0, 40, 30], [30, 10, 30]]))
    assert caption(scene, 12) == "blue square, red circle"  # 18 px apart: not yet
    assert caption(scene, 12.5) == "blue square, red circle, near"  # 17.5 px


def test_the_tank_is_empty_then_filling_then_full():
    bar = sprite("bar", "blue", 0, [[0, 32, 54]], width=48, height=8, fill=[[0, 0.0], [2, 0.0], [6, 1.0]])
    scene = _scene(bar)
    assert [caption(scene, s) for s in (0, 2, 3, 5.9, 6, 9)] == [
        "tank empty",
        "tank empty",
        "tank filling",
        "tank filling",
        "tank full",
        "tank full",
    ]


@pytest.mark.parametrize("task", ["accident", "atomic", "compositional"])
def test_a_grounding_episode_answers_every_frame_and_round_trips(task, tmp_path):
    ep = generate_episodes(task, 1, seed=3, duration=[30, 40], fps=0.5, scale=2.0, distractors=0, max_events=3)[0]
    grounded = grounding_episode(ep)
    assert grounded.task == GROUNDING_TASK and grounded.meta["grounded_task"] == task
    assert [t.time for t in grounded.targets] == sample_times(ep.duration, ep.fps)
    scene = ep.meta["scene"]
    assert [t.text for t in grounded.targets] == [caption(scene, t * 0.5) for t in sample_times(ep.duration, 0.5)]
    path = tmp_path / "episodes.caption.json"
    save_episodes(path, [grounded])
    assert load_episodes(path)[0].targets == grounded.targets


def test_an_episode_without_a_scene_is_named():
    ep = generate_episodes("atomic", 1, seed=0)[0]
    ep.meta = {}
    with pytest.raises(ValueError, match="atomic_s0_00000.*meta.scene"):
        grounding_episode(ep)
