"""Data-driven ProactiveBench environments and the runner: transitions and outcomes computed by hand."""

import json

import numpy as np
import pytest
from PIL import Image

from proactive_eval.benchmarks.proactivebench.environments import (
    MCQAEnvironment,
    ProactiveBenchEnvironment,
    load_environments,
    mcqa_prompt,
    proactivebench_summary,
    run_environment,
)
from proactive_eval.episodes import EpisodeError

CATEGORIES = ["cat", "dog", "cow", "hen"]


def write_images(folder, names):
    """Tiny PNGs whose pixel value encodes the image number, so a test can see which image it got."""
    for name, value in names.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.full((2, 3, 3), value, np.uint8)).save(path)


def rod_record(**overrides):
    record = {
        "id": "rod-0",
        "image_template": "rod/obj_{image}.png",
        "first_image": 3,
        "num_images": 6,
        "reference_image": 3,
        "prompt": "What is behind the red box?",
        "options": ["Move the red box to the left.", "Move the red box to the right.", "I do not know."],
        "categories": CATEGORIES,
        "answer": "dog",
    }
    record.update(overrides)
    return record


@pytest.fixture
def rod(tmp_path):
    write_images(tmp_path, {f"rod/obj_{i}.png": 10 * i for i in range(6)})
    return lambda **kw: ProactiveBenchEnvironment(rod_record(**kw), "ROD", tmp_path)


