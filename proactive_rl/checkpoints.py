"""Checkpoints a killed run can trust: which one ``resume_from_checkpoint: true`` picks, and how one is written.

- **Complete or skipped.** `is_complete` says whether a ``checkpoint-N`` folder holds everything a resume needs:
  ``trainer_state.json`` at step N, weights that open (safetensors header and length; every shard of an index;
  a LoRA adapter; DeepSpeed's ``latest`` tag and its folder), the optimizer, scheduler and RNG states (unless
  ``save_only_model``), and the trainer's own extras (`CheckpointMixin.checkpoint_extras`, e.g. the GRPO resume
  state of every rank). `latest_complete_checkpoint` returns the newest such folder of ``output_dir``; a newer
  incomplete one is named in one log line and skipped, never deleted.
- **Loads without running code.** Every pickled file a resume reads (``optimizer.pt``, ``scheduler.pt``,
  ``rng_state*.pth``, the GRPO resume state, DeepSpeed's partitioned states) must load with
  ``torch.load(weights_only=True)`` (`unsafe_file`): a corrupt file, or one holding objects outside torch's safe
  list, makes its checkpoint incomplete, and an explicit ``resume_from_checkpoint`` naming such a folder is refused
  in one line. transformers 5.25.0 loads its own files that way, but DeepSpeed 0.19.8 unpickles its
  ``global_stepN/*.pt`` without restriction: the check runs before either touches them.
- **``true`` means the latest.** `resolve_resume` turns ``true`` (the recipe's boolean or the flag's string) into
  that folder, or into a fresh start said in one line when there is none; an explicit path is used as given (once
  it passes the check above). The main process decides and the others follow (one answer under DDP / ZeRO-3).
- **Atomic save.** `CheckpointMixin` makes the Trainer write a checkpoint under ``tmp-checkpoint-N/`` and rename
  it to ``checkpoint-N`` once every rank has written its part, then rotate old ones (``save_total_limit``): a kill
  at any moment leaves the previous checkpoint or the new one whole, and ``tmp-*`` is never resumed from.

Private library touches (pinned: transformers 5.25.0; declared in ``PRIVATE_TOUCHES``, checked by
``tests/rl/test_checkpoints.py``): ``Trainer._save_checkpoint(model, trial)`` is wrapped and
``Trainer._get_output_dir(trial)`` points it at the staging folder while it runs.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import zipfile
from pathlib import Path

from proactive_rl.errors import InputError
from proactive_rl.preemption import Preempted, PreemptionCallback

logger = logging.getLogger(__name__)

CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
STAGING_PREFIX = "tmp-"
PRIVATE_TOUCHES = {
    "_save_checkpoint": "transformers 5.25.0: Trainer._save_checkpoint(model, trial) writes checkpoint-N under "
    "_get_output_dir(trial), then rotates; wrapped to write under tmp-checkpoint-N and rename when complete",
    "_get_output_dir": "transformers 5.25.0: Trainer._get_output_dir(trial), the run folder _save_checkpoint writes "
    "checkpoint-N into; returns the staging folder during a save",
}


def _opens(path: Path) -> bool:
    """A safetensors file whose header parses and whose length matches it (a truncated file does not open)."""
    # deferred: keeps torch/transformers out of light import paths
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            f.keys()
    except Exception:  # noqa: BLE001 -- any failure to open is "does not load"; the reason is irrelevant here
        return False
    return True


def _weights_problem(folder: Path) -> str | None:
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (ValueError, KeyError):
            return f"{index.name} does not parse"
        bad = next((s for s in shards if not _opens(folder / s)), None)
        return None if bad is None else f"{bad} does not load"
    for name in ("model.safetensors", "adapter_model.safetensors"):
        if (folder / name).is_file():
            return None if _opens(folder / name) else f"{name} does not load"
    latest = folder / "latest"  # DeepSpeed: the tag of the folder holding the partitioned states
    if latest.is_file():
        tag = latest.read_text().strip()
        return None if tag and any((folder / tag).glob("*")) else f"DeepSpeed folder {tag!r} is missing"
    if (folder / "pytorch_model.bin").is_file():
        return None
    return "no model weights"


def _safe_loading(deepspeed: bool) -> contextlib.ExitStack:
    """Where ``torch.load(weights_only=True)`` also accepts transformers' numpy allowlist (its RNG states) and, for
    DeepSpeed's files, the plain-data classes its ZeRO optimizer states pickle (DeepSpeed 0.19.8: measured on a
    ZeRO-3 checkpoint; ``fragment_address`` and ``DynamicLossScaler`` are what ZeRO-1/2 and fp16 add)."""
    # deferred: keeps torch/transformers out of light import paths
    import torch
    from transformers.trainer_pt_utils import safe_globals

    stack = contextlib.ExitStack()
    stack.enter_context(safe_globals())
    if not deepspeed:
        return stack
    try:
        # deferred: optional extra (DeepSpeed)
        import deepspeed  # noqa: F401
    except ImportError:  # nothing can resume from its states then: they get no allowlist
        return stack
    # an import error below is a DeepSpeed change to look at (tests/rl/test_resume_no_pickle.py), not "unsafe"
    from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
    from deepspeed.runtime.zero.config import ZeroStageEnum
    from deepspeed.utils.tensor_fragment import fragment_address

    allowed = [ZeroStageEnum, LossScaler, DynamicLossScaler, fragment_address]
    stack.enter_context(torch.serialization.safe_globals(allowed))
    return stack


def _load_problem(path: Path, deepspeed: bool = False) -> str | None:
    """Why ``path`` does not load with ``torch.load(weights_only=True)``, or `None` when it does. The tensors are
    mapped, not read (``mmap``): the check costs about the size of the file's pickle."""
    # deferred: keeps torch/transformers out of light import paths
    import torch

    try:
        with _safe_loading(deepspeed):
            torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))
    except Exception:  # noqa: BLE001 -- any failure is "cannot be loaded safely"; what it holds is said below
        try:
            unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
        except Exception:  # noqa: BLE001 -- not a torch archive at all
            unsafe = []
        unsafe = [name for name in unsafe if not name.startswith("numpy.")]
        why = f"holds objects torch's weights-only load refuses ({', '.join(unsafe[:3])})" if unsafe else ""
        return f"{path.name} {why or 'does not load with torch.load(weights_only=True)'}: it cannot be loaded safely"
    return None


