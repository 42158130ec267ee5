"""Evaluation on real, imperfect data with `proactive-eval` (docs/spec.md §1, §4, §13).

- converted files keep their videos wherever they are written (and ``--video-root`` for a moved dataset);
- an episode whose video is missing or truncated is named in results.json, left out of the metrics, counted in
  the coverage printed beside them, and a re-run replays nothing already finished;
- intervention PRS scores content as the intervention reward does (token-F1), or with the ``--judge``.
"""

import json
from pathlib import Path

import numpy as np
import pytest

from proactive_eval import cli
from proactive_eval.benchmarks.proactivebench.environments import load_environments, run_environment
from proactive_eval.streaming import ScriptedPolicy
from proactive_eval.video import write_video
from tests.support.fake_openai import FakeOpenAI
from tests.support.media import cut, write_head_indexed_video, write_png

FRAMES = [np.full((16, 16, 3), 40 * k, np.uint8) for k in range(6)]


def _pvqa_dataset(root: Path) -> Path:
    """ProactiveVideoQA layout: ``WEB/anno.json`` and ``WEB/videos/<name>.mp4``."""
    anno = [
        {
            "video": f"{name}.mp4",
            "question_id": name,
            "duration": 6.0,
            "conversation": [{"role": "user", "content": "What rolls in?", "time": 0}],
            "answer": [{"content": "a red ball", "reply_timespan": [1.0, 5.0], "related_timespan": [1.0, 3.0]}],
        }
        for name in ("a", "b")
    ]
    (root / "WEB" / "videos").mkdir(parents=True)
    for name in ("a", "b"):
        write_video(root / "WEB" / "videos" / f"{name}.mp4", FRAMES, fps=1.0)
    path = root / "WEB" / "anno.json"
    path.write_text(json.dumps(anno))
    return path


def _replay(path: Path, lines: dict) -> Path:
    path.write_text("".join(json.dumps({"id": k, "responses": v}) + "\n" for k, v in lines.items()))
    return path


