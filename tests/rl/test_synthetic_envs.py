"""Synthetic ask-for-help MCQA environments (docs/spec.md §11)."""

import numpy as np
import pytest

from proactive_eval.benchmarks.proactivebench.environments import (
    MCQAEnvironment,
    proactivebench_summary,
    run_environment,
)
from proactive_rl.synthetic import KINDS, abstain_policy, make_environments, oracle_policy
from proactive_rl.synthetic.environments import ABSTAIN

N = 12


@pytest.fixture(scope="module", params=KINDS)
def envs(request):
    return make_environments(request.param, N, seed=7)


def test_environments_follow_the_protocol_and_the_option_layout(envs):
    for env in envs:
        assert isinstance(env, MCQAEnvironment)
        obs = env.reset()
        assert obs.step == 0 and obs.image.dtype == np.uint8 and obs.image.shape == (64, 64, 3)
        # Actions (with exactly one abstain option) are lettered first, then four categories, one of them right.
        assert obs.options == env.options + env.categories
        assert sum(o in ABSTAIN for o in env.options) == 1
        assert len(env.categories) == 4 and env.categories.count(env.answer) == 1
        assert obs.valid_actions and set(obs.valid_actions) <= set(env.options) - set(ABSTAIN)
        assert env.steps_needed >= 1 and env.max_steps > env.steps_needed


def test_oracle_reaches_100_acc_with_ps_equal_to_the_steps_needed(envs):
    outcomes = [run_environment(env, oracle_policy(env)) for env in envs]
    summary = proactivebench_summary(outcomes)
    assert summary["acc"] == 100.0
    assert summary["ps"] == pytest.approx(np.mean([env.steps_needed for env in envs]))
    for env, outcome in zip(envs, outcomes):
        assert outcome.outcomes == ["proactive"] * env.steps_needed + ["correct"]


def test_always_abstain_scores_0(envs):
    summary = proactivebench_summary([run_environment(env, abstain_policy) for env in envs])
    assert summary["acc"] == 0.0 and summary["ps"] == 0.0


def test_letters_work_like_full_answers_and_wrong_answers_fail():
    env = make_environments("sketch", 1, seed=1)[0]
    obs = env.reset()
    action = obs.valid_actions[0]
    letter = chr(ord("A") + obs.options.index(action))
    assert env.step(f"{letter}.").outcome == "proactive"
    wrong = next(c for c in env.categories if c != env.answer)
    result = env.step(wrong)
    assert (result.outcome, result.done, result.observation) == ("fail", True, None)
    env.reset()
    assert env.step("banana").outcome == "fail"
    env.reset()
    right = chr(ord("A") + obs.options.index(env.answer))
    assert env.step(right).outcome == "correct"  # a right category is accepted at any step (QuickDraw)


def test_occlusion_first_frame_category_is_wrong_and_moves_wrap_around():
    env = make_environments("occlusion", 1, seed=2)[0]
    env.reset()
    assert env.step(env.answer).outcome == "fail"  # ROD: the first frame is fully occluded
    obs = env.reset()
    left = next(a for a in obs.valid_actions if "left" in a)
    images = [obs.image]
    for _ in range(len(env.images)):
        result = env.step(left)
        if result.done:
            break
        images.append(result.observation.image)
    # Circular: after num_images - 1 moves the sequence has visited every image once.
    assert len({im.tobytes() for im in images}) == len(env.images)


def test_corruption_offers_four_quality_fixes_but_only_one_is_valid():
    for env in make_environments("corruption", 8, seed=3):
        obs = env.reset()
        fixes = [o for o in obs.options[: len(env.options)] if o not in ABSTAIN]
        assert len(fixes) == 4 and len(obs.valid_actions) == 1
        wrong_fix = next(f for f in fixes if f not in obs.valid_actions)
        assert env.step(wrong_fix).outcome == "fail"
        # Each valid request removes one level: the last image is the clean one and stops accepting the fix.
        env.reset()
        for _ in range(env.steps_needed):
            result = env.step(obs.valid_actions[0])
        assert result.observation.valid_actions == []
        assert np.array_equal(result.observation.image, env.images[0])


