"""Synthetic streaming tasks: determinism, validity, and targets placed where the evidence is."""

import json

import numpy as np
import pytest

from proactive_eval.episodes import TASKS, Episode, load_episodes, save_episodes
from proactive_eval.streaming import run_episode
from proactive_rewards import prs_score
from proactive_rl.synthetic import OraclePolicy, SilentPolicy, generate_episodes, render_frames
from proactive_rl.synthetic.world import PALETTE

N = 5  # episodes per task in the scoring tests
# The evidence checks run on the defaults and on slow, crowded, short-event, larger frames.
# The demo's world too: long episodes, one decision every 2 s, large objects, no distractors, 1-3 events.
DEMO_KNOBS = {"duration": (30, 90), "fps": 0.5, "scale": 2.0, "distractors": 0, "max_events": 3}
KNOB_SETS = [{}, {"size": 96, "speed": 0.4, "event_duration": 1, "distractors": 4}, DEMO_KNOBS]
KNOB_IDS = ["default", "hard", "demo"]


def test_every_task_kind_has_a_generator():
    from proactive_rl.synthetic import TASK_KINDS

    assert set(TASK_KINDS) == set(TASKS)


@pytest.mark.parametrize("task", TASKS)
def test_same_seed_gives_byte_identical_json(tmp_path, task):
    a, b, c = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "c.json"
    save_episodes(a, generate_episodes(task, 4, seed=11, distractors=3, noise=5.0))
    save_episodes(b, generate_episodes(task, 4, seed=11, distractors=3, noise=5.0))
    save_episodes(c, generate_episodes(task, 4, seed=12, distractors=3, noise=5.0))
    assert a.read_bytes() == b.read_bytes()
    assert a.read_bytes() != c.read_bytes()


@pytest.mark.parametrize("task", TASKS)
def test_episodes_pass_the_validator_and_rerender_from_json(tmp_path, task):
    episodes = generate_episodes(task, 8, seed=3, duration=(10, 120), size=80)
    path = tmp_path / "episodes.json"
    save_episodes(path, episodes)
    loaded = load_episodes(path)  # raises EpisodeError on any invalid record
    assert [e.id for e in loaded] == [e.id for e in episodes]
    for original, again in zip(episodes[:2], loaded[:2]):
        assert 10 <= again.duration <= 120 and again.video is None and again.targets
        assert again.instruction.endswith((".", "?"))
        frames_a, frames_b = render_frames(original), render_frames(again)
        assert len(frames_a) == int(again.duration)  # 1 FPS, t = 0 .. duration - 1
        assert frames_a[0][1].shape == (80, 80, 3) and frames_a[0][1].dtype == np.uint8
        for (ta, fa), (tb, fb) in zip(frames_a, frames_b):
            assert ta == tb and np.array_equal(fa, fb)


@pytest.mark.parametrize("task", TASKS)
def test_oracle_scores_at_least_95_and_silence_scores_0(task):
    episodes = generate_episodes(task, N, seed=5, distractors=2)
    oracle, silent = [], []
    for episode in episodes:
        responses = run_episode(OraclePolicy(), episode, frame_source=render_frames)
        oracle.append(prs_score(responses, episode.targets, mode="B").score)
        quiet = run_episode(SilentPolicy(), episode, frame_source=render_frames)
        silent.append(prs_score(quiet, episode.targets, mode="B").score)
    assert 100 * np.mean(oracle) >= 95
    assert 100 * np.mean(silent) == 0


def test_oracle_answers_on_the_first_step_at_or_after_a_target():
    episode = Episode("e", "atomic", 5.0, "count", targets=[], meta={})
    from proactive_rewards import Target

    episode.targets = [Target(1.5, "1"), Target(1.7, "2"), Target(4.0, "3")]
    oracle = OraclePolicy()
    oracle.reset(episode)
    from proactive_eval.policy import Observation

    said = [oracle.step(Observation("e", k, float(k), [], "count")) for k in range(5)]
    # 1.5 and 1.7 both fall before step 2: one reply per step, so "2" waits for step 3.
    assert said == ["</Silence>", "</Silence>", "</Response> 1", "</Response> 2", "</Response> 3"]


# --- the evidence is visible at the target time, checked on the pixels (not on the generator's state) ------


def colour_pixels(frame: np.ndarray, name: str) -> np.ndarray:
    return np.all(frame == np.array(PALETTE[name], dtype=np.uint8), axis=-1)


