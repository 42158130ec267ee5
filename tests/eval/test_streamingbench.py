"""StreamingBench Proactive Output: loader and the scorer against a literal transcription of ``count.py``."""

from __future__ import annotations

import copy
import json
import random
from collections import defaultdict

import pytest

from proactive_eval.benchmarks.streamingbench_po.format import (
    hms_seconds,
    load_streamingbench_po,
    poll_query,
    said_yes,
)
from proactive_eval.benchmarks.streamingbench_po.metric import score_streamingbench_po
from proactive_eval.benchmarks.streamingbench_po.score import po_blind_floor
from proactive_eval.cli import main
from proactive_eval.records import EpisodeError

# ---- a literal transcription of the authors' count.py (task "proactive"; crashes included) -----------


def official_count(data, model):
    stats = defaultdict(lambda: defaultdict(int))
    total = 0
    for entry in data:
        for question in entry["questions"]:
            if model not in question:
                continue
            ground_truth_timestamp = question["ground_truth_time_stamp"]
            ground_truth_time = sum(int(x) * 60**i for i, x in enumerate(reversed(ground_truth_timestamp.split(":"))))
            task_type = question["task_type"]
            model_answer = question.get(model, None)
            history = model_answer["dialog_history"]
            last_time = history[-1]["time"]
            lase_answer = history[-1]["content"]
            if model_answer:
                total += 1
                stats[f"{task_type}"]["total"] += 1
                if -2 <= last_time - ground_truth_time <= 2:
                    stats[f"{task_type}"]["time_correct"] += 1
                    if question["ground_truth_output"] in lase_answer:
                        stats[f"{task_type}"]["answer_correct"] += 1
    for _task_type, counts in stats.items():
        counts["time_accuracy"] = counts["time_correct"] / counts["total"] if counts["total"] > 0 else 0
        counts["answer_accuracy"] = counts["answer_correct"] / counts["total"] if counts["total"] > 0 else 0
    return {k: dict(v) for k, v in stats.items()}


# ---- random question files and results ---------------------------------------------------------------


def stamp(seconds: int) -> str:
    return f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def make_questions(rng: random.Random, n_videos: int = 4) -> list[dict]:
    entries = []
    for v in range(n_videos):
        questions = []
        for _ in range(rng.randint(1, 3)):
            start = rng.randint(0, 4000)
            truth = start + rng.randint(1, 12)
            out = rng.choice(["3", "Break point", "goal", "red car"])
            questions.append(
                {"task_type": rng.choice(["Proactive Output", "Proactive Output", "Other"]),
                 "question": f'When it happens, output "{out}".', "time_stamp": stamp(start),
                 "ground_truth_time_stamp": stamp(truth), "ground_truth_output": out,
                 "required_ability": "working memory"}
            )  # fmt: skip
        entries.append({"time": "[0:00:00 - 0:00:30]", "questions": questions, "video_categories": "x",
                        "video_path": f"./videos/sample_{v}_proactive.mp4"})  # fmt: skip
    return entries


def model_output(rng: random.Random, question: dict) -> dict:
    truth = hms_seconds(question["ground_truth_time_stamp"])
    start = hms_seconds(question["time_stamp"])
    kind = rng.choice(["on_time", "early", "late", "never", "edge", "wrong_text", "lower"])
    said = {
        "on_time": truth,
        "early": truth - rng.randint(3, 6),
        "late": truth + 3,
        "edge": truth + rng.choice([-2, 2]),
    }
    t = max(start + 1, said.get(kind, truth + rng.choice([-1, 0, 1])))
    text = {"wrong_text": "something else", "lower": question["ground_truth_output"].lower()}.get(
        kind, f"The answer is {question['ground_truth_output']}."
    )
    history = []
    for poll in range(start + 1, (truth + 4 if kind == "never" else t) + 1):
        history.append({"role": "user", "content": poll_query(question), "time": poll, "cost": 0.1})
        history.append({"role": "assistant", "content": "No", "time": poll, "cost": 0.1})
    if kind == "never":
        return {"answered": False, "dialog_history": history}
    history[-1]["content"] = "Yes"
    history.append({"role": "user", "content": question["question"], "time": t, "cost": 0.2})
    history.append({"role": "assistant", "content": text, "time": t, "cost": 0.2})
    return {"answered": t, "dialog_history": history}


def make_results(rng: random.Random, entries: list[dict], model: str) -> list[dict]:
    results = copy.deepcopy(entries)
    for entry in results:
        for question in entry["questions"]:
            if rng.random() < 0.85:  # the rest: left out, as the official count does
                question[model] = model_output(rng, question)
    return results


def test_random_results_equal_the_official_transcription():
    rng = random.Random(48)
    for _ in range(220):
        results = make_results(rng, make_questions(rng), "M")
        expected = official_count(copy.deepcopy(results), "M")
        ours = score_streamingbench_po(results, "M")
        assert ours["tasks"] == expected
        assert ours["malformed"] == 0


# ---- hand-computed quirks ----------------------------------------------------------------------------


def one(output, truth="00:01:00", text="3"):
    q = {"task_type": "Proactive Output", "question": 'output "3"', "time_stamp": "00:00:50",
         "ground_truth_time_stamp": truth, "ground_truth_output": text}  # fmt: skip
    if output is not None:
        q["M"] = output
    return [{"video_path": "./videos/sample_1_proactive.mp4", "questions": [q]}]


