"""The MS-COCO environment: crop boxes and option lists computed by hand from ProactiveBench App. A.7 / the authors'
``COCO2014Environment`` rules, oracle and abstain play."""

import json

import numpy as np
import pytest
from PIL import Image

from proactive_eval.benchmarks.proactivebench.coco import COCOEnvironment
from proactive_eval.benchmarks.proactivebench.environments import (
    MCQAEnvironment,
    load_environments,
    make_environment,
    proactivebench_summary,
    run_environment,
)
from proactive_eval.episodes import EpisodeError

CATEGORIES = ["dog", "cat", "zebra", "horse"]
ABSTAIN = "I cannot answer this question."
MOVES = {
    "left": "Move the camera to the left.",
    "right": "Move the camera to the right.",
    "up": "Move the camera up.",
    "down": "Move the camera down.",
    "zoom": "Move farther from the object.",
}


@pytest.fixture
def data_dir(tmp_path):
    """A 200×160 image whose red channel is x and green channel is y: a crop tells its own box."""
    ys, xs = np.mgrid[0:160, 0:200]
    image = np.stack([xs, ys, np.zeros_like(xs)], axis=-1).astype(np.uint8)
    (tmp_path / "coco").mkdir()
    Image.fromarray(image).save(tmp_path / "coco" / "img.png")
    return tmp_path


def record(direction, granularity=3, h=10, v=8, crop=None, **over):
    moves = [MOVES["zoom"]] if direction == "zoom" else [MOVES[d] for d in direction.split("_")]
    out = {
        "id": 7,
        "image_template": "coco/img.png",
        "first_image": 0,
        "num_images": 1,
        "prompt": "What is the object in the picture?",
        "options": [*moves, ABSTAIN],
        "categories": CATEGORIES,
        "answer": "zebra",
        "direction": direction,
        "granularity": granularity,
        "horizontal_step": h,
        "vertical_step": v,
        "crop": crop or {"top": 60, "left": 80, "height": 120, "width": 150},
    }
    out.update(over)
    return out


def box_seen(observation):
    """(left, top, right, bottom) read off the observed pixels."""
    img = observation.image
    return int(img[0, 0, 0]), int(img[0, 0, 1]), int(img[0, 0, 0]) + img.shape[1], int(img[0, 0, 1]) + img.shape[0]


def test_cardinal_left_walks_two_steps_then_only_categories(data_dir):
    env = COCOEnvironment(record("left"), data_dir)
    assert isinstance(env, MCQAEnvironment) and env.max_steps == 3 and env.steps_needed == 2
    obs = env.reset()
    # The first view is already one step out: left = 80 - 10; right/bottom are the crop's width/height fields.
    assert box_seen(obs) == (70, 60, 150, 120)
    assert obs.options == [MOVES["left"], ABSTAIN, *CATEGORIES] and obs.valid_actions == [MOVES["left"]]
    obs = env.step("A").observation
    assert box_seen(obs) == (60, 60, 150, 120) and obs.valid_actions == [MOVES["left"]]
    obs = env.step("Move the camera to the left.").observation
    # After granularity - 1 = 2 moves the step is 3 * 10 = the maximum: the move disappears.
    assert box_seen(obs) == (50, 60, 150, 120)
    assert obs.options == [ABSTAIN, *CATEGORIES] and obs.valid_actions == []
    result = env.step("D")  # letters re-shift: A abstain, B dog, C cat, D zebra
    assert (result.outcome, result.done) == ("correct", True)


def test_ordinal_up_right_offers_one_move_per_axis_until_each_is_spent(data_dir):
    env = COCOEnvironment(record("up_right", granularity=3), data_dir)
    assert env.max_steps == 6 and env.steps_needed == 4
    obs = env.reset()
    assert box_seen(obs) == (80, 52, 160, 120)  # top - 8, right = width + 10
    obs = env.step(MOVES["up"]).observation
    obs = env.step(MOVES["up"]).observation
    assert box_seen(obs) == (80, 36, 160, 120) and obs.valid_actions == [MOVES["right"]]
    obs = env.step(MOVES["right"]).observation
    assert box_seen(obs) == (80, 36, 170, 120)
    result = env.step(MOVES["up"])  # spent: no longer an option, so "Move the camera up." is not understood
    assert (result.outcome, result.done) == ("fail", True)