def scripted(answers, seen):
    it = iter(answers)

    def policy(observation):
        seen.append(int(observation.image[0, 0, 0]) // 10)
        return next(it)

    return policy


def test_rod_walk_then_correct_letter_shifted_past_actions(rod):
    env = rod()
    assert isinstance(env, MCQAEnvironment)
    seen = []
    # left (3 -> 2), right by full text (2 -> 3), then "E" = categories[1] = dog.
    out = run_environment(env, scripted(["A", "B. Move the red box to the right.", "E"], seen))
    assert seen == [3, 2, 3]
    assert (out.success, out.turns, out.outcomes) == (True, 3, ["proactive", "proactive", "correct"])


def test_rod_category_on_occluded_first_frame_fails_and_abstention_fails(rod):
    assert run_environment(rod(), lambda o: "dog").outcomes == ["fail"]
    assert run_environment(rod(), lambda o: "I do not know.").outcomes == ["fail"]
    assert run_environment(rod(), lambda o: "no idea, sorry").outcomes == ["fail"]


def test_rod_is_circular_and_stops_at_max_steps(rod):
    seen = []
    out = run_environment(rod(), scripted(["A"] * 6, seen))
    assert seen == [3, 2, 1, 0, 5, 4]  # wraps from 0 to 5
    assert (out.success, out.turns, out.outcomes[-1]) == (False, 6, "proactive")


def test_observation_and_prompt(rod, tmp_path):
    env = rod()
    obs = env.reset()
    assert obs.options == env.options + CATEGORIES and obs.valid_actions == env.options[:2] and obs.step == 0
    assert obs.image.shape == (2, 3, 3) and obs.image.dtype == np.uint8
    hinted = ProactiveBenchEnvironment(rod_record(), "ROD", tmp_path, hint=True)
    assert hinted.prompt.endswith("Hint: moving the occluding object might reveal what is behind it.")
    assert mcqa_prompt(obs.prompt, obs.options).splitlines()[4] == "D. cat"


def test_imagenet_c_levels_and_last_step(tmp_path):
    write_images(tmp_path, {f"inc/{level}.png": 10 * level for level in (1, 2, 3)})
    record = rod_record(
        id="inc-0",
        image_template="inc/{level}.png",
        first_image=3,
        num_images=3,
        options=["Denoise the image.", "Deblur the image.", "I cannot answer."],
        quality_answer="Denoise the image.",
    )
    seen = []
    out = run_environment(ProactiveBenchEnvironment(record, "ImageNet-C", tmp_path), scripted(["A", "A", "A"], seen))
    # levels 3 -> 2 -> 1; on the last image only a category is valid, so the third denoise fails.
    assert seen == [3, 2, 1] and out.outcomes == ["proactive", "proactive", "fail"]
    env = ProactiveBenchEnvironment(record, "IN-C", tmp_path)
    assert run_environment(env, lambda o: "Deblur the image.").outcomes == ["fail"]  # not the right fix
    assert run_environment(env, scripted(["A", "E"], [])).success  # D cat, E dog


def test_changeit_hides_moves_past_the_ends(tmp_path):
    write_images(tmp_path, {f"cit/{i}.png": 10 * i for i in range(6)})
    record = rod_record(
        id="cit-0",
        image_template="cit/{image}.png",
        first_image=0,
        num_images=6,
        step_size=2,
        max_steps=3,
        options=["Rewind the video.", "Wait for the object to appear.", "I do not know."],
    )
    env = ProactiveBenchEnvironment(record, "ChangeIt", tmp_path)
    obs = env.reset()
    assert obs.options[:2] == ["Wait for the object to appear.", "I do not know."]  # no rewind at frame 0
    seen = []
    # A = wait (0 -> 2); now A = rewind (2 -> 0); third turn reaches max_steps = 3.
    out = run_environment(env, scripted(["A", "A", "A"], seen))
    assert seen == [0, 2, 0] and (out.success, out.turns) == (False, 3)


def test_mvpn_walks_valid_images_and_flags_the_informative_view(tmp_path):
    write_images(tmp_path, {"mvp/0_0010.png": 10, "mvp/0_0011.png": 20, "mvp/1_0012.png": 30})
    record = rod_record(
        id="mvp-0",
        image_template="mvp/{informative}_{image}.png",
        first_image=10,
        num_images=3,
        valid_images=[10, 11, 12],
        options=["Rotate the object.", "I do not know."],
    )
    seen = []
    out = run_environment(ProactiveBenchEnvironment(record, "MVP-N", tmp_path), scripted(["A", "A", "D"], seen))
    assert seen == [1, 2, 3] and out.success and out.turns == 3  # D = categories[1] after two actions


def test_load_environments_and_errors(tmp_path):
    write_images(tmp_path, {f"rod/obj_{i}.png": 10 * i for i in range(6)})
    path = tmp_path / "Realistic-Occlusion-Dataset_preprocessed.jsonl"
    records = [rod_record(id=f"r{i}") for i in range(3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    envs = load_environments(path, "Realistic-Occlusion-Dataset", protocol="unfiltered")
    outcomes = [run_environment(e, p) for e, p in zip(envs, [lambda o: "A", lambda o: "C", lambda o: "C"])]
    # r0 walks left to max_steps (6 turns, fail); r1, r2 abstain at once.
    assert proactivebench_summary(outcomes) == {"acc": 0.0, "ps": pytest.approx(5 / 3), "n": 3}

    bad = rod_record(id="broken")
    del bad["categories"]
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(EpisodeError, match="record 'broken': field 'categories'") as err:
        load_environments(path, "ROD", protocol="unfiltered")
    assert str(path) in str(err.value)
    path.write_text(json.dumps(rod_record(answer="zebra")) + "\n")
    with pytest.raises(EpisodeError, match="field 'answer'"):
        load_environments(path, "ROD", protocol="unfiltered")
    path.write_text(json.dumps(rod_record()) + "\n" + json.dumps(rod_record()) + "\n")
    with pytest.raises(EpisodeError, match="duplicate id"):
        load_environments(path, "ROD", protocol="unfiltered")
    with pytest.raises(ValueError, match="not an image-sequence environment"):
        ProactiveBenchEnvironment(rod_record(), "COCO", tmp_path)
    with pytest.raises(EpisodeError, match="cannot read image"):
        ProactiveBenchEnvironment(rod_record(first_image=9, num_images=12), "ROD", tmp_path)
