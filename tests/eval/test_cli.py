"""``proactive-eval`` end to end: score a ProactiveVideoQA file, convert, run (acceptance 6)."""

import json
import math
import re

import pytest

from proactive_eval import load_episodes
from proactive_eval.cli import main
from proactive_eval.predictions import load_predictions
from proactive_rewards import Response

ANNO = [
    {
        "video": "v1.mp4",
        "question_id": "v1",
        "answer": [
            {"content": "a brown donkey", "related_timespan": [0.0, 4.0], "reply_timespan": [0.0, 10.0]},
            {"content": "two crowns", "related_timespan": [20.0, 25.0], "reply_timespan": [20.0, 30.0]},
        ],
        "conversation": [{"role": "user", "content": "What appears?", "time": 0}],
        "duration": 40.0,
    },
    {
        "video": "v2.mp4",
        "question_id": "v2",
        "answer": [{"content": "a red car", "related_timespan": [5.0, 8.0], "reply_timespan": [5.0, 15.0]}],
        "conversation": [{"role": "user", "content": "What drives by?", "time": 0}],
        "duration": 20.0,
    },
]
# v1 turn 0: "a brown donkey" at 2 s (exact -> level 3); turn 1 unanswered; v2: off-topic at 10 s (level 1)
PREDICTIONS = [
    {"id": "v1", "responses": [{"time": 2.0, "text": "a brown donkey"}, {"time": 3.0, "text": "</Silence>"}]},
    {"id": "v2", "responses": [{"time": 10.0, "text": "nothing at all"}]},
]


@pytest.fixture
def pvqa_files(tmp_path):
    anno = tmp_path / "WEB" / "anno.json"
    anno.parent.mkdir()
    anno.write_text(json.dumps(ANNO))
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps(p) + "\n" for p in PREDICTIONS))
    return anno, preds


