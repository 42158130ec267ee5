"""Resuming from a checkpoint runs no code from it (`proactive_rl.grpo.resume_state`, `proactive_rl.checkpoints`):
the GRPO resume state is read with ``torch.load(weights_only=True)``, a crafted pickle is refused in one line before
anything in it runs, and a checkpoint whose optimizer (or any pickled file) does not load that way is incomplete:
named, skipped by ``resume_from_checkpoint: true``, left in place."""

from __future__ import annotations

import logging
import pickle
import random
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from test_checkpoints import write_checkpoint
from test_sft_trainer import losses, make_trainer

from proactive_rl.checkpoints import latest_complete_checkpoint, missing_parts
from proactive_rl.errors import InputError
from proactive_rl.grpo import resume_state
from proactive_rl.grpo.reward_guard import GuardedReward
from tests.support.sft_fixtures import tiny, toy_examples

ROOT = Path(__file__).resolve().parents[2]
STATE = resume_state.STATE_FILE


class Payload:
    """Unpickling this object creates ``marker``: the proof that a load ran code from the file."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def craft(path: Path, marker: Path) -> None:
    """A resume-state file whose pickle creates `marker` when unpickled."""
    torch.save({"global_step": 2, "trl_step": Payload(marker)}, path)


def payload_is_live(path: Path, marker: Path) -> bool:
    """The test could fail: the file's pickle, unpickled without restrictions, does create a marker."""
    with zipfile.ZipFile(path) as archive:
        name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
        data = archive.read(name)
    live = marker.with_name(marker.name[::-1])  # same length: the pickle's string lengths still hold
    pickle.loads(data.replace(str(marker).encode(), str(live).encode()))
    return live.exists()


def fake_trainer(tmp_path: Path):
    def reward(completions, **kw):
        return [0.0] * len(completions)

    return SimpleNamespace(
        reward_funcs=[GuardedReward(reward)],
        accelerator=SimpleNamespace(process_index=0, device="cpu"),
        state=SimpleNamespace(global_step=2),
        args=SimpleNamespace(steps_per_generation=2, output_dir=str(tmp_path)),
        num_iterations=1,
        _step=1,  # inside a generation cycle: the buffered rollouts are saved too
        _buffered_inputs=[{"ids": torch.arange(6).view(2, 3), "num_images": [1, 2], "mask": None}],
    )


def test_no_weights_only_false_anywhere():
    needle = "weights_only=" + "False"
    hits = [
        f"{path.relative_to(ROOT)}:{n}"
        for package in ("proactive_rl", "eval", "rewards", "benchmarks", "tests")
        for path in (ROOT / package).rglob("*.py")
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if needle in line
    ]
    assert hits == []


def test_a_crafted_resume_state_is_refused_in_one_line_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    path = folder / STATE.format(rank=0)
    craft(path, marker)
    assert payload_is_live(path, marker)
    with pytest.raises(InputError) as err:
        resume_state.restore_resume_state(fake_trainer(tmp_path), str(folder))
    message = str(err.value)
    assert "\n" not in message and str(path) in message and "cannot be loaded safely" in message
    assert not marker.exists()


def test_true_skips_a_checkpoint_with_a_crafted_state_and_leaves_it(tmp_path, caplog):
    marker = tmp_path / "ran"
    write_checkpoint(tmp_path, 2)
    newest = write_checkpoint(tmp_path, 4)
    craft(newest / STATE.format(rank=0), marker)
    with caplog.at_level(logging.WARNING, logger="proactive_rl.checkpoints"):
        assert latest_complete_checkpoint(tmp_path, (STATE,)) == tmp_path / "checkpoint-2"
    warned = [r.getMessage() for r in caplog.records if "checkpoint-4" in r.getMessage()]
    assert len(warned) == 1 and "proactive_rl_state_0.pt holds objects" in warned[0], warned
    assert "(io.open): it cannot be loaded safely" in warned[0]
    assert not marker.exists() and (newest / STATE.format(rank=0)).is_file()


