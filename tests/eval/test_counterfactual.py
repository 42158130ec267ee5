"""Frame counterfactuals (docs/spec.md §14): ``swap`` changes the frames and nothing else, a policy that reads
its pixels answers differently under it and a constant one does not (vision gain 0)."""

import numpy as np
import pytest

from proactive_eval import Episode
from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.common.counterfactual import (
    NoPartner,
    aligned_frames,
    counterfactual_id,
    counterfactual_source,
    split_counterfactual_id,
    swap_partners,
)
from proactive_eval.episodes import UserTurn
from proactive_eval.policy import Observation
from proactive_eval.streaming import run_episode
from proactive_rewards import Target

BRIGHTNESS = {"a": 200, "b": 20}


def frames(episode):
    """1 fps frames whose pixels say which episode they are from (brightness) and when (a time channel)."""
    out = []
    for t in np.arange(0.0, episode.duration + 1e-9, 1.0):
        frame = np.full((4, 4, 3), BRIGHTNESS[episode.id], np.uint8)
        frame[..., 2] = int(t)
        out.append((float(t), frame))
    return out


def episodes():
    a = Episode(
        "a",
        "accident",
        10.0,
        "warn me",
        [Target(0.0, "bright")],
        user_turns=[UserTurn(3.0, "still there?")],
        meta={"question": "q"},
    )
    b = Episode("b", "accident", 6.0, "warn me too", [Target(0.0, "dark")])
    return [a, b]


class Recorder:
    """Logs every observation; says "bright" / "dark" from the first frame's mean pixel (``looks=True``) or
    always "bright"."""

    def __init__(self, looks: bool):
        self.looks, self.log = looks, []

    def reset(self, episode):
        pass

    def step(self, observation: Observation) -> str:
        self.log.append(observation)
        if observation.step != 0:
            return "</Silence>"
        bright = observation.frames[0][..., 0].mean() > 127
        return "</Response> " + ("bright" if bright or not self.looks else "dark")


def test_swap_pairs_within_the_task_deterministically_and_never_with_itself():
    items = [Episode(f"e{i}", "atomic", 5.0, "x", []) for i in range(7)] + [Episode("solo", "crime", 5.0, "x", [])]
    partners = swap_partners(items, seed=0)
    assert partners == swap_partners(items, seed=0)
    assert "solo" not in partners  # alone in its task
    assert all(k != v for k, v in partners.items())
    assert sorted(partners.values()) == sorted(partners)  # a permutation of the task's episodes
    with pytest.raises(NoPartner):
        counterfactual_source("swap", items, frames)(items[-1])


def test_swap_changes_the_frames_and_nothing_else():
    eps = episodes()
    own, swapped = Recorder(looks=True), Recorder(looks=True)
    source = counterfactual_source("swap", eps, frames)
    for episode in eps:
        run_episode(own, episode, frame_source=frames)
        run_episode(swapped, episode, frame_source=source)
    assert len(own.log) == len(swapped.log) == 11 + 7
    for o, s in zip(own.log, swapped.log):
        assert (o.episode_id, o.step, o.time, o.instruction, o.user_text, o.meta) == (
            s.episode_id,
            s.step,
            s.time,
            s.instruction,
            s.user_text,
            s.meta,
        )
        partner = "b" if o.episode_id == "a" else "a"
        assert s.frames[0][0, 0, 0] == BRIGHTNESS[partner]
        # time-aligned, padded with the partner's last frame (b is 6 s long, a 10 s), cut at the episode's end
        assert s.frames[0][0, 0, 2] == min(int(o.time), 6 if partner == "b" else 10)
    assert [t.text for t in eps[0].targets] == ["bright"]  # the episodes themselves are untouched


def test_freeze_repeats_the_first_frame():
    eps = episodes()
    policy = Recorder(looks=True)
    run_episode(policy, eps[0], frame_source=counterfactual_source("freeze", eps, frames))
    assert [o.time for o in policy.log] == [float(t) for t in range(11)]
    assert all(o.frames[0][0, 0, 2] == 0 for o in policy.log)


@pytest.mark.parametrize("looks, gain", [(True, 100.0), (False, 0.0)])
def test_a_policy_that_reads_pixels_loses_its_score_under_swap_a_constant_one_does_not(looks, gain):
    eps = episodes()
    source = counterfactual_source("swap", eps, frames)
    own = {e.id: run_episode(Recorder(looks), e, frame_source=frames) for e in eps}
    swap = {e.id: run_episode(Recorder(looks), e, frame_source=source) for e in eps}
    if looks:
        assert [r.text for r in own["a"]] == ["bright"] and [r.text for r in swap["a"]] == ["dark"]
    else:
        assert own == swap
    prs_b = score_prs(eps, own).summary()["overall"]["prs_b"]
    prs_b_swap = score_prs(eps, swap).summary()["overall"]["prs_b"]
    assert prs_b - prs_b_swap == pytest.approx(gain)


def test_aligned_frames_and_ids():
    assert aligned_frames([0.5, 2.0], [(1.0, "x"), (2.0, "y")]) == [(0.5, "x"), (2.0, "y")]
    assert split_counterfactual_id(counterfactual_id("ep#1", "swap")) == ("ep#1", "swap")
    assert split_counterfactual_id("ep#1") == ("ep#1", None)
