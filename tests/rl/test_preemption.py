"""A run stopped by SIGTERM saves the step it reached and raises `Preempted`; a fresh trainer given
``resume_from_checkpoint="true"`` picks that checkpoint (or, when it was cut, the one before) and ends with the
uninterrupted run's weights and logs, in each trainer (`proactive_rl.checkpoints`, `proactive_rl.preemption`).

The signal is sent by the process to itself during a step that is not a regular save step, so the checkpoint found
afterwards can only come from the pre-emption. The reference is the uninterrupted run, same code and seed. Two
processes: `tests/rl/test_preemption_distributed.py`; SIGKILL at random moments of the command:
``benchmarks/preemption.py``.
"""

from __future__ import annotations

import logging
import os
import signal

import pytest
from test_checkpoints import cut
from test_grpo_resume import check_resume, logged, max_dw, same_logs, streaming_trainer, suggestion_trainer, weights
from test_grpo_resume import windows as windows  # noqa: F401 -- the module-scoped fixture
from test_sft_trainer import losses, make_trainer
from transformers import TrainerCallback

from proactive_rl.checkpoints import missing_parts
from proactive_rl.grpo.resume_state import STATE_FILE
from proactive_rl.preemption import Preempted
from tests.support.sft_fixtures import tiny, toy_examples


class SignalDuring(TrainerCallback):
    """Sends `signum` to this process at the beginning of optimizer step `step`."""

    def __init__(self, step: int, signum=signal.SIGTERM):
        self.step, self.signum = step, signum

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step == self.step - 1:
            os.kill(os.getpid(), self.signum)


def preempt(trainer, step: int, signum=signal.SIGTERM):
    """Train until the signal sent during `step` stops the run; returns the `Preempted` raised."""
    trainer.add_callback(SignalDuring(step, signum))
    with pytest.raises(Preempted) as stop:
        trainer.train()
    assert signal.getsignal(signum) is signal.SIG_DFL or signum != signal.SIGTERM  # the handler was put back
    assert (stop.value.step, trainer.state.global_step) == (step, step)
    return stop.value


# --------------------------------------------------------------------------- SFT


SFT = dict(max_steps=4, per_device_train_batch_size=2, save_strategy="steps", save_steps=2)


@pytest.fixture(scope="module")
def toy():
    _, processor = tiny()
    return processor, toy_examples(processor, 8, seed=1)


def sft(out, toy, **overrides):
    processor, examples = toy
    model, _ = tiny()
    return make_trainer(out, examples, processor, model, **{**SFT, **overrides})


def test_sft_sigterm_saves_the_step_reached_and_true_resumes_it_exactly(tmp_path, toy, caplog):
    straight = sft(tmp_path / "a", toy)
    straight.train()
    stop = preempt(sft(tmp_path / "b", toy), 3)
    assert stop.checkpoint == str(tmp_path / "b" / "checkpoint-3")
    assert missing_parts(stop.checkpoint) is None
    assert not list((tmp_path / "b").glob("tmp-*"))
    resumed = sft(tmp_path / "b", toy)
    with caplog.at_level(logging.INFO, logger="proactive_rl.checkpoints"):
        resumed.train(resume_from_checkpoint="true")
    assert f"resuming from {tmp_path / 'b' / 'checkpoint-3'}" in caplog.text  # the step the signal reached
    assert losses(resumed) == pytest.approx(losses(straight), abs=1e-6)  # steps 1-3 restored from the log history
    assert max_dw(weights(straight.model), weights(resumed.model)) <= 1e-6


def test_sft_true_skips_a_cut_checkpoint_and_resumes_the_one_before(tmp_path, toy, caplog):
    straight = sft(tmp_path / "a", toy)
    straight.train()
    preempt(sft(tmp_path / "b", toy), 3, signal.SIGUSR1)
    cut(tmp_path / "b" / "checkpoint-3" / "model.safetensors")  # as a kill during a non-atomic save leaves it
    resumed = sft(tmp_path / "b", toy)
    with caplog.at_level(logging.INFO, logger="proactive_rl.checkpoints"):
        resumed.train(resume_from_checkpoint=True)
    messages = " ".join(r.getMessage() for r in caplog.records)
    assert "skipping incomplete checkpoint" in messages and "checkpoint-3" in messages
    assert f"resuming from {tmp_path / 'b' / 'checkpoint-2'}" in messages
    assert losses(resumed) == pytest.approx(losses(straight), abs=1e-6)
    assert max_dw(weights(straight.model), weights(resumed.model)) <= 1e-6
    assert (tmp_path / "b" / "checkpoint-3" / "model.safetensors").is_file()  # left in place


def test_sft_true_with_no_checkpoint_starts_fresh_in_one_line(tmp_path, toy, caplog):
    trainer = sft(tmp_path / "a", toy, max_steps=1, save_strategy="no")
    with caplog.at_level(logging.INFO, logger="proactive_rl.checkpoints"):
        trainer.train(resume_from_checkpoint="true")
    assert [r for r in caplog.records if "no complete checkpoint" in r.getMessage() and "starting fresh" in r.message]
    assert trainer.state.global_step == 1


# --------------------------------------------------------------------------- GRPO


@pytest.mark.slow
def test_streaming_grpo_sigterm_then_true_resumes_exactly(windows, tmp_path):  # noqa: F811
    straight = streaming_trainer(tmp_path / "a", windows, save_steps=3)
    straight.train()
    stop = preempt(streaming_trainer(tmp_path / "b", windows, save_steps=3), 2)
    checkpoint = tmp_path / "b" / "checkpoint-2"
    assert stop.checkpoint == str(checkpoint) and missing_parts(checkpoint, (STATE_FILE,)) is None
    resumed = streaming_trainer(tmp_path / "b", windows, save_steps=3)
    resumed.train(resume_from_checkpoint="true")
    check_resume(straight, resumed, checkpoint)


@pytest.mark.slow
def test_suggestion_grpo_sigterm_then_true_resumes_exactly(tmp_path):
    straight = suggestion_trainer(tmp_path / "ra", tmp_path / "a", save_steps=3)
    straight.train()
    preempt(suggestion_trainer(tmp_path / "rb", tmp_path / "b", save_steps=3), 2)
    checkpoint = tmp_path / "b" / "checkpoint-2"
    assert missing_parts(checkpoint, (STATE_FILE,)) is None
    resumed = suggestion_trainer(tmp_path / "rc", tmp_path / "b", save_steps=3)
    resumed.train(resume_from_checkpoint="true")
    check_resume(straight, resumed, checkpoint)
    same_logs(logged(resumed, {3, 4}), logged(straight, {3, 4}))
