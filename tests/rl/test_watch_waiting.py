"""`proactive-rl eval --watch` says what it waits for: the folder, the checkpoint pattern and the rule for a complete
checkpoint, and each checkpoint it has seen with its status; said again only when that changes."""

from __future__ import annotations

from test_watch import fake_checkpoint

from proactive_rl.evaluation.watch import CheckpointWatcher


def test_the_watcher_says_what_it_waits_for(tmp_path, capsys):
    run = tmp_path / "out"
    watcher = CheckpointWatcher(run, tmp_path / "w", [], load=None, settle_s=100.0)
    said = watcher.waiting_for()
    assert said.startswith(f"watching {run} for checkpoint-N folders (trainer_state.json, config.json and weights")
    assert "unchanged for 100 s" in said and said.endswith("seen: none yet")

    fake_checkpoint(run, 4)
    fake_checkpoint(run, 12, complete=False)  # no trainer_state.json yet: not seen
    assert watcher.pending(now=0.0) == []  # seen complete, settling
    watcher.state["checkpoints"]["checkpoint-2"] = {"step": 2, "status": "ok"}
    assert watcher.waiting_for().endswith("seen: checkpoint-2 (ok), checkpoint-4 (settling)")

    watcher.settle_s = 0.0
    assert watcher.run(poll_s=0.01, once=True) == 0  # load=None cannot load it: marked corrupt, not evaluated
    err = capsys.readouterr().err
    assert f"evaluating {run / 'checkpoint-4'}" in err and err.count("watching ") == 1
    assert "seen: checkpoint-2 (ok), checkpoint-4 (corrupt)" in err