def test_first_images_hide_the_answer_and_reference_images_show_it():
    # The first image is (nearly) uninformative, the reference one differs from it.
    for kind in KINDS:
        for env in make_environments(kind, 4, seed=5):
            assert not np.array_equal(env.images[env.first_image], env.images[env.reference_image])


def test_same_seed_same_environments():
    for kind in KINDS:
        a, b = make_environments(kind, 3, seed=9), make_environments(kind, 3, seed=9)
        for x, y in zip(a, b):
            assert (x.id, x.prompt, x.options, x.categories, x.answer) == (
                y.id,
                y.prompt,
                y.options,
                y.categories,
                y.answer,
            )
            assert all(np.array_equal(i, j) for i, j in zip(x.images, y.images))
    with pytest.raises(ValueError, match="occlusion"):
        make_environments("nope", 1)


# --- difficulty knobs (EnvKnobs) ---------------------------------------------------------------------------

POOL = ("red", "green", "blue", "yellow")


def test_easy_negatives_share_the_shape_and_differ_in_colour():
    for kind in ("occlusion", "corruption", "zoom_out"):
        for env in make_environments(kind, 6, seed=4, negatives="easy", colours=POOL):
            colour, shape = env.answer.split(" ")
            assert colour in POOL
            assert sorted(c.split(" ")[1] for c in env.categories) == [shape] * 4
            assert sorted(c.split(" ")[0] for c in env.categories) == sorted(POOL)  # 4 colours: all of them


def test_fixed_layout_gives_every_option_the_same_letter():
    envs = make_environments(
        "corruption", 8, seed=6, negatives="easy", colours=POOL, layout="fixed", corruptions=["contrast"]
    )
    for env in envs:
        # Alphabetical actions, abstain last; categories in palette order (red, green, blue, yellow).
        assert env.options[:4] == [
            "Deblur the image.",
            "Denoise the image.",
            "Increase the contrast of the image.",
            "Increase the image resolution.",
        ]
        assert env.options[4] in ABSTAIN
        assert [c.split(" ")[0] for c in env.categories] == list(POOL)
        assert env.reset().valid_actions == ["Increase the contrast of the image."]
    # The layout only reorders: the same seed draws the same answers and images as the shuffled default.
    shuffled = make_environments("corruption", 8, seed=6, negatives="easy", colours=POOL, corruptions=["contrast"])
    for a, b in zip(envs, shuffled):
        assert a.answer == b.answer and sorted(a.categories) == sorted(b.categories)
        assert all(np.array_equal(i, j) for i, j in zip(a.images, b.images))


def test_object_radius_fills_the_frame_with_the_colour():
    from proactive_rl.synthetic.world import PALETTE

    for env in make_environments("corruption", 4, seed=8, negatives="easy", colours=POOL, object_radius=0.6):
        clean = env.images[env.reference_image]
        share = np.mean(np.all(clean == PALETTE[env.answer.split(" ")[0]], axis=-1))
        assert share > 0.5  # the default radius (0.28) covers at most ~25 % of the frame


def test_default_knobs_change_nothing():
    for kind in KINDS:
        for a, b in zip(make_environments(kind, 3, seed=9), make_environments(kind, 3, seed=9, negatives="hard")):
            assert (a.options, a.categories, a.answer) == (b.options, b.categories, b.answer)


