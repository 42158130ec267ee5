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


def test_once_does_not_settle_a_checkpoint_written_minutes_ago(tmp_path, capsys):
    """``--watch --once`` on a finished run: files older than the settle window are whole, so the checkpoint is taken
    at once, not after a settle wait and a poll (30 s by default); one written just now still settles."""
    import os
    import time

    run = tmp_path / "out"
    old = fake_checkpoint(run, 2)
    minutes_ago = time.time() - 300
    for f in old.iterdir():
        os.utime(f, (minutes_ago, minutes_ago))
    fake_checkpoint(run, 4)  # written now: settling
    watcher = CheckpointWatcher(run, tmp_path / "w", [], load=None, settle_s=10.0)
    assert [step for step, _, _ in watcher.pending()] == [2]

    watcher = CheckpointWatcher(run, tmp_path / "w2", [], load=None, settle_s=10.0)
    (run / "checkpoint-4" / "trainer_state.json").unlink()  # only the old checkpoint is complete
    start = time.monotonic()
    assert watcher.run(poll_s=30.0, once=True) == 0  # load=None cannot load it: marked corrupt, not evaluated
    assert time.monotonic() - start < 20
    assert f"evaluating {old}" in capsys.readouterr().err
