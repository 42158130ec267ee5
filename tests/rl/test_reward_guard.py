"""The reward guard: a failing reward is named and never broadcast; "skip" logs an error rate and skips groups."""

import math

import numpy as np
import pytest

from proactive_rl.grpo.reward_guard import GuardedReward, RewardError, check_output, guard_rewards


def named(fn, name):
    fn.__name__ = name
    return fn


def good(completions, **kw):
    return [float(len(c)) for c in completions]


def test_good_reward_passes_through_and_keeps_its_name():
    guarded = GuardedReward(named(good, "length"))
    assert guarded.__name__ == "length"
    assert guarded(completions=["a", "bcd"], prompts=["p", "p"]) == [1.0, 3.0]
    assert guarded(completions=["a", "b"])  # keyword-only call, as TRL makes it


def test_none_is_allowed_and_numpy_vectors_are_accepted():
    assert GuardedReward(named(lambda completions, **k: [None, 0.5], "r"))(completions=["a", "b"]) == [None, 0.5]
    out = GuardedReward(named(lambda completions, **k: np.array([0.0, 1.0]), "r"))(completions=["a", "b"])
    assert out == [0.0, 1.0]


def test_raising_reward_names_itself_and_chains_the_cause():
    def boom(completions, **kw):
        raise KeyError("options")

    with pytest.raises(RewardError, match=r"reward 'my_reward' raised KeyError: 'options' \(on a batch of 2") as info:
        GuardedReward(named(boom, "my_reward"))(completions=["A", "B"])
    assert isinstance(info.value.__cause__, KeyError)


@pytest.mark.parametrize(
    "output, message",
    [
        (1.0, r"returned float 1.0; expected a list with one float .* never broadcast"),
        (np.float64(0.5), r"returned an array of shape \(\); expected one value per completion \(3\)"),
        ({"overall": 1.0}, r"returned dict"),
        ("1.0", r"returned str"),
        ([1.0, 0.0], r"returned 2 values for 3 completions"),
        ([1.0, 0.0, 0.0, 1.0], r"returned 4 values for 3 completions"),
        ([1.0, "x", 0.0], r"returned str 'x' for completion 1"),
        ([1.0, {"overall": 1}, 0.0], r"returned dict .* for completion 1"),
        ([1.0, 0.0, math.nan], r"returned a non-finite value \(nan\) for completion 2"),
        (np.ones((3, 1)), r"returned an array of shape \(3, 1\)"),
    ],
)
def test_wrong_outputs_are_errors_naming_the_reward(output, message):
    guarded = GuardedReward(named(lambda completions, **k: output, "suggestion"))
    with pytest.raises(RewardError, match=r"reward 'suggestion' " + message):
        guarded(completions=["A", "B", "C"])


def test_check_output_accepts_ints():
    assert check_output("r", [1, 0, None], 3) == [1.0, 0.0, None]


def test_skip_mode_skips_whole_groups_and_logs_the_error_rate():
    # 3 groups of 2 completions; the reward fails on any batch containing "boom" (group 1).
    calls = []

    def picky(completions, options, **kw):
        calls.append(list(completions))
        if "boom" in completions:
            raise ValueError("cannot parse")
        return [1.0 if c == "A" else 0.0 for c in completions]

    logged = []
    guarded = GuardedReward(named(picky, "picky"), on_error="skip", num_generations=2, max_error_rate=0.5)
    completions = ["A", "B", "boom", "A", "B", "B"]
    options = [["x"]] * 6
    out = guarded(completions=completions, options=options, log_metric=lambda k, v: logged.append((k, v)))
    assert out == [1.0, 0.0, None, None, 0.0, 0.0]
    # first the whole batch, then group by group with the list columns sliced to the group
    assert calls == [completions, ["A", "B"], ["boom", "A"], ["B", "B"]]
    assert logged == [("rewards/picky/error_rate", 2 / 6)]
    assert (guarded.seen, guarded.errors) == (6, 2)


def test_skip_mode_wrong_length_also_skips():
    guarded = GuardedReward(
        named(lambda completions, **k: [0.0], "short"), on_error="skip", num_generations=2, max_error_rate=1.0
    )
    assert guarded(completions=["a", "b", "c", "d"]) == [None] * 4


def test_skip_mode_stops_past_the_error_budget():
    def boom(completions, **kw):
        raise RuntimeError("server down")

    guarded = GuardedReward(named(boom, "judge"), on_error="skip", num_generations=2, max_error_rate=0.25)
    with pytest.raises(RewardError, match=r"reward 'judge' failed on 4 of 4 completions .*server down"):
        guarded(completions=["a", "b", "c", "d"])


def test_skip_mode_logs_zero_error_rate_on_clean_batches():
    logged = []
    guarded = GuardedReward(named(good, "length"), on_error="skip", num_generations=2)
    guarded(completions=["a", "b"], log_metric=lambda k, v: logged.append((k, v)))
    assert logged == [("rewards/length/error_rate", 0.0)]


def test_bad_settings_are_rejected():
    with pytest.raises(ValueError, match="on_error: expected one of"):
        GuardedReward(good, on_error="ignore")
    with pytest.raises(ValueError, match="num_generations"):
        GuardedReward(good, num_generations=0)
    rewards = [named(lambda completions, **k: [], "a"), named(lambda completions, **k: [], "b")]
    assert [g.__name__ for g in guard_rewards(rewards)] == ["a", "b"]
