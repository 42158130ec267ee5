"""Contrast episodes (proactive_rl.synthetic.contrast): the pvqa question asked of another task's video."""

from __future__ import annotations

import pytest

from proactive_eval.episodes import Episode, load_episodes, save_episodes
from proactive_rl.synthetic import generate_episodes
from proactive_rl.synthetic.contrast import in_view, pvqa_episode
from proactive_rl.synthetic.world import sprite

DEMO_KNOBS = {"duration": [30, 90], "fps": 0.5, "scale": 2.0, "distractors": 0, "max_events": 3, "speed": 2.5}


def test_relabelling_pvqa_videos_gives_the_generators_targets():
    # independent reference: the pvqa generator writes its targets from the times it draws, not from the frames
    episodes = generate_episodes("pvqa", 20, seed=4, **DEMO_KNOBS)
    assert sum(len(e.targets) for e in episodes) > 20
    for ep in episodes:
        relabelled = pvqa_episode(ep)
        assert relabelled.targets == ep.targets, ep.id
        assert relabelled.instruction == ep.instruction


def test_accident_vehicles_are_each_named_once_when_they_come_into_view(tmp_path):
    episodes = generate_episodes("accident", 10, seed=1, **DEMO_KNOBS)
    for ep in episodes:
        contrast = pvqa_episode(ep)
        assert contrast.task == "pvqa" and contrast.meta["asked_of"] == "accident" and contrast.id == f"{ep.id}_pvqa"
        scene = ep.meta["scene"]
        at_start = {f"{s['color']} {s['shape']}" for s in scene["sprites"] if in_view(s, 0, scene["size"])}
        vehicles = {v for pair in ep.meta["vehicles"] for v in pair} - at_start
        named = [t.text.split(" ", 1)[1].removesuffix(" appears.") for t in contrast.targets]
        assert sorted(named) == sorted(vehicles), ep.id
        times = [t.time for t in contrast.targets]
        assert times == sorted(set(times))
        assert all(t.window[0] == t.time <= t.window[1] <= ep.duration for t in contrast.targets)
    save_episodes(tmp_path / "episodes.pvqa_contrast.json", [pvqa_episode(e) for e in episodes])
    assert [e.targets for e in load_episodes(tmp_path / "episodes.pvqa_contrast.json")] == [
        pvqa_episode(e).targets for e in episodes
    ]


@pytest.mark.parametrize("task", ["accident", "atomic", "compositional"])
def test_contrast_episodes_of_every_demo_task_are_valid_records(task, tmp_path):
    # the loader validates every window (start < end, inside the episode): what the SFT stage reads
    episodes = [pvqa_episode(e) for e in generate_episodes(task, 100, seed=0, **DEMO_KNOBS)]
    save_episodes(tmp_path / "contrast.json", episodes)
    assert [e.targets for e in load_episodes(tmp_path / "contrast.json")] == [e.targets for e in episodes]


def test_objects_entering_together_are_answered_on_consecutive_frames():
    # both enter from the left edge at step 2 (radius 4: in view once the centre passes x = -4); one leaves at step 6
    red = sprite("square", "red", 4, [[0, -20, 20], [2, -2, 20], [10, 30, 20]])
    blue = sprite("circle", "blue", 4, [[0, -20, 40], [2, -2, 40], [10, 30, 40]], span=[0, 6])
    here = sprite("diamond", "green", 4, [[0, 30, 30]])  # in view at frame 0: not new
    scene = {"size": 64, "fps": 1.0, "sprites": [red, blue, here]}
    ep = Episode(
        id="tie", task="accident", duration=10.0, fps=1.0, instruction="watch", targets=[], meta={"scene": scene}
    )
    targets = pvqa_episode(ep).targets
    assert [(t.time, t.text) for t in targets] == [(2.0, "A blue circle appears."), (3.0, "A red square appears.")]
    assert [t.window for t in targets] == [(2.0, 5.0), (3.0, 6.0)]
    assert [t.related for t in targets] == [(2.0, 6.0), (2.0, 10.0)]


def test_an_object_that_arrives_on_the_last_frame_is_not_a_turn():
    late = sprite("square", "red", 4, [[0, 30, 30]], span=[9, 10])  # in view from step 9, the last of 10 frames
    early = sprite("circle", "blue", 4, [[0, 30, 30]], span=[8, 10])
    scene = {"size": 64, "fps": 1.0, "sprites": [late, early]}
    ep = Episode(
        id="late", task="atomic", duration=10.0, fps=1.0, instruction="count", targets=[], meta={"scene": scene}
    )
    assert [(t.time, t.window, t.text) for t in pvqa_episode(ep).targets] == [
        (8.0, (8.0, 9.0), "A blue circle appears.")
    ]


def test_an_episode_without_a_scene_is_a_clear_error():
    ep = Episode(id="real_clip", task="accident", duration=10.0, fps=1.0, instruction="watch", targets=[], meta={})
    with pytest.raises(ValueError, match=r"'real_clip'.*meta\.scene"):
        pvqa_episode(ep)
