"""The image-blind MCQA policy and the swapped-images environment (docs/spec.md §14), on hand-made environments."""

import numpy as np
import pytest

from proactive_eval.benchmarks.proactivebench.blind import SwappedEnvironment, blind_mcqa_summary
from proactive_eval.benchmarks.proactivebench.environments import run_environment
from proactive_eval.benchmarks.proactivebench.metric import classify_answer
from proactive_eval.benchmarks.proactivebench.types import MCQAObservation, StepResult


class Toy:
    """Options "Move the camera." (a valid suggestion until the last step) then two categories; with
    ``needs_move`` a category is only correct after one move. Each step shows an image of value ``shade + step``."""

    max_steps = 3

    def __init__(self, env_id, answer, needs_move=False, shade=0, dataset="TOY"):
        self.id, self.answer, self.needs_move, self.shade, self.dataset = env_id, answer, needs_move, shade, dataset
        self.categories = ["cat", "dog"]

    def reset(self):
        self.turns = 0
        return self._observe()

    def _observe(self):
        valid = ["Move the camera."] if self.turns + 1 < self.max_steps else []
        image = np.full((2, 2, 3), self.shade + self.turns, np.uint8)
        return MCQAObservation(image, "What is it?", ["Move the camera.", *self.categories], valid, self.turns)

    def step(self, answer):
        valid = self._observe().valid_actions
        category = self.answer if (self.turns > 0 or not self.needs_move) else None
        outcome, _ = classify_answer(answer, ["Move the camera."], valid, self.categories, category)
        self.turns += 1
        done = outcome != "proactive" or self.turns >= self.max_steps
        return StepResult(None if done else self._observe(), outcome, done)


def test_blind_policy_is_the_most_common_answer_hand_computed():
    envs = [Toy("c1", "cat"), Toy("c2", "cat"), Toy("c3", "cat"), Toy("d1", "dog")]
    fitted = blind_mcqa_summary(envs, reference=envs)
    assert fitted["policies"]["TOY"]["suggestions"] == 0 and fitted["policies"]["TOY"]["answer"] == "B."  # "cat"
    assert fitted["acc"] == 75.0 and fitted["ps"] == 0.0
    # leave-one-out: without a cat env the rest still say cat (right on it); without the dog env, cat (wrong)
    assert blind_mcqa_summary(envs)["acc"] == 75.0
    assert blind_mcqa_summary([Toy("c1", "cat"), Toy("d1", "dog")])["acc"] == 0.0  # each fit picks the other's


def test_blind_policy_suggests_first_when_a_category_needs_a_move():
    envs = [Toy(f"c{i}", "cat", needs_move=True) for i in range(3)]
    blind = blind_mcqa_summary(envs, reference=envs)
    policy = blind["policies"]["TOY"]
    assert (policy["suggestions"], policy["suggestion"], policy["answer"]) == (1, "Move the camera.", "B.")
    assert blind["acc"] == 100.0 and blind["ps"] == 1.0  # two turns each: ps = turns - 1


def test_swapped_environment_changes_the_images_only():
    env, partner = Toy("a", "cat", shade=100), Toy("b", "dog", shade=200)
    shown = []

    def policy(observation):
        shown.append((observation.image[0, 0, 0], observation.options, observation.prompt))
        return "Move the camera." if observation.step == 0 else "cat"

    outcome = run_environment(SwappedEnvironment(env, partner), policy)
    assert outcome.success and outcome.answers == ["Move the camera.", "cat"]  # env's own MDP and answer
    assert [s[0] for s in shown] == [200, 201]  # the partner's images, moved along with the suggestion
    assert all(s[1] == ["Move the camera.", "cat", "dog"] and s[2] == "What is it?" for s in shown)


@pytest.mark.parametrize("needs_move", [False, True])
def test_blind_row_equals_playing_the_policy(needs_move):
    envs = [Toy("c1", "cat", needs_move), Toy("c2", "dog", needs_move), Toy("c3", "cat", needs_move)]
    blind = blind_mcqa_summary(envs, reference=envs)
    policy = blind["policies"]["TOY"]

    def play(observation):
        return policy["suggestion"] if observation.step < policy["suggestions"] else policy["answer"]

    outcomes = [run_environment(Toy(e.id, e.answer, needs_move), play) for e in envs]
    assert blind["acc"] == pytest.approx(100 * sum(o.success for o in outcomes) / 3)
    assert blind["ps"] == pytest.approx(sum(o.turns - 1 for o in outcomes) / 3)
