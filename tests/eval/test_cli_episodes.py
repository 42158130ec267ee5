"""`proactive-eval score`, `run` and `baseline` take one or more ``--episodes`` files the same way, and the count of
prediction ids that match no episode is the same in the warning and in the report."""

from __future__ import annotations

import json
import logging

import numpy as np

from proactive_eval.cli import main
from proactive_eval.video import write_video


def _files(tmp_path):
    write_video(tmp_path / "v.mp4", [np.zeros((16, 16, 3), np.uint8)] * 10, fps=1.0)
    paths = []
    for name, times in (("a", (4.0, 6.0)), ("b", (8.0,))):
        records = [
            {"id": f"{name}{k}", "task": "accident", "duration": 10.0, "instruction": "warn me", "video": "v.mp4",
             "targets": [{"time": t, "text": "Warning"}]}
            for k, t in enumerate(times)
        ]  # fmt: skip
        paths.append(tmp_path / f"{name}.json")
        paths[-1].write_text(json.dumps(records))
    predictions = tmp_path / "p.jsonl"
    lines = [{"id": "a0", "responses": [{"time": 4.0, "text": "</Response> Warning"}]}]
    lines += [{"id": f"stray{k}", "responses": []} for k in range(5)]
    predictions.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return paths, predictions


def test_score_run_and_baseline_take_several_episode_files(tmp_path, capsys, caplog):
    (a, b), predictions = _files(tmp_path)
    with caplog.at_level(logging.WARNING, logger="proactive_eval"):
        argv = ["score", "--episodes", str(a), str(b), "--predictions", str(predictions), "--out", str(tmp_path / "s")]
        assert main([*argv, "--no-plots", "--no-progress"]) == 0
    results = json.loads((tmp_path / "s" / "results.json").read_text())
    assert results["prs"]["overall"]["num_episodes"] == 3 and results["meta"]["episodes"] == f"{a} {b}"
    assert "5 prediction ids match no episode" in caplog.text
    assert results["meta"]["prediction_ids_matching_no_episode"] == 5
    assert "prediction ids matching no episode: 5" in (tmp_path / "s" / "report.md").read_text()

    argv = ["run", "--episodes", str(a), str(b), "--policy", "silent", "--out", str(tmp_path / "r")]
    assert main([*argv, "--no-plots", "--no-progress"]) == 0
    assert json.loads((tmp_path / "r" / "results.json").read_text())["prs"]["overall"]["num_episodes"] == 3

    capsys.readouterr()
    assert main(["baseline", "--episodes", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["prs"]["overall"]["num_episodes"] == 3


def test_baseline_says_when_some_videos_are_missing(tmp_path, capsys):
    (a, _), _ = _files(tmp_path)
    records = json.loads(a.read_text())
    records[1]["video"] = "gone.mp4"
    a.write_text(json.dumps(records))
    assert main(["baseline", "--episodes", str(a), "--json"]) == 0
    err = capsys.readouterr().err
    assert "warning: 1 of 2 episodes' videos are missing" in err and "gone.mp4" in err
    (tmp_path / "v.mp4").unlink()  # none there: annotations alone, no warning (baseline reads no video)
    records[1]["video"] = "v.mp4"
    a.write_text(json.dumps(records))
    assert main(["baseline", "--episodes", str(a), "--json"]) == 0
    assert "warning" not in capsys.readouterr().err
