"""A predictions file changes a score only through its responses (issue 55): the episodes are the only truth.

Ids that match no episode, records repeating an id, and anything besides the responses' times and texts (targets,
durations, tasks, ground truth) are ignored and counted; responses outside their video are counted as malformed.
Empty input files are one-line errors (issue 57).
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image

from proactive_eval.cli import main
from proactive_eval.predictions import load_predictions
from proactive_rewards import Response

EPISODES = [
    {"id": "e0", "task": "accident", "duration": 10.0, "instruction": "warn me",
     "targets": [{"time": 4.0, "text": "Warning", "window": [3.0, 6.0]}]},
    {"id": "e1", "task": "intervention", "duration": 12.0, "instruction": "help", "targets": [{"time": 5.0, "text": "stop now"}]},
    {"id": "e2", "task": "accident", "duration": 10.0, "instruction": "warn me",
     "targets": [{"time": 2.0, "text": "Warning"}, {"time": 7.0, "text": "Warning"}]},
]  # fmt: skip
ANNO = [
    {"video": "v1.mp4", "question_id": "v1", "duration": 40.0, "conversation": [{"role": "user", "content": "What?"}],
     "answer": [{"content": "a brown donkey", "related_timespan": [0.0, 4.0], "reply_timespan": [0.0, 10.0]},
                {"content": "two crowns", "related_timespan": [20.0, 25.0], "reply_timespan": [20.0, 30.0]}]},
    {"video": "v2.mp4", "question_id": "v2", "duration": 20.0, "conversation": [{"role": "user", "content": "Who?"}],
     "answer": [{"content": "a red car", "related_timespan": [5.0, 8.0], "reply_timespan": [5.0, 15.0]}]},
]  # fmt: skip
HONEST = {
    "e0": [(4.5, "Warning"), (8.0, "Warning")],
    "e1": [(6.0, "stop")],
    "e2": [(3.0, "Warning")],
    "v1": [(2.0, "a donkey"), (22.0, "crowns")],
    "v2": [(10.0, "a car")],
}
# every target answered on time with its own text: what a forger would put in a repeated record
PERFECT = {
    "e0": [(4.0, "Warning")],
    "e1": [(5.0, "stop now")],
    "e2": [(2.0, "Warning"), (7.0, "Warning")],
    "v1": [(0.0, "a brown donkey"), (20.0, "two crowns")],
    "v2": [(5.0, "a red car")],
}
QUIET = ["--no-plots", "--no-progress"]


def record(rid, responses, **extra) -> dict:
    return {"id": rid, "responses": [{"time": t, "text": text} for t, text in responses], **extra}


def forged_lines() -> list[dict]:
    """The honest records with forged truth beside their responses, then repeated ids with perfect answers, unknown
    ids and a fake task."""
    lines = []
    for rid, responses in HONEST.items():
        line = record(rid, responses, task="ZZZ", duration=1.0, ground_truth="Warning", targets=[])
        line["targets"] = [{"time": t, "text": text, "window": [0.0, 1e6]} for t, text in responses]
        for item in line["responses"]:
            item.update(score=1.0, target="Warning", ground_truth_time_stamp=item["time"], window=[0.0, 1e6])
        lines.append(line)
    lines += [record(rid, responses) for rid, responses in PERFECT.items()]  # 5 repeated ids
    lines += [record(f"ghost{k}", PERFECT["e0"], task="accident", targets=EPISODES[0]["targets"]) for k in range(5)]
    lines.append(record("zzz", PERFECT["e0"], task="ZZZ"))  # 6 unknown ids in all
    return lines


@pytest.fixture
def files(tmp_path):
    (tmp_path / "episodes.json").write_text(json.dumps(EPISODES))
    (tmp_path / "anno.json").write_text(json.dumps(ANNO))
    for name, lines in (
        ("honest", [record(r, x) for r, x in HONEST.items()]),
        ("forged", forged_lines()),
        ("perfect", [record(r, x) for r, x in PERFECT.items()]),
    ):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return tmp_path


def score(folder, name: str, capsys) -> tuple[dict, str]:
    out = folder / f"report_{name}"
    argv = ["score", "--episodes", str(folder / "episodes.json"), str(folder / "anno.json")]
    assert main([*argv, "--predictions", str(folder / f"{name}.jsonl"), "--out", str(out), *QUIET]) == 0
    return json.loads((out / "results.json").read_text()), capsys.readouterr().out


def test_a_forged_predictions_file_scores_as_the_honest_one(files, capsys):
    honest, _ = score(files, "honest", capsys)
    forged, printed = score(files, "forged", capsys)
    perfect, _ = score(files, "perfect", capsys)
    # the repeated records would have mattered: alone they score higher on both metrics
    assert perfect["prs"]["overall"]["prs_b"] > honest["prs"]["overall"]["prs_b"]
    assert perfect["pauc"]["overall"]["omega=0.5"] > honest["pauc"]["overall"]["omega=0.5"]
    # every number, row and group (no task "ZZZ") of the forged file is the honest file's
    assert forged["prs"] == honest["prs"] and forged["pauc"] == honest["pauc"]
    assert set(forged["prs"]["groups"]) == {"accident", "intervention"}
    ignored = ("prediction_ids_matching_no_episode", "prediction_duplicates_ignored", "responses_outside_video")
    assert [forged["meta"][k] for k in ignored] == [6, 5, 0]
    assert [honest["meta"][k] for k in ignored] == [0, 0, 0]
    line = (
        "not scored from the predictions: 6 ids matching no episode, 5 records repeating an id (the first is scored)"
    )
    assert line in printed and line in (files / "report_forged" / "report.md").read_text()


def test_only_ids_times_and_texts_are_read(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in forged_lines()))
    predictions = load_predictions(path)
    assert {rid: predictions[rid] for rid in HONEST} == {
        rid: [Response(t, text) for t, text in responses] for rid, responses in HONEST.items()
    }
    assert predictions.duplicates == list(PERFECT)
    official = tmp_path / "official.jsonl"  # the official form: the first record of an id wins too
    rows = [{"question_id": "v1", "model_response_list": [{"time": 2.0, "content": c, "role": "assistant"}]}
            for c in ("first", "second")]  # fmt: skip
    official.write_text("".join(json.dumps(row) + "\n" for row in rows))
    predictions = load_predictions(official)
    assert predictions == {"v1": [Response(2.0, "first")]} and predictions.duplicates == ["v1"]


def test_responses_outside_the_video_are_malformed_and_counted(tmp_path, capsys):
    """By hand: one target at 8 s of a 10 s video; responses "Warning" at -1 s and at 12 s. Scored as answers they
    would earn PRS-B = max(e^(-0.05·9), e^(-0.05·4)) / 2 = 40.94 (and PRS-U 40.94 from the one at 12 s); as
    malformed outputs they earn nothing, and both are counted, as outputs and as malformed."""
    episode = {"id": "a", "task": "accident", "duration": 10.0, "instruction": "warn me",
               "targets": [{"time": 8.0, "text": "Warning"}]}  # fmt: skip
    (tmp_path / "e.json").write_text(json.dumps([episode]))
    (tmp_path / "p.jsonl").write_text(json.dumps(record("a", [(-1.0, "Warning"), (12.0, "Warning")])) + "\n")
    argv = ["score", "--episodes", str(tmp_path / "e.json"), "--predictions", str(tmp_path / "p.jsonl")]
    assert main([*argv, "--out", str(tmp_path / "r"), *QUIET]) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    row = results["prs"]["overall"]
    assert (row["prs_u"], row["prs_b"], row["prs_b_nopenalty"]) == (0.0, 0.0, 0.0)
    assert (row["outputs"], row["malformed_outputs"], results["meta"]["responses_outside_video"]) == (2, 2, 2)
    printed = capsys.readouterr().out
    assert "2 responses outside their video's [0, duration], scored as malformed" in printed
    # at the video's end exactly is inside: scored as an answer
    (tmp_path / "p.jsonl").write_text(json.dumps(record("a", [(10.0, "Warning")])) + "\n")
    assert main([*argv, "--out", str(tmp_path / "r2"), *QUIET]) == 0
    results = json.loads((tmp_path / "r2" / "results.json").read_text())
    assert results["prs"]["overall"]["prs_b"] == pytest.approx(100 * np.exp(-0.05 * 2), abs=1e-3)
    assert results["meta"]["responses_outside_video"] == 0


def _rod_folder(tmp_path, text: str):
    (tmp_path / "rod").mkdir(exist_ok=True)
    for i in (0, 1):
        Image.fromarray(np.zeros((2, 3, 3), np.uint8)).save(tmp_path / "rod" / f"obj_{i}.png")
    path = tmp_path / "Realistic-Occlusion-Dataset_preprocessed.jsonl"
    path.write_text(text)
    return path


@pytest.mark.parametrize("text", ["", "[]\n", '{"episodes": []}'])
def test_empty_inputs_are_one_line_errors(tmp_path, capsys, text):
    """Issue 57: ``baseline --episodes empty.json`` exited 0 printing nothing; every empty input is exit 2 with one
    line naming the file and what to write."""
    (tmp_path / "episodes.json").write_text(json.dumps(EPISODES))
    (tmp_path / "empty.json").write_text(text)
    (tmp_path / "empty.jsonl").write_text(text if text in ("", "[]\n") else "\n")  # a JSON list, or no line
    (tmp_path / "p.jsonl").write_text(json.dumps(record("e0", HONEST["e0"])) + "\n")
    env = _rod_folder(tmp_path, "\n" if text else "")  # JSONL: a line "[]" would be a record (not an object)
    empty, episodes = str(tmp_path / "empty.json"), str(tmp_path / "episodes.json")
    runs = [
        (["baseline", "--episodes", empty], "empty.json: no episodes"),
        (["score", "--episodes", empty, "--predictions", str(tmp_path / "p.jsonl")], "empty.json: no episodes"),
        (["score", "--episodes", episodes, "--fit", empty, "--predictions", str(tmp_path / "p.jsonl")], "no episodes"),
        (["convert", "--from", "p3i", empty, "--out", str(tmp_path / "c.json")], "empty.json: no episodes"),
        (["score", "--episodes", episodes, "--predictions", str(tmp_path / "empty.jsonl")], "no predictions"),
        (["run", "--episodes", episodes, "--policy", f"replay:{tmp_path / 'empty.jsonl'}", "--out", str(tmp_path)],
         "empty.jsonl: no predictions"),
        (["baseline", "--episodes", str(env), "--dataset", "ROD", "--protocol", "unfiltered"], "no unfiltered"),
        (["mcqa", "--data-dir", str(tmp_path), "--datasets", "ROD", "--policy", "oracle"], "no records"),
        (["convert", "--from", "proactivebench", str(env), "--out", str(tmp_path / "c.jsonl")], "no ProactiveBench"),
    ]  # fmt: skip
    for argv, expected in runs:
        capsys.readouterr()
        assert main(argv) == 2, argv
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (argv, lines)
        assert "write" in lines[0], lines[0]  # the fix


def test_all_records_skipped_is_an_error(tmp_path, capsys):
    bad = [{**EPISODES[0], "duration": -1.0}, {**EPISODES[1], "task": "cooking"}]
    (tmp_path / "e.json").write_text(json.dumps(bad))
    assert main(["baseline", "--episodes", str(tmp_path / "e.json"), "--on-error", "skip"]) == 2
    err = capsys.readouterr().err
    assert "e.json: no episodes: all 2 records were skipped as bad (first: record 'e0', field 'duration': " in err


def test_replay_answers_are_validated_and_ignored_ones_counted(tmp_path, capsys):
    rod = {"id": 0, "image_template": "rod/obj_{image}.png", "first_image": 0, "num_images": 2, "prompt": "What?",
           "options": ["Move the box to the left.", "I do not know."], "categories": ["cat", "dog"], "answer": "dog"}  # fmt: skip
    _rod_folder(tmp_path, json.dumps(rod) + "\n")
    answers = tmp_path / "answers.jsonl"
    # ROD's first view is occluded: move ("A"), then name the category; the repeated id (folder name) says "cat"
    rows = [{"id": 0, "dataset": "ROD", "answers": ["A", "dog"]}, {"id": 0, "dataset": "Realistic-Occlusion-Dataset",
            "answers": ["A", "cat"]}, {"id": 9, "dataset": "ROD", "answers": ["dog"]}]  # fmt: skip
    answers.write_text("".join(json.dumps(r) + "\n" for r in rows))
    argv = ["mcqa", "--data-dir", str(tmp_path), "--datasets", "ROD", "--protocol", "unfiltered"]
    assert main([*argv, "--policy", f"replay:{answers}", "--out", str(tmp_path / "r")]) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    assert results["datasets"]["ROD"]["acc"] == 100.0  # the first record of id 0 ("dog") is played
    assert results["meta"]["replay_records_ignored"] == {"ids_matching_no_environment": 1, "repeated_ids": 1}
    assert "replay answers not played: 1 records matching no environment, 1 repeating an id" in capsys.readouterr().out
    answers.write_text(json.dumps({"id": 0, "dataset": "ROD", "answers": "dog"}) + "\n")
    assert main([*argv, "--policy", f"replay:{answers}"]) == 2
    err = capsys.readouterr().err
    assert "answers.jsonl: record '0': field 'answers': must be a list of answer strings" in err
