"""`proactive-rl eval --watch` and ``--model``.

Unit tests drive `CheckpointWatcher.pending` with explicit clocks over hand-made checkpoint folders; the end-to-end
test starts the watcher as its own process before a tiny training run with the callback, and checks that every
checkpoint is evaluated exactly once (also across a restart), that a truncated checkpoint is reported clearly, and
that the leaderboard holds the callback's numbers (and the same predictions) for the same checkpoints.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from proactive_rl.evaluation.watch import CheckpointWatcher, list_checkpoints

ROOT = Path(__file__).resolve().parents[2]


def fake_checkpoint(run: Path, step: int, complete: bool = True) -> Path:
    path = run / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "config.json").write_text("{}")
    (path / "model.safetensors").write_bytes(b"x" * 10)
    if complete:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


def test_list_checkpoints_sorts_by_step_and_ignores_others(tmp_path):
    for step in (10, 2, 100):
        fake_checkpoint(tmp_path, step)
    (tmp_path / "checkpoint-x").mkdir()
    (tmp_path / "runs").mkdir()
    assert [s for s, _ in list_checkpoints(tmp_path)] == [2, 10, 100]


def test_pending_waits_for_trainer_state_and_stable_files(tmp_path):
    run = tmp_path / "run"
    watcher = CheckpointWatcher(run, tmp_path / "watch", [], load=None, settle_s=5.0)
    assert watcher.pending(now=0.0) == []  # no run folder yet
    ckpt = fake_checkpoint(run, 2, complete=False)
    assert watcher.pending(now=0.0) == [] and watcher.pending(now=100.0) == []  # still being written
    (ckpt / "trainer_state.json").write_text("{}")
    assert watcher.pending(now=100.0) == []  # first seen complete: the settle clock starts
    assert watcher.pending(now=104.0) == []
    (ckpt / "model.safetensors").write_bytes(b"x" * 20)  # a file still growing restarts the clock
    assert watcher.pending(now=104.5) == []
    assert watcher.pending(now=109.0) == []
    [(step, path, _)] = watcher.pending(now=109.5)
    assert step == 2 and path == str(ckpt)
    (ckpt / "eval").mkdir()  # the training callback writing its results does not count as a change
    (ckpt / "eval" / "results.json").write_text("{}")
    assert len(watcher.pending(now=110.0)) == 1


def test_finished_needs_the_final_state_and_every_checkpoint(tmp_path):
    run = tmp_path / "run"
    fake_checkpoint(run, 2)
    watcher = CheckpointWatcher(run, tmp_path / "watch", [], load=None, settle_s=0.0)
    assert not watcher.finished()
    (run / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    assert not watcher.finished()  # checkpoint-2 not evaluated yet
    watcher.state["checkpoints"]["checkpoint-2"] = {"step": 2, "status": "ok"}
    assert watcher.finished()


def test_corrupt_checkpoint_is_reported_and_skipped_until_it_changes(tmp_path, capsys):
    run = tmp_path / "run"
    ckpt = fake_checkpoint(run, 4)

    def load(path):
        raise OSError(f"Error while deserializing header: {path / 'model.safetensors'} is truncated")

    watcher = CheckpointWatcher(run, tmp_path / "watch", [], load=load, settle_s=0.0, plots=False)
    [(step, path, digest)] = watcher.pending()
    entry = watcher.evaluate(step, path, digest)
    assert entry["status"] == "corrupt" and "truncated" in entry["error"]
    err = capsys.readouterr().err
    assert f"{ckpt}: cannot be loaded" in err and "truncated or corrupt" in err
    assert watcher.pending() == []  # not retried while unchanged
    state = json.loads((tmp_path / "watch" / "state.json").read_text())
    assert state["checkpoints"]["checkpoint-4"]["status"] == "corrupt"
    assert "| 4 | corrupt |" in (tmp_path / "watch" / "leaderboard.md").read_text()
    (ckpt / "model.safetensors").write_bytes(b"y" * 30)  # rewritten: tried again
    assert len(watcher.pending()) == 1


# --- acceptance 4: the watcher beside a tiny training run -----------------------------------------------------


def watch_args(recipe: Path, run: Path, *extra: str) -> list[str]:
    return ["eval", "--config", str(recipe), "--watch", str(run), "--poll", "0.3", "--settle", "1", *extra]


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


@pytest.mark.slow
def test_watcher_started_before_training_evaluates_each_checkpoint_once(tmp_path, capsys):
    from test_callbacks import MCQA, prs_eval, tiny_recipe

    from proactive_rl.cli import main
    from proactive_rl.sft.main import train_main

    recipe = tiny_recipe(tmp_path, {"evaluators": [prs_eval(), MCQA]})
    run = tmp_path / "out"
    watch = run / "eval_watch"
    cmd = [sys.executable, "-m", "proactive_rl.cli", *watch_args(recipe, run, "--max-idle", "300")]
    watcher = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(0.5)  # the watcher starts polling an output_dir that does not exist yet
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            train_main(["--config", str(recipe)])
        finally:
            torch.set_num_threads(threads)
        log, _ = watcher.communicate(timeout=600)
    finally:
        watcher.kill()
    assert watcher.returncode == 0, log[-4000:]
    assert "evaluated 2 checkpoint(s)" in log

    state = json.loads((watch / "state.json").read_text())["checkpoints"]
    assert sorted(state) == ["checkpoint-2", "checkpoint-4"]
    assert all(e["status"] == "ok" and e["evaluations"] == 1 for e in state.values())
    leaderboard = {row["step"]: row for row in json.loads((watch / "leaderboard.json").read_text())}
    for step in (2, 4):
        callback = json.loads((run / f"checkpoint-{step}" / "eval" / "results.json").read_text())
        assert leaderboard[step]["metrics"] == pytest.approx(callback["metrics"])
        for name in ("prs/predictions.jsonl", "mcqa/outcomes.jsonl"):  # the same decisions, not just the same numbers
            ours = (watch / f"checkpoint-{step}" / name).read_text()
            assert ours == (run / f"checkpoint-{step}" / "eval" / name).read_text()
    markdown = (watch / "leaderboard.md").read_text()
    assert "| 2 | ok |" in markdown and "| 4 | ok |" in markdown and (watch / "leaderboard.png").exists()

    # restarted: nothing is evaluated again
    stamps = {p: p.stat().st_mtime_ns for p in watch.glob("checkpoint-*/results.json")}
    capsys.readouterr()
    assert main(watch_args(recipe, run, "--once")) == 0
    assert "evaluated 0 checkpoint(s)" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in watch.glob("checkpoint-*/results.json")} == stamps

    # a truncated checkpoint is reported clearly, and the watcher goes on
    bad = shutil.copytree(run / "checkpoint-4", run / "checkpoint-6", ignore=shutil.ignore_patterns("eval"))
    weights = bad / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    assert main(watch_args(recipe, run, "--once")) == 0
    err = capsys.readouterr().err
    assert f"{bad}: cannot be loaded" in err and "truncated or corrupt" in err
    state = json.loads((watch / "state.json").read_text())["checkpoints"]
    assert state["checkpoint-6"]["status"] == "corrupt"
    assert state["checkpoint-2"]["evaluations"] == 1 and state["checkpoint-4"]["evaluations"] == 1
    assert "| 6 | corrupt |" in (watch / "leaderboard.md").read_text()


def test_eval_model_command(tmp_path, capsys):
    from test_callbacks import MCQA

    from proactive_rl.cli import main

    config = tmp_path / "eval.yaml"
    config.write_text(json.dumps({"evaluators": [MCQA]}))  # YAML is a superset of JSON
    out = tmp_path / "res"
    assert main(["eval", "--config", str(config), "--model", "tiny:qwen2_5_vl:xs", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["evaluators"]["mcqa"]["num_items"] == 2
    assert main(["eval", "--config", str(tmp_path / "nope.yaml"), "--model", "x"]) == 2
    assert "nope.yaml" in capsys.readouterr().err