def test_the_state_round_trips_without_pickle_and_a_wrong_one_is_named(tmp_path):
    saved = fake_trainer(tmp_path)
    saved.reward_funcs[0].seen, saved.reward_funcs[0].errors = 7, 1
    saved.replay = SimpleNamespace(rng=random.Random(5))
    saved.replay.rng.random()
    folder = tmp_path / "checkpoint-2"
    folder.mkdir()
    resume_state.ResumeStateCallback(saved).on_save(saved.args, saved.state, None)
    path = folder / STATE.format(rank=0)
    assert torch.serialization.get_unsafe_globals_in_checkpoint(path) == []
    back = fake_trainer(tmp_path)
    back._step, back._buffered_inputs = 0, None
    back.replay = SimpleNamespace(rng=random.Random(0))
    resume_state.restore_resume_state(back, str(folder))
    assert (back.reward_funcs[0].seen, back.reward_funcs[0].errors, back._step) == (7, 1, 1)
    assert back.replay.rng.random() == saved.replay.rng.random()
    assert back._buffered_inputs[0]["num_images"] == [1, 2] and back._buffered_inputs[0]["mask"] is None
    assert torch.equal(back._buffered_inputs[0]["ids"], torch.arange(6).view(2, 3))

    torch.save({"global_step": 2, "reward_guards": [[1, 0]], "trl_step": "2", "buffered_inputs": None}, path)
    with pytest.raises(InputError, match="field 'trl_step' is a str"):
        resume_state.restore_resume_state(back, str(folder))


def test_a_state_that_would_not_load_back_is_refused_when_written():
    with pytest.raises(TypeError, match=r"state\['buffered_inputs'\]\[0\]\['x'\] is a \w*Path;"):
        resume_state.plain_state({"buffered_inputs": [{"x": Path("a")}]})
    assert resume_state.plain_state({"a": (1, [2.0, None], torch.ones(1))}) is not None


@pytest.mark.parametrize(
    "name, reason",
    [
        ("optimizer.pt", "optimizer.pt does not load"),
        ("scheduler.pt", "scheduler.pt does not load"),
        ("rng_state_0.pth", "rng_state_0.pth does not load"),
    ],
)
def test_a_garbage_pickled_file_makes_a_checkpoint_incomplete(tmp_path, name, reason):
    folder = write_checkpoint(tmp_path, 4)
    (folder / name).write_bytes(random.Random(0).randbytes(4096))
    assert reason in (missing_parts(folder, (STATE,)) or "")


def test_a_deepspeed_state_is_checked_too(tmp_path):
    folder = write_checkpoint(tmp_path, 4)
    (folder / "latest").write_text("global_step4")
    (folder / "global_step4").mkdir()
    torch.save({"module": None}, folder / "global_step4" / "zero_pp_rank_0_mp_rank_00_model_states.pt")
    assert missing_parts(folder, (STATE,)) is None
    craft(folder / "global_step4" / "zero_pp_rank_0_mp_rank_00_optim_states.pt", tmp_path / "ran")
    assert "global_step4/zero_pp_rank_0_mp_rank_00_optim_states.pt holds objects" in missing_parts(folder, (STATE,))
    assert not (tmp_path / "ran").exists()


# --------------------------------------------------------------------------- end to end (tiny SFT run)


@pytest.fixture(scope="module")
def toy():
    _, processor = tiny()
    return processor, toy_examples(processor, 8, seed=1)


def sft(out, toy):
    processor, examples = toy
    model, _ = tiny()
    config = dict(max_steps=4, per_device_train_batch_size=2, save_strategy="steps", save_steps=2)
    return make_trainer(out, examples, processor, model, **config)


def test_a_garbage_optimizer_in_the_newest_checkpoint_is_skipped_and_kept(tmp_path, toy, caplog):
    first = sft(tmp_path, toy)
    first.train()
    garbage = random.Random(0).randbytes(4096)
    (tmp_path / "checkpoint-4" / "optimizer.pt").write_bytes(garbage)

    with pytest.raises(InputError) as err:  # named explicitly: refused in one line, before transformers reads it
        sft(tmp_path, toy).train(resume_from_checkpoint=str(tmp_path / "checkpoint-4"))
    assert "\n" not in str(err.value) and "checkpoint-4" in str(err.value) and "optimizer.pt" in str(err.value)

    resumed = sft(tmp_path, toy)
    with caplog.at_level(logging.INFO, logger="proactive_rl.checkpoints"):
        resumed.train(resume_from_checkpoint=True)
    messages = [r.getMessage() for r in caplog.records]
    skipped = [m for m in messages if "skipping incomplete checkpoint" in m]
    assert len(skipped) == 1 and "checkpoint-4" in skipped[0] and "optimizer.pt does not load" in skipped[0]
    assert f"resume_from_checkpoint: true: resuming from {tmp_path / 'checkpoint-2'}" in messages
    assert losses(resumed) == pytest.approx(losses(first), abs=1e-6)  # steps 3-4 retrained from checkpoint-2
    # the bad folder was never deleted: the re-save of step 4 set it aside
    assert (tmp_path / "incomplete-checkpoint-4" / "optimizer.pt").read_bytes() == garbage
    assert missing_parts(tmp_path / "checkpoint-4") is None