def last(time, content):
    return {"answered": time, "dialog_history": [{"role": "assistant", "content": content, "time": time}]}


@pytest.mark.parametrize(
    "output, time_ok, answer_ok, malformed",
    [
        (last(62, "3"), 1, 1, 0),  # +2 s: inclusive
        (last(58, "3"), 1, 1, 0),  # -2 s
        (last(63, "3"), 0, 0, 0),
        (last(57, "3"), 0, 0, 0),
        (last(60, "It is 3 now"), 1, 1, 0),  # a substring
        (last(60, "three"), 1, 0, 0),
        (last(60.5, "3"), 1, 1, 0),
        (last(60, None), 1, 0, 1),  # official: `in None` raises
        (last("60", "3"), 0, 0, 1),  # a text time: official raises
        ({"answered": False, "dialog_history": []}, 0, 0, 1),  # official: history[-1] raises
        ({"answered": 60, "dialog_history": [{"role": "assistant", "content": "3", "time": 64}]}, 0, 0, 0),  # the
        # last entry counts, not `answered`
        ({"answered": False, "dialog_history": [{"role": "assistant", "content": "3", "time": 61}]}, 1, 1, 0),
        ({}, 0, 0, 1),
    ],
)
def test_quirks(output, time_ok, answer_ok, malformed):
    stats = score_streamingbench_po(one(output), "M")
    task = stats["tasks"]["Proactive Output"]
    assert (task["time_correct"], task["answer_correct"], stats["malformed"]) == (time_ok, answer_ok, malformed)
    assert task["total"] == 1


def test_case_sensitive_answer_and_left_out_questions():
    stats = score_streamingbench_po(one(last(60, "break point"), text="Break point"), "M")
    assert stats["tasks"]["Proactive Output"]["answer_correct"] == 0
    stats = score_streamingbench_po(one(None), "M")
    assert stats["tasks"] == {} and stats["left_out"] == 1


def test_official_yes_rule_and_times():
    assert said_yes(" YES. ") and said_yes("eyes") and not said_yes("No") and not said_yes(None)
    assert hms_seconds("1:02:03") == 3723 and hms_seconds("00:00:29") == 29


def test_loader_resolves_official_video_paths(tmp_path):
    entries = make_questions(random.Random(2), n_videos=2)
    (tmp_path / "videos").mkdir()
    (tmp_path / "videos" / "sample_0_proactive.mp4").write_bytes(b"x")
    (tmp_path / "q.json").write_text(json.dumps(entries))
    bench = load_streamingbench_po(tmp_path / "q.json")
    assert bench.questions[0].video == tmp_path / "videos" / "sample_0_proactive.mp4"
    assert bench.missing == [str(tmp_path / "videos" / "sample_1_proactive.mp4")]
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "sample_1_proactive.mp4").write_bytes(b"x")  # the videos alone, under --video-root
    assert load_streamingbench_po(tmp_path / "q.json", video_root=flat).questions[-1].video.parent == flat
    q = bench.questions[0]
    assert q.polls[0] == q.start + 1 and q.polls[-1] == q.ground_truth + 4
    entries[0]["questions"][0]["time_stamp"] = "00:aa:10"
    (tmp_path / "q.json").write_text(json.dumps(entries))
    with pytest.raises(EpisodeError, match="H:MM:SS"):
        load_streamingbench_po(tmp_path / "q.json")


def test_blind_floor_fits_one_delay():
    entries = one(None, truth="00:00:53")  # asked at 50, due at 53: "yes" 3 s after the question
    floor = po_blind_floor(entries + one(None, truth="00:00:54"))
    assert floor["delay_s"] == 2  # 52 is within 2 s of 53 and 54 (the shortest delay that gets both)
    assert floor["tasks"]["Proactive Output"] == {"time_accuracy": 1.0, "answer_accuracy": 1.0}


def test_cli_score_writes_results_json(tmp_path, capsys):
    rng = random.Random(3)
    entries = make_questions(rng)
    results = make_results(rng, entries, "MiniCPM-V")
    (tmp_path / "q.json").write_text(json.dumps(entries))
    (tmp_path / "r.json").write_text(json.dumps(results))
    argv = ["score", "--benchmark", "streamingbench_po", "--annotations", str(tmp_path / "q.json")]
    assert main(argv + ["--predictions", str(tmp_path / "r.json"), "--out", str(tmp_path / "out")]) == 0
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    expected = official_count(results, "MiniCPM-V")
    for task, stats in expected.items():
        assert report["tasks"][task] == {k: stats[k] for k in ("time_accuracy", "answer_accuracy")}
    assert report["model"] == "MiniCPM-V" and report["speed"]["calls"] > 0
    assert report["coverage"]["expected"] == sum(len(e["questions"]) for e in entries)
    capsys.readouterr()
    assert main(["baseline", "--benchmark", "streamingbench_po", "--annotations", str(tmp_path / "q.json")]) == 0
    assert json.loads(capsys.readouterr().out)["blind_floor"] == report["blind_floor"]
    results[0]["questions"][0]["Other"] = {}  # two models: --model must name one
    (tmp_path / "r.json").write_text(json.dumps(results))
    assert main(argv + ["--predictions", str(tmp_path / "r.json")]) == 2