def frames_by_time(episode):
    """Frames by decision step (``time × fps``), so that ``frames[t - 1]`` is the previous decision at any fps."""
    return {step(episode, t): f for t, f in render_frames(episode)}


def step(episode, time: float) -> int:
    return int(round(time * episode.fps))


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=KNOB_IDS)
def test_atomic_counted_object_appears_at_each_target(knobs):
    for episode in generate_episodes("atomic", 6, seed=2, **knobs):
        colour = episode.instruction.split(" a ")[1].split()[0]
        frames = frames_by_time(episode)
        for k, tgt in enumerate(episode.targets, 1):
            t = step(episode, tgt.time)
            assert tgt.text == str(k)
            new = colour_pixels(frames[t], colour) & ~colour_pixels(frames[t - 1], colour)
            assert new.sum() >= 10, (episode.id, t)


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=KNOB_IDS)
def test_object_leaves_through_the_named_side_at_the_target(knobs):
    for episode in generate_episodes("object", 6, seed=2, **knobs):
        colour = episode.meta["tracked"].split()[0]
        (tgt,) = episode.targets
        frames = frames_by_time(episode)
        t = step(episode, tgt.time)
        before, at = colour_pixels(frames[t - 1], colour), colour_pixels(frames[t], colour)
        assert at.sum() == 0 and before.sum() > 0, episode.id
        ys, xs = np.nonzero(before)
        size = before.shape[0]
        touches = {
            "left": xs.min() == 0,
            "right": xs.max() == size - 1,
            "top": ys.min() == 0,
            "bottom": ys.max() == size - 1,
        }
        assert touches[tgt.text], (episode.id, tgt.text)


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=KNOB_IDS)
def test_compositional_start_is_first_water_and_end_is_full_tank(knobs):
    for episode in generate_episodes("compositional", 6, seed=2, **knobs):
        frames = frames_by_time(episode)
        water = {t: colour_pixels(f, "blue").sum() for t, f in frames.items()}
        full = max(water.values())
        for tgt in episode.targets:
            t = step(episode, tgt.time)
            if tgt.text == "start":
                assert water[t - 1] == 0 < water[t], (episode.id, t)
            else:
                assert water[t - 1] < water[t] == full, (episode.id, t)


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=KNOB_IDS)
def test_accident_warning_comes_before_contact_while_converging(knobs):
    for episode in generate_episodes("accident", 6, seed=2, **knobs):
        frames = frames_by_time(episode)
        meta = episode.meta
        # one collision by default; with max_events, one (contact, vehicles) per Warning target
        contacts = meta["contacts"] if "contacts" in meta else [meta["contact"]]
        pairs = meta["vehicles"] if "contacts" in meta else [meta["vehicles"]]
        assert len(episode.targets) == len(contacts) == len(pairs) >= 1
        for tgt, contact, vehicles in zip(episode.targets, contacts, pairs):
            ca, cb = (v.split()[0] for v in vehicles)

            def gap(t, frames=frames, ca=ca, cb=cb):
                a, b = np.argwhere(colour_pixels(frames[t], ca)), np.argwhere(colour_pixels(frames[t], cb))
                return np.min(np.abs(a[:, None, :] - b[None, :, :]).max(-1))  # Chebyshev distance between blobs

            t = step(episode, tgt.time)
            assert tgt.text == "Warning" and contact > t and gap(t) > 1, episode.id
            hidden = not all(colour_pixels(frames[contact], c).any() for c in (ca, cb))  # one drawn over the other
            assert hidden or gap(contact) <= 1, episode.id
            both_earlier = t > 0 and all(colour_pixels(frames[t - 1], c).any() for c in (ca, cb))
            assert not both_earlier or gap(t) <= gap(t - 1), episode.id  # converging (or entering from off-screen)


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=KNOB_IDS)
def test_crime_warning_when_the_package_starts_moving(knobs):
    for episode in generate_episodes("crime", 6, seed=2, **knobs):
        frames = frames_by_time(episode)
        (tgt,) = episode.targets
        t = step(episode, tgt.time)
        centre = {k: np.argwhere(colour_pixels(frames[k], "yellow")).mean(0) for k in (0, t - 1, t)}
        assert np.allclose(centre[0], centre[t - 1], atol=0.6), episode.id
        assert np.abs(centre[t] - centre[t - 1]).max() >= 1.0, episode.id


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=KNOB_IDS)
def test_intervention_target_when_the_wrong_square_lands(knobs):
    for episode in generate_episodes("intervention", 6, seed=2, **knobs):
        slot, colour = episode.meta["mistake"]
        (tgt,) = episode.targets
        assert tgt.window is not None and tgt.window[0] == tgt.time
        assert colour in tgt.text and episode.meta["plan"][slot] in tgt.text
        frames = frames_by_time(episode)
        t = step(episode, tgt.time)
        assert colour_pixels(frames[t - 1], colour).sum() == 0 < colour_pixels(frames[t], colour).sum()