def test_score_pvqa_prints_pauc_table_and_writes_report(pvqa_files, tmp_path, capsys):
    anno, preds = pvqa_files
    out = tmp_path / "report"
    code = main(
        ["score", "--episodes", str(anno), "--predictions", str(preds), "--judge", "rule:token_f1"]
        + ["--out", str(out), "--no-progress"]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "PAUC" in printed
    # no model run: frames/s and latency are n/a; v1 answered turn 0 at 2 s (target 0 s), v2 at 10 s (target 5 s)
    assert "n/a (no model run)" in printed
    assert json.loads((out / "results.json").read_text())["pauc"]["overall"]["event_to_response_median_s"] == 3.5
    # by hand: v1/0 at ω=0: (2*0.5 + 8*2) / 20 = 0.85; v1/1: 0.25; v2/0: (5*0.5 + 5*0) / 20 = 0.125
    # ω=0.5: v1/0 x=1 -> (0.5 + 18) / 20 = 0.925; v2/0 x=2.5 -> 1.25/20 = 0.0625;  ω=1: 1.0 and 0.0
    expect = {"0": (0.85 + 0.25 + 0.125) / 3, "0.5": (0.925 + 0.25 + 0.0625) / 3, "1": (1.0 + 0.25 + 0.0) / 3}
    row = next(line for line in printed.splitlines() if line.startswith("| **overall**"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1:5] == ["2/2", "2", "3", "2"]  # coverage, videos, turns, answered
    assert [float(c) for c in cells[5:8]] == pytest.approx([100 * expect[k] for k in ("0", "0.5", "1")], abs=0.01)
    assert re.search(r"\| pvqa:WEB \|", printed)

    results = json.loads((out / "results.json").read_text())
    overall = results["pauc"]["overall"]
    assert overall["omega=0.5"] == pytest.approx(100 * expect["0.5"], abs=1e-3)
    assert overall["video_omega=0"] == pytest.approx(100 * ((0.85 + 0.25) / 2 + 0.125) / 2, abs=1e-3)
    assert results["meta"]["judge"] == "rule:token_f1"
    assert "PAUC" in (out / "report.md").read_text()
    turns = [json.loads(line) for line in (out / "pauc_turns.jsonl").read_text().splitlines()]
    assert [t["levels"] for t in turns] == [[3], [], [1]]
    for name in ("pauc_curves.png", "timelines.png", "responses_per_target.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    assert not list(out.glob(".*.tmp")) and not list(out.glob(".*.png"))  # atomic writes left no temp files


def test_score_without_out_prints_only(pvqa_files, tmp_path, capsys):
    anno, preds = pvqa_files
    assert main(["score", "--episodes", str(anno), "--predictions", str(preds), "--no-progress"]) == 0
    assert "| **overall** |" in capsys.readouterr().out


def test_score_official_model_response_list(pvqa_files, tmp_path, capsys):
    anno, _ = pvqa_files
    official = tmp_path / "official.jsonl"
    official.write_text(
        json.dumps(
            {
                "question_id": "v1",
                "model_response_list": [{"time": 2.0, "content": "a brown donkey", "role": "assistant"}],
            }
        )
        + "\n"
    )
    assert (
        main(["score", "--episodes", str(anno), "--predictions", str(official), "--omega", "0", "--no-progress"]) == 0
    )
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| **overall**"))
    # v1/0 0.85, v1/1 0.25, v2 unanswered 0.25
    assert float(row.split("|")[6]) == pytest.approx(100 * (0.85 + 0.25 + 0.25) / 3, abs=0.01)


def test_score_prs_episodes(tmp_path, capsys):
    eps = tmp_path / "eps.json"
    eps.write_text(
        json.dumps(
            [
                {
                    "id": "c",
                    "task": "atomic",
                    "duration": 30.0,
                    "instruction": "count",
                    "targets": [{"time": 10.0, "text": "1"}],
                }
            ]
        )
    )
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps({"id": "c", "responses": [{"time": 10.0, "text": "</Response> 1"}]}) + "\n")
    assert (
        main(
            [
                "score",
                "--episodes",
                str(eps),
                "--predictions",
                str(preds),
                "--out",
                str(tmp_path / "r"),
                "--no-progress",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "PRS-B" in out and "| atomic | 1/1 | 1 | 100.00 | 100.00 |" in out
    assert (tmp_path / "r" / "responses_per_target.png").exists()


@pytest.mark.parametrize(
    "argv, message",
    [
        (["score", "--episodes", "missing.json", "--predictions", "p.jsonl"], "episodes file not found"),
        (["score", "--episodes", "{anno}", "--predictions", "missing.jsonl"], "predictions file not found"),
        (["score", "--episodes", "{anno}", "--predictions", "{preds}", "--judge", "gpt"], "unknown judge"),
        (["convert", "--from", "pvqa", "missing.json", "--out", "x.json"], "input file not found"),
        (["score", "--episodes", "{anno}", "--predictions", "{preds}", "--omega", "2"], "--omega: every ω must be in"),
        (["score", "--episodes", "{anno}", "--predictions", "{preds}", "--omega", "nan"], "--omega: every ω"),
        (["run", "--episodes", "{anno}", "--policy", "silent", "--out", "r", "--fps", "nan"], "--fps: must be > 0"),
        (["baseline", "--episodes", "{anno}", "--alpha", "inf"], "--alpha: must be a finite number >= 0"),
        (["baseline", "--episodes", "{anno}", "--dataset", "XYZ"], "unknown ProactiveBench dataset 'XYZ'"),
    ],
)
def test_clear_errors(pvqa_files, argv, message, capsys):
    anno, preds = pvqa_files
    argv = [a.format(anno=anno, preds=preds) for a in argv]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_record_error_names_file_record_field(pvqa_files, tmp_path, capsys):
    anno, preds = pvqa_files
    bad = json.loads(anno.read_text())
    bad[1]["answer"][0]["reply_timespan"] = [15.0, 5.0]
    anno.write_text(json.dumps(bad))
    assert main(["score", "--episodes", str(anno), "--predictions", str(preds), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert str(anno) in err and "'v2'" in err and "answer[0].reply_timespan" in err
    # with --on-error skip the good record is scored
    assert (
        main(["score", "--episodes", str(anno), "--predictions", str(preds), "--on-error", "skip", "--no-progress"])
        == 0
    )


def test_convert_pvqa_and_proactivebench(pvqa_files, tmp_path, capsys):
    anno, _ = pvqa_files
    out = tmp_path / "eps.json"
    assert main(["convert", "--from", "pvqa", str(anno), "--out", str(out)]) == 0
    episodes = load_episodes(out)
    assert [e.id for e in episodes] == ["v1", "v2"] and episodes[0].targets[1].window == (20.0, 30.0)
    pb = tmp_path / "pb.jsonl"
    pb.write_text(
        json.dumps(
            {
                "id": "r",
                "image_template": "{}.jpg",
                "first_image": 0,
                "num_images": 2,
                "prompt": "what?",
                "options": ["A. x"],
                "categories": ["cat"],
                "answer": "cat",
            }
        )
        + "\n"
    )
    assert main(["convert", "--from", "proactivebench", str(pb), "--out", str(tmp_path / "pb_out.jsonl")]) == 0
    assert "wrote 1 records" in capsys.readouterr().out


def test_run_replay_policy_then_score(tmp_path, capsys):
    from PIL import Image

    frames = tmp_path / "frames"
    frames.mkdir()
    for k in range(5):
        Image.new("RGB", (8, 8), (40 * k, 0, 0)).save(frames / f"{k}.png")
    eps = tmp_path / "eps.json"
    eps.write_text(
        json.dumps(
            [
                {
                    "id": "c",
                    "task": "atomic",
                    "duration": 5.0,
                    "instruction": "count",
                    "video": {"frames_dir": "frames", "fps": 1.0},
                    "targets": [{"time": 2.0, "text": "1"}, {"time": 4.0, "text": "2"}],
                }
            ]
        )
    )
    script = tmp_path / "script.jsonl"
    script.write_text(
        json.dumps({"id": "c", "responses": [{"time": 2.0, "text": "1"}, {"time": 3.5, "text": "2"}]}) + "\n"
    )
    run = tmp_path / "run"
    code = main(["run", "--episodes", str(eps), "--policy", f"replay:{script}", "--out", str(run), "--no-progress"])
    assert code == 0
    # the replayed line due at 3.5 s is said at the next frame step, 4 s
    assert load_predictions(run / "predictions.jsonl") == {"c": [Response(2.0, "1"), Response(4.0, "2")]}
    assert "| atomic | 1/1 | 2 | 100.00 | 100.00 |" in capsys.readouterr().out
    assert (run / "results.json").exists() and (run / "timelines.png").exists()
    # speed: one timed step per frame; the responses at 2 s and 4 s meet their targets at once
    overall = json.loads((run / "results.json").read_text())["prs"]["overall"]
    assert overall["frames"] == 5 and math.isfinite(overall["latency_p95_s"]) and overall["latency_p95_s"] >= 0
    assert overall["event_to_response_median_s"] == 0.0
    assert "frames/s" in (run / "report.md").read_text()


def test_replay_reproduces_predictions_due_at_the_same_frame(tmp_path):
    from PIL import Image

    frames = tmp_path / "frames"
    frames.mkdir()
    for k in range(4):
        Image.new("RGB", (8, 8), (40 * k, 0, 0)).save(frames / f"{k}.png")
    episode = {"id": "c", "task": "atomic", "duration": 4.0, "instruction": "count"}
    episode |= {"video": {"frames_dir": "frames", "fps": 1.0}, "targets": [{"time": 2.0, "text": "1"}]}
    (tmp_path / "eps.json").write_text(json.dumps([episode]))
    script = tmp_path / "script.jsonl"
    said = [{"time": 1.2, "text": "one"}, {"time": 1.7, "text": "two"}, {"time": 3.0, "text": "three"}]
    script.write_text(json.dumps({"id": "c", "responses": said}) + "\n")
    run = tmp_path / "run"
    args = ["run", "--episodes", str(tmp_path / "eps.json"), "--policy", f"replay:{script}", "--out", str(run)]
    assert main(args + ["--no-progress", "--no-plots"]) == 0
    # 1.2 s and 1.7 s are both due at the 2 s frame: one turn says both, not one frame apart.
    assert load_predictions(run / "predictions.jsonl") == {"c": [Response(2.0, "one two"), Response(3.0, "three")]}


def test_run_unknown_policy(tmp_path, capsys):
    eps = tmp_path / "eps.json"
    eps.write_text(json.dumps([{"id": "e", "task": "accident", "duration": 5.0, "instruction": "x", "targets": []}]))
    assert main(["run", "--episodes", str(eps), "--policy", "gpt", "--out", str(tmp_path / "r")]) == 2
    assert "unknown policy" in capsys.readouterr().err


def test_policy_specs():
    from proactive_eval.cli import make_policy
    from proactive_eval.common.openai_policy import OpenAIChatPolicy
    from proactive_eval.streaming import SilentPolicy

    assert isinstance(make_policy("silent"), SilentPolicy)
    assert isinstance(make_policy("proactive_eval.streaming:SilentPolicy"), SilentPolicy)
    assert isinstance(make_policy("openai:some-vlm@http://127.0.0.1:9/v1"), OpenAIChatPolicy)  # no request made


def test_out_that_is_a_file_is_one_line(pvqa_files, tmp_path, capsys):
    anno, preds = pvqa_files
    taken = tmp_path / "taken"
    taken.write_text("x")
    for argv in (
        ["score", "--episodes", str(anno), "--predictions", str(preds), "--out", str(taken)],
        ["run", "--episodes", str(anno), "--policy", "silent", "--out", str(taken)],
        ["mcqa", "--data-dir", str(tmp_path), "--policy", "oracle", "--out", str(taken)],
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and f"--out: {taken} is a file" in err[0]
