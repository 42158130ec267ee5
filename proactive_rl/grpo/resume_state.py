"""Exact resume of the two GRPO trainers: a run killed after ``checkpoint-N`` and relaunched with
``resume_from_checkpoint`` continues as the uninterrupted run would have.

What transformers' checkpoint already restores: weights (see below), optimizer, scheduler, `TrainerState` (log
history), the position in the epoch (the Trainer skips the batches already trained) and the global RNG states of
every rank (``rng_state_<rank>.pth``), from which every rollout group draws its sampling seed. What it misses, saved
here per rank as ``proactive_rl_state_<rank>.pt`` in the checkpoint folder by `ResumeStateCallback` and put back by
`restore_resume_state` before training resumes:

- the window order of the epoch the run resumes in: TRL's ``RepeatSampler`` draws each epoch's permutation from one
  seeded generator that a new run starts afresh, so a run resumed in its second epoch replayed the first epoch's
  order (measured under ZeRO-3: the step-3 rollouts differed, |Δw| 2.5e-4); its generator state at the start of the
  checkpoint's epoch, and after that epoch's draw, are saved, and the new sampler starts from the one the resumed
  epoch needs;
- the counters of every `GuardedReward` (completions seen / failed): ``max_error_rate`` is a rate over the whole run;
- the streaming replay's batch RNG (`ReplayGRPOTrainer`, suggestion GRPO with ``replay_mixture``);
- TRL's micro-step counter ``_step`` and, when the checkpoint falls inside a generation cycle
  (``steps_per_generation × num_iterations`` not dividing the steps done), the buffered rollouts
  ``_buffered_inputs`` the next steps train on (TRL 1.16 restarts ``_step`` at 0 and would roll out afresh).

The file holds tensors and plain Python values only (checked when it is written, `plain_state`) and is read with
``torch.load(weights_only=True)``: a checkpoint from elsewhere cannot run code when resumed from. A file that does
not load that way (a crafted pickle, a corrupt file) is refused in one line naming it (`restore_resume_state`), and
makes its checkpoint incomplete for ``resume_from_checkpoint: true`` (`proactive_rl.checkpoints.unsafe_file`).

Weights: ``Trainer._load_from_checkpoint`` (transformers 5.25.0) loads ``model.safetensors`` with a raw
``load_state_dict``, but ``save_pretrained`` writes Qwen-VL weights in the hub's key layout, so a resumed GRPO run
silently went on from the *initial* weights (measured: a run resumed at step 2 ended 2.4e-3 away from the
uninterrupted one). `ResumableGRPOMixin` loads them through `proactive_rl.training.load_checkpoint_weights`, as
the SFT trainer does.

Private library touches (pinned: trl 1.16.0, transformers 5.25.0; declared in ``PRIVATE_TOUCHES``, and
``tests/rl/test_grpo_resume.py`` checks they still exist): ``Trainer._load_from_checkpoint`` and
``GRPOTrainer._get_train_sampler`` (overridden), ``RepeatSampler.generator``, ``GRPOTrainer._step`` and
``GRPOTrainer._buffered_inputs`` (read and written).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from proactive_rl.checkpoints import CheckpointMixin, latest_complete_checkpoint, resolve_resume, wants_latest
from proactive_rl.errors import InputError
from proactive_rl.grpo.reward_guard import GuardedReward
from proactive_rl.training import load_checkpoint_weights

logger = logging.getLogger(__name__)

STATE_FILE = "proactive_rl_state_{rank}.pt"
PRIVATE_TOUCHES = {
    "_load_from_checkpoint": "transformers 5.25.0: Trainer._load_from_checkpoint(resume_from_checkpoint, model=None)"
    " overridden: plain checkpoints load through from_pretrained",
    "_get_train_sampler": "trl 1.16.0: GRPOTrainer._get_train_sampler(dataset=None) returns the RepeatSampler whose"
    " .generator draws every epoch's window order; overridden to start it where the checkpoint's epoch needs",
    "_step": "trl 1.16.0: GRPOTrainer._step, micro-steps done; picks the buffered rollout slice and when to regenerate",
    "_buffered_inputs": "trl 1.16.0: GRPOTrainer._buffered_inputs, the rollouts of the current generation cycle",
}


class ResumableGRPOMixin(CheckpointMixin):
    """Mixed in before ``trl.GRPOTrainer``: every checkpoint gets the resume state (written inside the atomic save of
    `proactive_rl.checkpoints.CheckpointMixin`, which also reads ``resume_from_checkpoint: true`` and stops on a
    pre-emption signal), and ``train(resume_from_checkpoint=...)`` loads the checkpoint's weights and puts that state
    back (module docstring)."""

    _train_sampler = None  # the sampler of the running epoch loop (its generator orders the windows)
    _epoch_start_order = None  # its generator state at the start of the running epoch
    _resumed_order = None  # set by `restore_resume_state`: the state the next sampler starts from

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.add_callback(ResumeStateCallback(self))

    def _get_train_sampler(self, dataset=None):
        sampler = super()._get_train_sampler(dataset)
        if getattr(sampler, "generator", None) is not None:
            self._train_sampler = sampler
            if self._resumed_order is not None:
                sampler.generator.set_state(self._resumed_order)
                self._resumed_order = None
        return sampler

    def checkpoint_extras(self) -> tuple[str, ...]:
        return (STATE_FILE,)

    def write_checkpoint_extras(self, folder: Path) -> None:
        torch.save(plain_state(resume_state(self)), folder / STATE_FILE.format(rank=self.accelerator.process_index))

    def train(self, resume_from_checkpoint: str | bool | None = None, *args, **kwargs):
        resume_from_checkpoint = resolve_resume(self, resume_from_checkpoint)
        restore_resume_state(self, resume_from_checkpoint)
        return super().train(resume_from_checkpoint, *args, **kwargs)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model=None) -> None:
        if not load_checkpoint_weights(self, resume_from_checkpoint, model):
            super()._load_from_checkpoint(resume_from_checkpoint, model)


def _guards(trainer) -> list[GuardedReward]:
    return [f for f in trainer.reward_funcs if isinstance(f, GuardedReward)]


def _generate_every(trainer) -> int:
    return trainer.args.steps_per_generation * trainer.num_iterations


def resume_state(trainer) -> dict[str, Any]:
    """This rank's part of the run state that transformers' checkpoint does not hold (module docstring)."""
    state: dict[str, Any] = {
        "global_step": trainer.state.global_step,
        "reward_guards": [[g.seen, g.errors] for g in _guards(trainer)],
        "trl_step": trainer._step,
        "buffered_inputs": None,
    }
    if trainer._step % _generate_every(trainer) != 0:  # inside a generation cycle: the next steps reuse the buffer
        state["buffered_inputs"] = trainer._buffered_inputs
    replay = getattr(trainer, "replay", None)  # `ReplayGRPOTrainer`'s StreamingReplay
    if replay is not None:
        state["replay_rng"] = replay.rng.getstate()
    sampler = getattr(trainer, "_train_sampler", None)
    if sampler is not None:
        # at the end of an epoch the resumed run starts the next one: it needs the state after this epoch's draw
        at_epoch_end = float(trainer.state.epoch or 0).is_integer()
        state["window_order"] = sampler.generator.get_state() if at_epoch_end else trainer._epoch_start_order
    return state


def plain_state(value: Any, where: str = "state") -> Any:
    """`value` itself, once checked to hold only what ``torch.load(weights_only=True)`` reads back: tensors, `None`,
    `bool`, `int`, `float`, `str`, and lists, tuples and str-keyed dicts of them.

    Raises:
        TypeError: naming the entry of another type (a rollout field this file would not load back).
    """
    if value is None or isinstance(value, (torch.Tensor, bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            plain_state(item, f"{where}[{i}]")
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"resume state: {where} has a {type(key).__name__} key {key!r}; keys must be str")
            plain_state(item, f"{where}[{key!r}]")
        return value
    raise TypeError(
        f"resume state: {where} is a {type(value).__name__}; the file holds tensors and plain Python values only "
        "(it is read with torch.load(weights_only=True))"
    )


class ResumeStateCallback(TrainerCallback):
    """Writes `resume_state` into every checkpoint folder, on every rank (after the Trainer saved its own part)."""

    def __init__(self, trainer):
        self.trainer = trainer

    def on_epoch_begin(self, args, state, control, **kwargs):  # before the epoch draws its window order
        sampler = getattr(self.trainer, "_train_sampler", None)
        if sampler is not None:
            self.trainer._epoch_start_order = sampler.generator.get_state()

    def on_save(self, args, state, control, **kwargs):
        folder = Path(args.output_dir, f"{PREFIX_CHECKPOINT_DIR}-{state.global_step}")
        path = folder / STATE_FILE.format(rank=self.trainer.accelerator.process_index)
        # a save that wrote no folder (save_only_model at the end), or one whose atomic save wrote the file already
        if folder.is_dir() and not path.is_file():
            torch.save(plain_state(resume_state(self.trainer)), path)


def checkpoint_folder(trainer, resume_from_checkpoint: str | bool | None) -> Path | None:
    """The folder a ``train(resume_from_checkpoint=...)`` call resumes from (``True``: the latest complete one in
    output_dir)."""
    if resume_from_checkpoint is None or resume_from_checkpoint is False:
        return None
    if wants_latest(resume_from_checkpoint):
        return latest_complete_checkpoint(trainer.args.output_dir, (STATE_FILE,))
    return Path(resume_from_checkpoint)


def restore_resume_state(trainer, resume_from_checkpoint: str | bool | None) -> None:
    """Put back this rank's `resume_state` from the checkpoint a ``train()`` call resumes from; call before
    ``train``. A checkpoint without the file (written before it existed) resumes with a warning."""
    folder = checkpoint_folder(trainer, resume_from_checkpoint)
    if folder is None:
        return
    rank = trainer.accelerator.process_index
    path = folder / STATE_FILE.format(rank=rank)
    if not path.is_file():
        logger.warning("%s: no %s; the reward counters and rollout buffer start afresh", folder, path.name)
        return
    try:
        state = torch.load(path, map_location=trainer.accelerator.device, weights_only=True)
    except Exception:  # noqa: BLE001 -- a corrupt file or a pickle of other objects: either way not loaded
        raise InputError(
            f"{path}: cannot be loaded safely (torch.load with weights_only=True refuses it: corrupt, or objects "
            "other than tensors and plain values); resume from another checkpoint"
        ) from None
    _check_state(state, path)
    guards = _guards(trainer)
    if len(guards) != len(state["reward_guards"]):
        raise ValueError(
            f"{path}: saved {len(state['reward_guards'])} guarded reward(s), this run has {len(guards)}; "
            "resume with the recipe the checkpoint was trained with"
        )
    for guard, (seen, errors) in zip(guards, state["reward_guards"]):
        guard.seen, guard.errors = seen, errors
    trainer._step = state["trl_step"]
    trainer._buffered_inputs = state["buffered_inputs"]
    replay = getattr(trainer, "replay", None)
    if replay is not None and "replay_rng" in state:
        try:
            replay.rng.setstate(state["replay_rng"])
        except (TypeError, ValueError) as err:
            raise InputError(f"{path}: field 'replay_rng' is not a random.Random state ({err})") from None
    if state.get("window_order") is not None:
        trainer._resumed_order = state["window_order"].cpu()


_STATE_FIELDS = {  # field: (accepted types, required)
    "global_step": (int, True),
    "reward_guards": ((list, tuple), True),
    "trl_step": (int, True),
    "buffered_inputs": ((list, type(None)), True),
    "replay_rng": (tuple, False),
    "window_order": ((torch.Tensor, type(None)), False),
}


def _check_state(state: Any, path: Path) -> None:
    """A state file that loaded safely but is not one `resume_state` wrote is refused in one line naming the field."""
    if not isinstance(state, dict):
        raise InputError(f"{path}: holds a {type(state).__name__}, not a resume state; resume from another checkpoint")
    for field, (types, required) in _STATE_FIELDS.items():
        if field not in state:
            if required:
                raise InputError(f"{path}: no field {field!r}; resume from another checkpoint")
            continue
        if not isinstance(state[field], types) or isinstance(state[field], bool):
            raise InputError(
                f"{path}: field {field!r} is a {type(state[field]).__name__}; resume from another checkpoint"
            )
    pairs = state["reward_guards"]
    if not all(isinstance(p, (list, tuple)) and len(p) == 2 and all(type(n) is int for n in p) for p in pairs):
        raise InputError(f"{path}: field 'reward_guards' is not a list of [seen, errors] pairs of integers")
    order = state.get("window_order")
    if order is not None and order.dtype != torch.uint8:
        raise InputError(f"{path}: field 'window_order' is a {order.dtype} tensor, not a generator state (uint8)")