def unsafe_file(folder: str | Path) -> str | None:
    """Why a pickled file of ``folder`` cannot be loaded safely (module docstring), or `None` when all of them can:
    ``*.pt``, ``*.pth``, ``pytorch_model*.bin`` and, in a DeepSpeed checkpoint, the ``*.pt`` of its tag folder."""
    folder = Path(folder)
    files = [p for pattern in ("*.pt", "*.pth", "pytorch_model*.bin") for p in sorted(folder.glob(pattern))]
    for path in files:
        problem = _load_problem(path)
        if problem:
            return problem
    latest = folder / "latest"
    tag = latest.read_text().strip() if latest.is_file() else ""
    if tag and (folder / tag).is_dir():
        for path in sorted((folder / tag).glob("*.pt")):
            problem = _load_problem(path, deepspeed=True)
            if problem:
                return f"{tag}/{problem}"
    return None


def missing_parts(folder: str | Path, extras=(), save_only_model: bool = False) -> str | None:
    """Why ``folder`` (a ``checkpoint-N``) cannot be resumed from, or `None` when it is complete (module docstring).

    Args:
        extras (`Iterable[str]`, *optional*): glob patterns the trainer's own state adds; each must match a file,
            and a ``{rank}`` pattern must match once per rank that saved an RNG state.
        save_only_model (`bool`, *optional*, defaults to `False`): the run saves no optimizer, scheduler or RNG.
    """
    folder = Path(folder)
    match = CHECKPOINT_RE.match(folder.name)
    try:
        state = json.loads((folder / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return "no readable trainer_state.json"
    if match and state.get("global_step") != int(match.group(1)):
        return f"trainer_state.json is at step {state.get('global_step')}"
    problem = _weights_problem(folder)
    if problem:
        return problem
    ranks = len(list(folder.glob("rng_state*.pth")))
    if not save_only_model:
        deepspeed = (folder / "latest").is_file()  # its folder holds the optimizer (and maybe the scheduler)
        if not (deepspeed or any(folder.glob("optimizer*"))):  # optimizer.pt; FSDP: optimizer_0/
            return "no optimizer state"
        if not (deepspeed or (folder / "scheduler.pt").is_file()):
            return "no scheduler state"
        if ranks == 0:
            return "no RNG state"
    for pattern in extras:
        found = len(list(folder.glob(pattern.replace("{rank}", "*"))))
        if found == 0 or ("{rank}" in pattern and found < ranks):
            return f"{found} file(s) {pattern}"
    return unsafe_file(folder)


def is_complete(folder: str | Path, extras=(), save_only_model: bool = False) -> bool:
    """True when `missing_parts` finds nothing missing."""
    return missing_parts(folder, extras, save_only_model) is None


def checkpoints(output_dir: str | Path) -> list[Path]:
    """The ``checkpoint-N`` folders of ``output_dir``, newest first (by N)."""
    root = Path(output_dir)
    if not root.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in root.iterdir() if p.is_dir() and (m := CHECKPOINT_RE.match(p.name))]
    return [p for _, p in sorted(found, reverse=True)]


def latest_complete_checkpoint(output_dir: str | Path, extras=(), save_only_model: bool = False) -> Path | None:
    """The newest complete ``checkpoint-N`` of ``output_dir``; each newer incomplete one is logged and skipped."""
    for folder in checkpoints(output_dir):
        problem = missing_parts(folder, extras, save_only_model)
        if problem is None:
            return folder
        logger.warning("skipping incomplete checkpoint %s (%s); it is left in place", folder, problem)
    return None


def wants_latest(value) -> bool:
    """``resume_from_checkpoint`` asks for the latest checkpoint: the boolean `True` or the string ``true``."""
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def resolve_resume(trainer, value):
    """What ``trainer.train(resume_from_checkpoint=...)`` gets for a recipe's ``resume_from_checkpoint``: the newest
    complete checkpoint for ``true`` (`None`, said in one line, when there is none), the value itself otherwise.

    The main process looks and broadcasts its answer, so every rank resumes from the same folder.

    Raises:
        InputError: an explicit folder holds a file that cannot be loaded safely (`unsafe_file`).
    """
    latest = wants_latest(value)
    if not latest and (value is None or value is False or str(value).strip().lower() == "false"):
        return None
    # deferred: keeps torch/transformers out of light import paths
    from accelerate.utils import broadcast_object_list

    found = [None, None]  # the folder, and why it cannot be resumed from
    if trainer.accelerator.is_main_process and not latest:
        found = [value, unsafe_file(value) if Path(value).is_dir() else None]
    elif trainer.accelerator.is_main_process:
        folder = latest_complete_checkpoint(
            trainer.args.output_dir, trainer.checkpoint_extras(), trainer.args.save_only_model
        )
        found = [None if folder is None else str(folder), None]
        if folder is None:
            logger.info(
                "resume_from_checkpoint: true: no complete checkpoint in %s; starting fresh", trainer.args.output_dir
            )
        else:
            logger.info("resume_from_checkpoint: true: resuming from %s", folder)
    if trainer.accelerator.num_processes > 1:
        broadcast_object_list(found, from_process=0)
    if found[1]:
        raise InputError(
            f"resume_from_checkpoint {value}: {found[1]}; resume from another checkpoint "
            "(resume_from_checkpoint: true picks the newest one that loads)"
        )
    return found[0] if latest else value


class CheckpointMixin:
    """Mixed in before a ``transformers.Trainer``: atomic checkpoints (module docstring), ``train`` that understands
    ``resume_from_checkpoint: true``, and a save and stop on a pre-emption signal (`proactive_rl.preemption`:
    ``train`` then raises `Preempted`, which the entry points turn into the requeue exit status).

    A trainer whose checkpoints carry more state overrides `checkpoint_extras` (the file patterns it adds) and writes
    them in `write_checkpoint_extras`, both called inside the atomic save.
    """

    _staging_dir: str | None = None

    def checkpoint_extras(self) -> tuple[str, ...]:
        """Glob patterns of this trainer's own files in a checkpoint (``{rank}``: one per rank)."""
        return ()

    def write_checkpoint_extras(self, folder: Path) -> None:
        """Write this rank's own state into ``folder`` (the staging checkpoint), before it is renamed."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.preemption = PreemptionCallback(self)
        self.add_callback(self.preemption)

    def train(self, resume_from_checkpoint=None, *args, **kwargs):
        try:
            output = super().train(resolve_resume(self, resume_from_checkpoint), *args, **kwargs)
        finally:
            self.preemption.restore_handlers()  # also when training raised
        step = self.preemption.stopped_at
        if step is not None:
            checkpoint = str(Path(super()._get_output_dir(None), f"checkpoint-{step}"))
            raise Preempted(step, checkpoint, self.preemption.signum)
        return output

    def _get_output_dir(self, trial) -> str:
        return self._staging_dir if self._staging_dir is not None else super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial) -> None:
        run_dir = Path(super()._get_output_dir(trial))
        name = f"checkpoint-{self.state.global_step}"
        final, staging = run_dir / name, run_dir / f"{STAGING_PREFIX}{name}"
        main = self.args.should_save
        if main and staging.exists():  # left by a save that was killed: never resumed from, written afresh
            shutil.rmtree(staging)
        self.accelerator.wait_for_everyone()
        limit, self.args.save_total_limit = self.args.save_total_limit, None  # rotation waits for the rename
        self._staging_dir = str(staging)
        try:
            super()._save_checkpoint(model, trial)  # writes staging/checkpoint-N
            self.write_checkpoint_extras(staging / name)
        finally:
            self._staging_dir, self.args.save_total_limit = None, limit
        self.accelerator.wait_for_everyone()  # every rank's RNG and extra state is on disk
        if main:
            publish(staging / name, final)
            staging.rmdir()
            if self.state.best_global_step:
                best = run_dir / f"checkpoint-{self.state.best_global_step}"
                self.state.best_model_checkpoint = str(best) if best.exists() else self.state.best_model_checkpoint
            # deferred: keeps torch/transformers out of light import paths
            from transformers.trainer_utils import rotate_checkpoints

            rotate_checkpoints(
                str(run_dir), limit, best_model_checkpoint=self.state.best_model_checkpoint, use_mtime=False
            )
        self.accelerator.wait_for_everyone()  # no rank goes on before checkpoint-N exists


def publish(written: Path, final: Path) -> None:
    """Rename the fully written ``written`` to ``final``. An existing ``final`` (the same step saved again after a
    resume from an earlier checkpoint) is replaced when complete; an incomplete one is kept, renamed aside."""
    if final.exists():
        complete = is_complete(final)
        aside = final.with_name(f"{STAGING_PREFIX}old-{final.name}" if complete else f"incomplete-{final.name}")
        n = 1
        while aside.exists():
            aside, n = final.with_name(f"{aside.name.split('-', 1)[0]}{n}-{final.name}"), n + 1
        os.replace(final, aside)
        if not complete:
            logger.warning("incomplete checkpoint %s kept as %s", final, aside.name)
        os.replace(written, final)
        if complete:
            shutil.rmtree(aside)
        return
    os.replace(written, final)