def test_zoom_widens_every_side_granularity_times(data_dir):
    crop = {"top": 50, "left": 70, "height": 40, "width": 50}  # for zoom: the crop's size
    env = COCOEnvironment(record("zoom", granularity=3, h=5, v=4, crop=crop), data_dir)
    assert env.max_steps == 4 and env.steps_needed == 3
    seen = [box_seen(env.reset())]
    for _ in range(3):
        obs = env.step("A").observation
        seen.append(box_seen(obs))
    assert seen == [(65, 46, 125, 94), (60, 42, 130, 98), (55, 38, 135, 102), (50, 34, 140, 106)]
    assert obs.valid_actions == [] and MOVES["zoom"] not in obs.options
    assert env.step("zebra").outcome == "correct"


@pytest.mark.parametrize("direction", ["left", "right", "up", "down", "up_left", "down_right", "zoom"])
def test_oracle_reaches_100_with_ps_equal_to_the_steps_the_crop_needs_and_abstain_scores_0(data_dir, direction):
    envs = [COCOEnvironment(record(direction, granularity=g, id=g), data_dir) for g in (3, 4, 5)]
    outcomes = [run_environment(env, lambda o, env=env: env.oracle_answer()) for env in envs]
    assert proactivebench_summary(outcomes)["acc"] == 100.0
    moves = {"zoom": lambda g: g}.get(direction, lambda g: (g - 1) * len(direction.split("_")))
    assert [o.turns - 1 for o in outcomes] == [moves(g) for g in (3, 4, 5)] == [e.steps_needed for e in envs]
    assert proactivebench_summary([run_environment(e, lambda o: ABSTAIN) for e in envs]) == {
        "acc": 0.0,
        "ps": 0.0,
        "n": 3,
    }


def test_a_category_is_accepted_at_once_and_a_wrong_one_fails(data_dir):
    env = COCOEnvironment(record("down"), data_dir)
    assert run_environment(env, lambda o: "zebra").outcomes == ["correct"]
    assert run_environment(env, lambda o: "E. horse").outcomes == ["fail"]


def test_hint_placeholder_images_and_bad_records(data_dir):
    env = COCOEnvironment(record("zoom"), data_dir, hint=True, load_images=False)
    obs = env.reset()
    assert obs.prompt.endswith("Hint: zooming out could help with classification.") and obs.image.shape == (1, 1, 3)
    assert COCOEnvironment(record("left"), data_dir, hint=True).prompt.endswith(
        "moving the camera could help with classification."
    )
    with pytest.raises(EpisodeError, match="record '7': field 'direction'"):
        COCOEnvironment(record("up_down"), data_dir)
    with pytest.raises(EpisodeError, match=r"field 'crop'.*missing \['width'\]"):
        COCOEnvironment(record("left", crop={"top": 1, "left": 1, "height": 2}), data_dir)
    bad = record("left")
    del bad["granularity"]
    with pytest.raises(EpisodeError, match="field 'granularity'"):
        COCOEnvironment(bad, data_dir)


def test_load_environments_builds_coco_and_the_protocol_filters_ids(data_dir):
    path = data_dir / "coco2014_preprocessed.jsonl"
    # Ids 0 and 1 are in the shipped coco2014 list of the filtered benchmark, 3 and 4 are not.
    path.write_text("".join(json.dumps(record("left", id=i)) + "\n" for i in (0, 1, 3, 4)))
    envs = load_environments(path, "coco2014")
    assert [e.id for e in envs] == ["0", "1"] and all(isinstance(e, COCOEnvironment) for e in envs)
    sel = envs.selection
    assert (sel.protocol, sel.in_file, sel.filtered_out, sel.skipped) == ("filtered", 4, 2, 0)
    assert len(load_environments(path, "COCO", protocol="unfiltered")) == 4
    assert isinstance(make_environment(record("zoom"), "COCO", data_dir), COCOEnvironment)


def test_oeg_answers_are_the_authors_for_every_direction(data_dir):
    from proactive_eval.benchmarks.proactivebench.metric import oeg_judgment
    from proactive_eval.benchmarks.proactivebench.oeg import oeg_valid_answers

    for direction in ("left", "up_right", "zoom"):
        env = COCOEnvironment(record(direction), data_dir, load_images=False)
        assert oeg_valid_answers(env) == "Move the camera, Move farther from the object, zebra."
    assert oeg_judgment("0, 0, 1", oeg_valid_answers(env), "COCO") == {
        "proactive_suggestion": 0,
        "category_prediction": 1,
        "aggregate": 1,
    }