@pytest.mark.parametrize("knobs", KNOB_SETS, ids=KNOB_IDS)
def test_event_type_and_pvqa_targets_fall_on_a_visible_change(knobs):
    for task in ("event_type", "pvqa"):
        for episode in generate_episodes(task, 6, seed=2, **knobs):
            frames = frames_by_time(episode)
            for tgt in episode.targets:
                t = step(episode, tgt.time)
                assert not np.array_equal(frames[t], frames[t - 1]), (episode.id, t)
    for episode in generate_episodes("pvqa", 6, seed=2, **knobs):
        assert episode.meta["question"] == episode.instruction
        for tgt in episode.targets:
            assert tgt.window[0] == tgt.time and tgt.related[0] == tgt.time and tgt.window[1] <= tgt.related[1]


def test_knobs_are_validated_with_the_valid_names():
    with pytest.raises(TypeError, match="distractors"):
        generate_episodes("atomic", 1, seed=0, distracters=3)
    with pytest.raises(ValueError, match="accident"):
        generate_episodes("nope", 1)
    with pytest.raises(ValueError, match="duration"):
        generate_episodes("atomic", 1, duration=(5, 8))


def test_noise_knob_changes_pixels_deterministically():
    clean = render_frames(generate_episodes("object", 1, seed=4)[0])
    noisy = render_frames(generate_episodes("object", 1, seed=4, noise=8.0)[0])
    again = render_frames(generate_episodes("object", 1, seed=4, noise=8.0)[0])
    assert not np.array_equal(clean[3][1], noisy[3][1])
    assert all(np.array_equal(a[1], b[1]) for a, b in zip(noisy, again))
    assert (
        json.loads(json.dumps(generate_episodes("object", 1, seed=4, noise=8.0)[0].to_dict()))["meta"]["knobs"][
            "noise"
        ]
        == 8.0
    )


def test_max_events_caps_counted_events_and_fill_cycles_and_reaches_each_count():
    for task, per_event in (("atomic", 1), ("compositional", 2)):
        capped = {len(e.targets) // per_event for e in generate_episodes(task, 40, seed=3, **DEMO_KNOBS)}
        assert capped == {1, 2, 3}, (task, capped)
        free = {len(e.targets) // per_event for e in generate_episodes(task, 40, seed=3, duration=(60, 90))}
        assert max(free) > 3, (task, free)  # without the cap, long episodes hold more


def test_scale_knob_draws_larger_objects_and_keeps_them_in_the_frame():
    for scale in (1.0, 2.0):
        episodes = generate_episodes("atomic", 8, seed=5, distractors=0, scale=scale)
        radii = [s["radius"] for e in episodes for s in e.meta["scene"]["sprites"]]
        assert 4.0 * scale <= min(radii) and max(radii) <= 6.0 * scale, (scale, radii)
        for episode in episodes:
            frame = dict(render_frames(episode))[episode.targets[0].time]
            colour = episode.instruction.split(" a ")[1].split()[0]
            assert colour_pixels(frame, colour).sum() >= 0.8 * np.pi * (4.0 * scale) ** 2 / 2  # not cut off
    with pytest.raises(ValueError, match="scale"):
        generate_episodes("atomic", 1, scale=10.0)
    with pytest.raises(ValueError, match="max_events"):
        generate_episodes("atomic", 1, max_events=-1)


def test_accident_contact_is_spread_over_the_whole_episode():
    episodes = generate_episodes("accident", 60, seed=1, **DEMO_KNOBS)
    assert {len(e.targets) for e in episodes} == {1, 2, 3}
    position = [t.time / e.duration for e in episodes for t in e.targets]
    # uniform over the episode: every third of it holds some of the warnings (none before the vehicles can show)
    thirds = {min(2, int(p * 3)) for p in position}
    assert thirds == {0, 1, 2}, sorted(position)
