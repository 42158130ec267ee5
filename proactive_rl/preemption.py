"""A clean stop when the cluster asks for one: on SIGTERM or SIGUSR1 the trainers finish the step they are in, save a
checkpoint, and the command exits with `REQUEUE_EXIT_CODE` (75, ``EX_TEMPFAIL`` of ``sysexits.h``: "try again").

SLURM sends such a signal before it kills a job (``#SBATCH --signal=B:USR1@120``: SIGUSR1 120 s before the time
limit; SIGTERM when the job is pre-empted or cancelled); ``launch/slurm_train.sh`` forwards it to the trainers and
turns the stop into ``scontrol requeue``; the requeued job runs the same command, whose
``resume_from_checkpoint: true`` continues from that checkpoint (`proactive_rl.checkpoints`).

A signal reaches each rank at its own moment, so the ranks agree at the end of every optimizer step: each adds
whether it was signalled (an all-reduce of one number), and all save and stop at the same step.

``PROACTIVE_RL_PREEMPT_SIGNALS`` names the signals (``TERM,USR1`` by default; ``none``: keep Python's defaults).
"""

from __future__ import annotations

import logging
import os
import signal
import threading

from transformers import TrainerCallback

from proactive_rl.errors import InputError

logger = logging.getLogger(__name__)

REQUEUE_EXIT_CODE = 75  # EX_TEMPFAIL: the run stopped on a signal after saving a checkpoint; relaunch it
SIGNALS_ENV = "PROACTIVE_RL_PREEMPT_SIGNALS"
DEFAULT_SIGNALS = "TERM,USR1"


class Preempted(Exception):
    """Raised by a trainer's ``train`` after it saved ``checkpoint`` on a pre-emption signal."""

    def __init__(self, step: int, checkpoint: str, signum: int):
        self.step, self.checkpoint, self.signum = step, checkpoint, signum
        name = signal.Signals(signum).name if signum else "a signal on another rank"
        super().__init__(
            f"stopped by {name} after step {step}; saved {checkpoint}; exit status {REQUEUE_EXIT_CODE} "
            "(relaunch with resume_from_checkpoint: true to continue)"
        )


def preemption_signals(value: str | None = None) -> list[signal.Signals]:
    """The signals named by ``PROACTIVE_RL_PREEMPT_SIGNALS`` (or `value`): ``TERM,USR1``, ``SIGTERM``, ``none``."""
    value = os.environ.get(SIGNALS_ENV, DEFAULT_SIGNALS) if value is None else value
    names = [n.strip().upper() for n in value.split(",") if n.strip()]
    if names in ([], ["NONE"]):
        return []
    out = []
    for name in names:
        full = name if name.startswith("SIG") else f"SIG{name}"
        if full not in signal.Signals.__members__ or full in ("SIGKILL", "SIGSTOP"):
            raise InputError(f"{SIGNALS_ENV}={value}: {name} is not a signal that can be caught; e.g. TERM,USR1")
        out.append(signal.Signals[full])
    return out


class PreemptionCallback(TrainerCallback):
    """Turns a pre-emption signal into a save and a stop at the end of the current optimizer step, on every rank."""

    def __init__(self, trainer):
        self.trainer = trainer
        self.signum = 0  # the signal this rank received (0: none)
        self.stopped_at: int | None = None  # the step saved on a signal
        self._previous: dict[int, object] = {}

    def _handle(self, signum, frame) -> None:
        if not self.signum:
            logger.warning(
                "received %s: saving a checkpoint after this step, then exiting", signal.Signals(signum).name
            )
        self.signum = signum

    def on_train_begin(self, args, state, control, **kwargs):
        self.signum, self.stopped_at = 0, None
        if threading.current_thread() is not threading.main_thread():  # handlers can only be set there
            return
        for sig in preemption_signals():
            self._previous[sig] = signal.signal(sig, self._handle)

    def on_train_end(self, args, state, control, **kwargs):
        self.restore_handlers()

    def restore_handlers(self) -> None:
        """Put back the handlers this callback replaced (at the end of training, and when training raised)."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def on_step_end(self, args, state, control, **kwargs):
        if self._signalled_anywhere():
            control.should_save = True
            control.should_training_stop = True
            self.stopped_at = state.global_step

    def _signalled_anywhere(self) -> bool:
        accelerator = self.trainer.accelerator
        if accelerator.num_processes == 1:
            return bool(self.signum)
        # deferred: keeps torch/transformers out of light import paths
        import torch

        flag = torch.tensor([1.0 if self.signum else 0.0], device=accelerator.device)
        return bool(accelerator.reduce(flag, reduction="sum").item() > 0)
