"""Which checkpoint ``resume_from_checkpoint: true`` picks, the atomic save and the pre-emption signals
(`proactive_rl.checkpoints`, `proactive_rl.preemption`), without training: folders are written by hand here, as the
Trainer lays them out (the end-to-end runs are in `tests/rl/test_preemption.py`)."""

from __future__ import annotations

import inspect
import json
import logging
import signal
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from proactive_rl.checkpoints import latest_complete_checkpoint, missing_parts, publish, wants_latest
from proactive_rl.errors import InputError
from proactive_rl.preemption import REQUEUE_EXIT_CODE, Preempted, preemption_signals

GRPO_STATE = "proactive_rl_state_{rank}.pt"


def write_checkpoint(root: Path, step: int, ranks: int = 1, extras: bool = True) -> Path:
    """A checkpoint folder with the files a Trainer (and the GRPO resume state) writes."""
    folder = root / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    save_file({"w": torch.full((64, 64), float(step))}, folder / "model.safetensors")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    for name in ("optimizer.pt", "scheduler.pt"):
        torch.save({}, folder / name)
    for rank in range(ranks):
        torch.save({}, folder / f"rng_state_{rank}.pth")
        if extras:
            torch.save({}, folder / GRPO_STATE.format(rank=rank))
    return folder


def cut(path: Path) -> None:
    """Truncate a file to half, as a kill in the middle of writing it leaves it."""
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def test_a_complete_checkpoint_has_nothing_missing(tmp_path):
    folder = write_checkpoint(tmp_path, 4, ranks=2)
    assert missing_parts(folder, (GRPO_STATE,)) is None


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda f: cut(f / "model.safetensors"), "model.safetensors does not load"),
        (lambda f: (f / "trainer_state.json").unlink(), "no readable trainer_state.json"),
        (lambda f: cut(f / "trainer_state.json"), "no readable trainer_state.json"),
        (lambda f: (f / "scheduler.pt").unlink(), "no scheduler state"),
        (lambda f: (f / "rng_state_0.pth").unlink() or (f / "rng_state_1.pth").unlink(), "no RNG state"),
        (lambda f: (f / GRPO_STATE.format(rank=1)).unlink(), "1 file(s) proactive_rl_state"),
        (lambda f: (f / "trainer_state.json").write_text('{"global_step": 3}'), "at step 3"),
    ],
)
def test_each_missing_or_cut_part_makes_a_checkpoint_incomplete(tmp_path, damage, reason):
    folder = write_checkpoint(tmp_path, 4, ranks=2)
    damage(folder)
    assert reason in (missing_parts(folder, (GRPO_STATE,)) or "")


def test_latest_complete_skips_and_names_newer_cut_ones_and_keeps_them(tmp_path, caplog):
    write_checkpoint(tmp_path, 2)
    cut(write_checkpoint(tmp_path, 10) / "model.safetensors")  # 10 > 4: the order is numeric, not by name
    write_checkpoint(tmp_path, 4)
    (tmp_path / "tmp-checkpoint-12").mkdir()  # a save in progress is never a candidate
    with caplog.at_level(logging.WARNING, logger="proactive_rl.checkpoints"):
        assert latest_complete_checkpoint(tmp_path, (GRPO_STATE,)) == tmp_path / "checkpoint-4"
    assert [r.getMessage() for r in caplog.records if "checkpoint-10" in r.getMessage()]
    assert (tmp_path / "checkpoint-10" / "model.safetensors").is_file()  # skipped, not deleted
    assert latest_complete_checkpoint(tmp_path / "missing") is None


def test_true_in_any_spelling_asks_for_the_latest():
    assert [wants_latest(v) for v in (True, "true", "True", " TRUE ")] == [True] * 4
    assert [wants_latest(v) for v in (None, False, "false", "out/checkpoint-2")] == [False] * 4


def test_publish_renames_and_keeps_an_incomplete_folder_of_the_same_step(tmp_path):
    staged = write_checkpoint(tmp_path / "tmp-checkpoint-4", 4)
    final = tmp_path / "checkpoint-4"
    final.mkdir()
    (final / "model.safetensors").write_bytes(b"cut")
    publish(staged, final)
    assert missing_parts(final) is None and not staged.exists()
    assert (tmp_path / "incomplete-checkpoint-4" / "model.safetensors").read_bytes() == b"cut"
    again = write_checkpoint(tmp_path / "tmp-checkpoint-4b", 4)  # the same step saved again: replaced
    publish(again, final)
    assert missing_parts(final) is None and sorted(p.name for p in tmp_path.iterdir() if "old" in p.name) == []


def test_signals_are_configurable_and_checked():
    assert preemption_signals("TERM,USR1") == [signal.SIGTERM, signal.SIGUSR1]
    assert preemption_signals("sigusr2") == [signal.SIGUSR2]
    assert preemption_signals("none") == [] and preemption_signals("") == []
    for bad in ("KILL", "NOPE"):
        with pytest.raises(InputError, match="PROACTIVE_RL_PREEMPT_SIGNALS"):
            preemption_signals(bad)


def test_a_preempted_run_exits_with_the_requeue_status(monkeypatch):
    import proactive_rl.training as training

    def main(*args):
        raise Preempted(3, "out/checkpoint-3", signal.SIGTERM)

    monkeypatch.setattr(training, "parse_recipe", lambda parser, argv: ())
    monkeypatch.setattr(training, "check_inputs", lambda *args: None)
    assert training.run_entry_point(lambda: None, main, []) == REQUEUE_EXIT_CODE == 75


def test_private_touches_still_exist_in_the_installed_transformers():
    """Fails loudly when transformers changes what `CheckpointMixin` wraps (pinned: transformers 5.25.0)."""
    import transformers.trainer
    from transformers import Trainer

    assert list(inspect.signature(Trainer._save_checkpoint).parameters) == ["self", "model", "trial"]
    assert list(inspect.signature(Trainer._get_output_dir).parameters) == ["self", "trial"]
    # what the wrapped save writes through is exercised by the atomic-save tests above and tests/rl/test_preemption.py
    assert callable(transformers.trainer_utils.get_last_checkpoint)
