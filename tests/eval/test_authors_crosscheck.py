"""Cross-check against the authors' own package (``proactivebench`` on PyPI; it needs Python >= 3.12).

The same records in the authors' format go through their loader and environments (in a subprocess, by
``authors_proactivebench_driver.py``) and through the project's: the kept ids per dataset, the open-ended valid
answers, and for every turn of scripted plays the options shown, the image (and MS-COCO crop box) shown, the
outcome, when play stops and whether it ends correct, must all be equal.

Skipped where no interpreter has the package. ``make crosscheck-env`` makes one in
``.cache/proactivebench-py312`` from any Python >= 3.12 on the machine; ``PROACTIVEBENCH_PYTHON`` names another.
"""

import glob
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from proactive_eval.benchmarks.proactivebench.environments import make_environment
from proactive_eval.benchmarks.proactivebench.metric import DATASETS
from proactive_eval.benchmarks.proactivebench.oeg import oeg_valid_answers
from proactive_eval.benchmarks.proactivebench.protocol import load_filter, select_benchmark

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("authors_proactivebench_driver.py")
CATEGORIES = ["dog", "cat", "zebra", "horse"]
COCO_MOVES = {
    "left": "Move the camera to the left.",
    "right": "Move the camera to the right.",
    "up": "Move the camera up.",
    "down": "Move the camera down.",
    "zoom": "Move farther from the object.",
}


def authors_python() -> str:
    candidates = [os.environ.get("PROACTIVEBENCH_PYTHON"), str(ROOT / ".cache/proactivebench-py312/bin/python")]
    candidates += [shutil.which(n) for n in ("python3.13", "python3.12")]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    probe = "import sys, proactivebench.environment; assert sys.version_info >= (3, 12)"
    for python in filter(None, candidates):
        if Path(python).exists() and subprocess.run([python, "-c", probe], capture_output=True).returncode == 0:
            return python
    pytest.skip("no Python >= 3.12 with the authors' proactivebench package (make crosscheck-env)")


def run_authors(spec: dict) -> dict:
    done = subprocess.run(
        [authors_python(), str(DRIVER)], input=json.dumps(spec), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def coco_record(rid, direction, granularity, rng):
    moves = [COCO_MOVES["zoom"]] if direction == "zoom" else [COCO_MOVES[d] for d in direction.split("_")]
    options = [*moves, "I cannot answer this question."]
    rng.shuffle(options)
    return {
        "id": rid,
        "image_template": f"train2014/COCO_{rid:06d}.jpg",
        "first_image": 0,
        "num_images": 1,
        "reference_image": 0,
        "prompt": "Which object is in the picture?",
        "options": options,
        "categories": rng.sample(CATEGORIES, 4),
        "answer": rng.choice(CATEGORIES),
        "direction": direction,
        "granularity": granularity,
        "horizontal_step": rng.choice([7, 12.5, 33.3]),
        "vertical_step": rng.choice([5, 9.75, 21]),
        "crop": {"top": 90, "left": 110, "height": 200, "width": 260},
    }


def sequence_record(rid, dataset, rng):
    if dataset == "Realistic-Occlusion-Dataset":
        options = ["Move the red box to the left.", "Move the red box to the right.", "I do not know."]
        template, first, n = "rod/obj_{image}.png", 3, 6
    else:
        options = ["Could you add more details?", "I cannot answer."]  # one action_map key each
        template, first, n = "qd/" + str(rid) + "/{image}.png", 0, 4
    rng.shuffle(options)
    return {
        "id": rid,
        "image_template": template,
        "first_image": first,
        "num_images": n,
        "reference_image": n - 1,
        "prompt": "What is it?",
        "options": options,
        "categories": rng.sample(CATEGORIES, 4),
        "answer": rng.choice(CATEGORIES),
    }


def script(record, rng, length):
    pool = [chr(65 + i) for i in range(8)] + [f"{chr(65 + i)}." for i in range(3)]
    pool += record["options"] * 8 + record["categories"] + ["banana"]  # mostly moves: walks reach spent axes
    return [rng.choice(pool) for _ in range(length)]


def play_project(record, dataset, data_dir, answers):
    env = make_environment(record, dataset, data_dir, load_images=False)
    obs, turns = env.reset(), []
    for answer in answers:
        box = list(env.crop_box()) if hasattr(env, "crop_box") else None
        turn = {"image": os.path.relpath(obs.image_path, data_dir), "options": obs.options, "box": box}
        result = env.step(answer)
        turns.append({**turn, "outcome": result.outcome, "stop": result.done})
        if result.done:
            return turns
        obs = result.observation
    raise AssertionError("the script ran out before the environment stopped")


def test_kept_ids_equal_the_authors_loader(tmp_path):
    lists = load_filter()
    for key, folder in DATASETS.items():
        top = max(int(i) for i in lists.ids[key]) + 2
        rows = [{"id": i} | ({"strong_occlusions": i % 3 != 0} if key == "VSOD" else {}) for i in range(top)]
        (tmp_path / f"{folder}_preprocessed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    authors = run_authors({"data_dir": str(tmp_path), "datasets": list(DATASETS.values()), "plays": []})["kept"]
    counts = {}
    for key, folder in DATASETS.items():
        rows = [json.loads(line) for line in (tmp_path / f"{folder}_preprocessed.jsonl").read_text().splitlines()]
        ours = [r["id"] for r in select_benchmark(rows, folder).records]
        assert ours == authors[folder], key
        counts[key] = len(ours)
    expected = lists.counts()
    expected["VSOD"] = sum(1 for i in lists.ids["VSOD"] if int(i) % 3 != 0)  # the skipped weak occlusions
    assert counts == expected


def test_every_transition_equals_the_authors_environments(tmp_path):
    rng = random.Random(0)
    plays = []
    directions = ["left", "right", "up", "down", "up_left", "up_right", "down_left", "down_right", "zoom"]
    for i in range(90):
        record = coco_record(i, directions[i % len(directions)], 3 + i % 3, rng)
        plays.append({"dataset": "coco2014", "record": record, "answers": script(record, rng, 12)})
    for i in range(30):
        folder = ("Realistic-Occlusion-Dataset", "QuickDraw")[i % 2]
        record = sequence_record(i, folder, rng)
        plays.append({"dataset": folder, "record": record, "answers": script(record, rng, 8)})
    authors = run_authors({"data_dir": str(tmp_path), "datasets": [], "plays": plays})["plays"]
    outcomes = {"correct": 0, "proactive": 0, "fail": 0}
    for play, their_play in zip(plays, authors):
        theirs = their_play["turns"]
        env = make_environment(play["record"], play["dataset"], tmp_path, load_images=False)
        assert oeg_valid_answers(env) == their_play["oeg"]
        ours = play_project(play["record"], play["dataset"], tmp_path, play["answers"])
        assert len(ours) == len(theirs), play
        for mine, their in zip(ours, theirs):
            expected = (
                "correct"
                if their["category"] == "correct"
                else ("proactive" if their["action"] == "correct" else "fail")
            )
            assert (mine["image"], mine["options"], mine["outcome"], mine["stop"]) == (
                their["image"],
                their["options"],
                expected,
                their["stop"],
            ), (play, mine, their)
            if their["box"] is not None:
                assert mine["box"] == pytest.approx(their["box"], abs=0), (play, mine, their)
            outcomes[mine["outcome"]] += 1
        assert (ours[-1]["outcome"] == "correct") == theirs[-1]["correct"]
    assert all(outcomes.values()), outcomes  # the scripts reached every kind of outcome
    print(f"cross-checked {len(plays)} plays, outcomes {outcomes}", file=sys.stderr)