def test_bad_knobs_fail_naming_the_knob():
    with pytest.raises(ValueError, match="negatives: expected one of hard, easy"):
        make_environments("corruption", 1, negatives="medium")
    with pytest.raises(ValueError, match="layout: expected one of"):
        make_environments("corruption", 1, layout="sorted")
    with pytest.raises(ValueError, match="colours: expected distinct colours"):
        make_environments("corruption", 1, colours=["red", "pink"])
    with pytest.raises(ValueError, match="needs at least 4 colours"):
        make_environments("corruption", 1, negatives="easy", colours=["red", "blue"])
    with pytest.raises(ValueError, match="corruptions: expected some of"):
        make_environments("corruption", 1, corruptions=["rain"])
    with pytest.raises(ValueError, match="only apply to kind 'corruption'"):
        make_environments("sketch", 1, corruptions=["noise"])
    with pytest.raises(ValueError, match="sketch categories are drawings"):
        make_environments("sketch", 1, negatives="easy")
    with pytest.raises(ValueError, match="object_radius"):
        make_environments("corruption", 1, object_radius=3.0)


# --- the "merge" corruption: states with an exact best-guess accuracy --------------------------------------------

MERGE = {
    "negatives": "easy",
    "colours": ["red", "green", "blue", "yellow"],
    "layout": "fixed",
    "corruptions": ["merge"],
    "object_radius": 0.6,
}


def test_merge_bins_split_the_colours_coarser_at_each_severity():
    from proactive_rl.synthetic.environments import merge_bins

    c = ("a", "b", "c", "d")
    assert merge_bins(c, 0) == [("a",), ("b",), ("c",), ("d",)]
    assert merge_bins(c, 1) == [("a",), ("b",), ("c", "d")]
    assert merge_bins(c, 2) == [("a", "b"), ("c", "d")]
    assert merge_bins(c, 3) == [("a", "b", "c", "d")]
    with pytest.raises(ValueError, match="severity"):
        merge_bins(c, 4)


def test_merge_images_identify_the_bin_so_best_guess_accuracy_is_exact():
    # Independent check of the design: group 4,000 environments' images by their bytes at each severity; the best
    # guess (each group's most frequent answer) is right sum-over-bins-of-max-weight of the time:
    # weights .4/.25/.2/.15 -> severity 3: .4; 2: .4 + .2 = .6; 1: .4 + .25 + .2 = .85; 0: 1.
    weights = [0.4, 0.25, 0.2, 0.15]
    envs = make_environments("corruption", 4000, seed=3, colour_weights=weights, **MERGE)
    assert all(len(e.images) == 4 and e.first_image == 3 for e in envs)
    for severity, expected in [(3, 0.4), (2, 0.6), (1, 0.85), (0, 1.0)]:
        groups: dict = {}
        for env in envs:
            groups.setdefault(env.images[severity].tobytes(), []).append(env.answer)
        best = sum(max(answers.count(a) for a in set(answers)) for answers in groups.values()) / len(envs)
        assert best == pytest.approx(expected, abs=0.025), severity
    # The answer colours follow the weights.
    share = np.mean([e.answer.startswith("red") for e in envs])
    assert share == pytest.approx(0.4, abs=0.025)


def test_merge_environments_have_one_valid_colour_fix_and_the_oracle_solves_them():
    envs = make_environments("corruption", 8, seed=4, **MERGE)
    for env in envs:
        assert env.reset().valid_actions == ["Restore the colours of the image."]
        assert "Increase the contrast of the image." not in env.options and len(env.options) == 5
    summary = proactivebench_summary([run_environment(env, oracle_policy(env)) for env in envs])
    assert summary == {**summary, "acc": 100.0, "ps": 3.0}


def test_merge_and_colour_weight_knobs_fail_naming_the_knob():
    with pytest.raises(ValueError, match="corruptions: 'merge' needs negatives='easy' and exactly 4 colours"):
        make_environments("corruption", 1, corruptions=["merge"])
    with pytest.raises(ValueError, match="colour_weights: expected one positive weight per colour"):
        make_environments("corruption", 1, colour_weights=[1, 2], **MERGE)
    with pytest.raises(ValueError, match="colour_weights"):
        make_environments("corruption", 1, colour_weights=[1, 0, 1, 1], **MERGE)