def _results(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


def test_pvqa_converted_elsewhere_plays_its_videos(tmp_path, capsys):
    anno = _pvqa_dataset(tmp_path / "PVQA")
    out = tmp_path / "conv" / "web.json"
    assert cli.main(["convert", "--from", "pvqa", str(anno), "--out", str(out)]) == 0
    assert "not found" not in capsys.readouterr().err
    assert json.loads(out.read_text())[0]["video"] == "../PVQA/WEB/videos/a.mp4"  # relative to the output

    preds = _replay(tmp_path / "p.jsonl", {k: [{"time": 2.0, "text": "a red ball"}] for k in "ab"})
    run = tmp_path / "run"
    argv = ["run", "--episodes", str(out), "--policy", f"replay:{preds}", "--out", str(run)]
    assert cli.main(argv + ["--no-progress", "--no-plots"]) == 0
    results = _results(run)
    assert results["failures"] == [] and results["pauc"]["overall"]["coverage"] == "2/2"
    assert results["pauc"]["overall"]["answered_turns"] == 2


def test_moved_dataset_with_video_root_and_missing_videos_reported_at_conversion(tmp_path, capsys):
    anno = _pvqa_dataset(tmp_path / "PVQA")
    moved = tmp_path / "annotations" / "anno.json"  # the annotation alone, away from its videos
    moved.parent.mkdir()
    moved.write_text(anno.read_text())
    out = tmp_path / "conv" / "web.json"
    assert cli.main(["convert", "--from", "pvqa", str(moved), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "2 of 2 videos not found" in err and "a.mp4" in err and "--video-root" in err

    argv = ["convert", "--from", "pvqa", str(moved), "--out", str(out), "--video-root", str(anno.parent)]
    assert cli.main(argv + ["--paths", "absolute"]) == 0
    assert "not found" not in capsys.readouterr().err
    assert json.loads(out.read_text())[1]["video"] == str((anno.parent / "videos" / "b.mp4").resolve())

    (anno.parent / "videos" / "b.mp4").unlink()
    assert cli.main(["convert", "--from", "pvqa", str(anno), "--out", str(out)]) == 0
    assert "1 of 2 videos not found: " in capsys.readouterr().err


def test_p3i_converted_elsewhere_plays_its_videos(tmp_path):
    data = tmp_path / "p3i" / "data.json"
    (data.parent / "clips").mkdir(parents=True)
    write_video(data.parent / "clips" / "p1.mp4", FRAMES, fps=1.0)
    record = {"video_id": "p1", "task": "atomic", "video": "clips/p1.mp4", "duration": 6.0, "query": "Count."}
    data.write_text(json.dumps([{**record, "answers": [{"timestamp": 2.0, "content": "1"}]}]))
    out = tmp_path / "conv" / "p3i.json"
    assert cli.main(["convert", "--from", "p3i", str(data), "--out", str(out)]) == 0
    preds = _replay(tmp_path / "p.jsonl", {"p1": [{"time": 2.0, "text": "1"}]})
    run = tmp_path / "run"
    argv = ["run", "--episodes", str(out), "--policy", f"replay:{preds}", "--out", str(run)]
    assert cli.main(argv + ["--no-progress", "--no-plots"]) == 0
    prs = _results(run)["prs"]["overall"]
    assert (prs["coverage"], prs["prs_b"]) == ("1/1", 100.0)


def test_proactivebench_converted_elsewhere_loads_its_images(tmp_path, capsys):
    src = tmp_path / "ProactiveBench" / "QuickDraw" / "QD_preprocessed.jsonl"
    for k in range(3):
        write_png(src.parent / "images" / f"{k:04d}.png", 50 * k)
    record = {
        "id": 7,
        "image_template": "images/{image}.png",
        "first_image": 0,
        "num_images": 3,
        "prompt": "What is drawn?",
        "options": ["Add more details to the drawing.", "I cannot tell."],
        "categories": ["cat", "dog", "bird", "fish"],
        "answer": "dog",
    }
    src.write_text(json.dumps(record) + "\n")
    out = tmp_path / "conv" / "qd.jsonl"
    assert cli.main(["convert", "--from", "proactivebench", str(src), "--out", str(out)]) == 0
    assert "not found" not in capsys.readouterr().err
    (env,) = load_environments(out, "QD", protocol="unfiltered")  # images resolve beside the converted file
    seen = []

    def policy(observation):
        seen.append((Path(observation.image_path).resolve(), int(observation.image[0, 0, 0])))
        return "A" if observation.step < 2 else "D"

    assert run_environment(env, policy).success
    assert seen == [((src.parent / "images" / f"{k:04d}.png").resolve(), 50 * k) for k in range(3)]


# ---- failures ------------------------------------------------------------------------------------------


def _six_episodes(root: Path) -> Path:
    """ep0..ep3 playable, ep4's video missing, ep5's video cut short (opens, decodes its head, then stops)."""
    episodes = []
    (root / "videos").mkdir(parents=True)
    for k in range(6):
        duration = 20.0 if k == 5 else 6.0
        episodes.append(
            {"id": f"ep{k}", "task": "atomic", "video": f"videos/ep{k}.mp4", "duration": duration}
            | {"instruction": "Count the balls.", "targets": [{"time": 2.0, "text": "1"}]}
        )
        if k < 4:
            write_video(root / "videos" / f"ep{k}.mp4", FRAMES, fps=1.0)
    cut(write_head_indexed_video(root / "videos" / "ep5.mp4", 20))
    path = root / "episodes.json"
    path.write_text(json.dumps(episodes))
    return path


def test_missing_and_truncated_videos_are_skipped_named_and_counted(tmp_path, capsys, monkeypatch):
    episodes = _six_episodes(tmp_path / "data")
    script = {f"ep{k}": [(2.0, "1")] for k in range(6)}
    policies = []

    def make_policy(spec):
        policies.append(ScriptedPolicy(script))
        return policies[-1]

    monkeypatch.setattr(cli, "make_policy", make_policy)
    run = tmp_path / "run"
    argv = ["run", "--episodes", str(episodes), "--policy", "scripted", "--out", str(run), "--no-progress"]
    assert cli.main(argv + ["--no-plots"]) == 0
    printed = capsys.readouterr()
    # metrics over the 4 playable episodes (each right on time: 100), coverage 4/6 beside them
    assert "| atomic | 4/6 | 4 | 100.00 | 100.00 |" in printed.out
    assert "| **overall** | 4/6 |" in printed.out
    results = _results(run)
    assert results["prs"]["overall"]["failed_episodes"] == 2 and results["prs"]["overall"]["prs_b"] == 100.0
    reasons = {f["id"]: f["reason"] for f in results["failures"]}
    assert set(reasons) == {"ep4", "ep5"}
    assert "ep4.mp4: file not found" in reasons["ep4"]
    assert "ep5.mp4: truncated video" in reasons["ep5"]
    assert "ep4" in printed.err and "ep5" in printed.err
    assert "Episodes not played (2" in (run / "report.md").read_text()

    # a second run replays nothing already finished: only the two failed episodes are tried again
    before = (run / "predictions.jsonl").read_bytes()
    assert cli.main(argv + ["--no-plots"]) == 0
    assert {eid for eid, *_ in policies[-1].log} <= {"ep4", "ep5"}
    assert (run / "predictions.jsonl").read_bytes() == before
    assert "(4 episodes resumed from it)" in capsys.readouterr().out
    assert _results(run)["prs"]["overall"]["coverage"] == "4/6"

    # on_error raise: today's stop at the first unplayable episode
    assert cli.main(argv + ["--no-plots", "--on-video-error", "raise"]) == 2
    assert "ep4.mp4: file not found" in capsys.readouterr().err


# ---- content scorer of free-text PRS -------------------------------------------------------------------


@pytest.fixture
def intervention_files(tmp_path):
    episodes = tmp_path / "eps.json"
    record = {"id": "i1", "task": "intervention", "duration": 30.0, "instruction": "Tell me when to act."}
    episodes.write_text(json.dumps([{**record, "targets": [{"time": 5.0, "text": "stop", "window": [4.0, 8.0]}]}]))
    preds = _replay(tmp_path / "p.jsonl", {"i1": [{"time": 5.0, "text": "please stop"}]})
    return episodes, preds


def test_intervention_prs_uses_token_f1_by_default(intervention_files, tmp_path, capsys):
    episodes, preds = intervention_files
    out = tmp_path / "r"
    assert cli.main(["score", "--episodes", str(episodes), "--predictions", str(preds), "--out", str(out)]) == 0
    # "please stop" against "stop": P = 1/2, R = 1, F1 = 2/3 (the intervention reward's credit), inside the window
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| intervention"))
    assert "| 66.67 | 66.67 |" in row and "| rule:token_f1 |" in row
    assert _results(out)["prs"]["groups"]["intervention"]["content_scorer"] == "rule:token_f1"


def test_intervention_prs_uses_the_judge_when_given(intervention_files, tmp_path, capsys, monkeypatch):
    episodes, preds = intervention_files
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with FakeOpenAI(lambda messages: "2") as server:  # "partially covered": c = (2 - 1) / 2
        judge = f"openai:judge@{server.base_url}"
        out = tmp_path / "r"
        argv = ["score", "--episodes", str(episodes), "--predictions", str(preds), "--judge", judge]
        assert cli.main(argv + ["--out", str(out), "--no-progress"]) == 0
        asked = [m["content"] for body in server.bodies for m in body["messages"] if m["role"] == "user"]
    assert any("Ground Truth Answer: stop" in a and "Predicted Answer: please stop" in a for a in asked)
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| intervention"))
    assert "| 50.00 | 50.00 |" in row and judge in row
    assert _results(out)["prs"]["overall"]["content_scorer"] == judge
