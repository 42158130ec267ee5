"""Arguments of `proactive-rl train` (SFT), parsed by ``trl.TrlParser`` from a YAML recipe plus CLI overrides.

Three dataclasses, as in open-r1: :class:`SFTScriptArguments` (data), :class:`ProactiveSFTConfig` (a
``trl.SFTConfig`` with the docs/spec.md §3 loss knobs) and ``trl.ModelConfig`` (model, dtype, attention, LoRA).
Everything is validated in ``__post_init__`` so that a bad recipe fails before a model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trl import SFTConfig

ON_ERROR = ("raise", "skip")
TRUNCATION = ("drop_frames", "error")
_SOURCE_KEYS = {"source", "task", "num_episodes", "seed", "weight", "name", "knobs"}


@dataclass
class DatasetSource:
    """One entry of a dataset mixture.

    Args:
        source (`str`): an episode file (JSON / JSONL, docs/spec.md §1) or ``"synthetic"`` for the embedded generator.
        weight (`float`, *optional*, defaults to `1.0`): how many times each episode is used; a fraction keeps
            a deterministic subset (``0.5`` = half), ``2.0`` repeats every episode twice.
        task (`str`, *optional*): the synthetic task (required when ``source="synthetic"``).
        num_episodes (`int`, *optional*): how many synthetic episodes to generate.
        seed (`int`, *optional*, defaults to `0`): generator seed (synthetic) and subsampling seed.
        name (`str`, *optional*): a label for logs; defaults to the source (and task).
        knobs (`dict`, *optional*): extra keyword arguments of ``generate_episodes``.
    """

    source: str
    weight: float = 1.0
    task: str | None = None
    num_episodes: int | None = None
    seed: int = 0
    name: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> DatasetSource:
        if isinstance(raw, str):
            raw = {"source": raw}
        if not isinstance(raw, dict) or "source" not in raw:
            raise ValueError(
                f"{where}: expected a mapping with a 'source' (an episode file or 'synthetic'), got {raw!r}"
            )
        unknown = set(raw) - _SOURCE_KEYS
        if unknown:
            raise ValueError(f"{where}: unknown keys {sorted(unknown)}; expected some of {sorted(_SOURCE_KEYS)}")
        src = cls(**raw)
        if not (isinstance(src.weight, (int, float)) and src.weight > 0):
            raise ValueError(f"{where}.weight: must be a number > 0, got {src.weight!r}")
        if src.source == "synthetic":
            if not src.task or not src.num_episodes or src.num_episodes < 1:
                raise ValueError(f"{where}: a synthetic source needs 'task' and 'num_episodes' >= 1")
        elif src.task is not None or src.num_episodes is not None:
            raise ValueError(f"{where}: 'task' and 'num_episodes' only apply to source: synthetic")
        src.name = src.name or (f"synthetic/{src.task}" if src.source == "synthetic" else src.source)
        return src


def parse_mixture(raw: Any, where: str = "dataset_mixture") -> list[DatasetSource]:
    """A mixture is a list of sources (or ``{"datasets": [...]}``); each source is a path or a mapping."""
    if isinstance(raw, dict) and "datasets" in raw:
        raw = raw["datasets"]
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: expected a non-empty list of sources, got {raw!r}")
    return [DatasetSource.from_dict(item, f"{where}[{i}]") for i, item in enumerate(raw)]


def check_data_arguments(args) -> None:
    """Parse ``dataset_mixture`` / ``eval_mixture`` and check ``on_bad_record`` of a trainer's script arguments."""
    if args.dataset_mixture is None:
        raise ValueError("dataset_mixture: required (a list of sources: episode files or synthetic tasks)")
    args.dataset_mixture = parse_mixture(args.dataset_mixture, "dataset_mixture")
    if args.eval_mixture is not None:
        args.eval_mixture = parse_mixture(args.eval_mixture, "eval_mixture")
    if args.on_bad_record not in ON_ERROR:
        raise ValueError(f"on_bad_record: expected one of {ON_ERROR}, got {args.on_bad_record!r}")


@dataclass
class SFTScriptArguments:
    """Data of an SFT run.

    Args:
        dataset_mixture (`list` or `dict`): training sources, see :class:`DatasetSource`. Example::

            dataset_mixture:
              - {source: synthetic, task: atomic, num_episodes: 64, seed: 0}
              - {source: data/accident.json, weight: 1.0}
        eval_mixture (`list` or `dict`, *optional*): held-out sources, same form.
        on_bad_record (`str`, *optional*, defaults to `"raise"`): ``"raise"`` stops before the first step naming the
            record; ``"skip"`` drops bad records and reports how many and why.
        truncation (`str`, *optional*, defaults to `"drop_frames"`): an episode longer than ``max_length`` drops
            whole early frames (keeping the instruction) or, with ``"error"``, is a bad record.
        max_frames (`int`, *optional*): keep only the latest K images in the history (docs/spec.md §2); text stays.
        freeze_vision_tower (`bool`, *optional*, defaults to `True`): P³I setting: vision encoder frozen, language
            model and merger trainable.
    """

    # `proactive-rl train` dispatches on this recipe field (proactive_rl.cli.TRAINERS).
    trainer: str = field(default="sft", metadata={"help": "Trainer to dispatch to (sft for this one)."})
    dataset_mixture: Any = field(default=None, metadata={"help": "Training sources (list of mappings)."})
    eval_mixture: Any = field(default=None, metadata={"help": "Held-out sources (same form)."})
    on_bad_record: str = field(default="raise", metadata={"help": f"One of {ON_ERROR}."})
    truncation: str = field(default="drop_frames", metadata={"help": f"One of {TRUNCATION}."})
    max_frames: int | None = field(default=None, metadata={"help": "Keep only the latest K images."})
    freeze_vision_tower: bool = field(default=True, metadata={"help": "Freeze the vision encoder (P³I)."})
    # evaluators run while training: a mapping, see `proactive_rl.callbacks.EvalCallbackConfig`.
    eval_callback: Any = field(default=None, metadata={"help": "Evaluators run while training."})

    def __post_init__(self):
        check_data_arguments(self)
        if self.truncation not in TRUNCATION:
            raise ValueError(f"truncation: expected one of {TRUNCATION}, got {self.truncation!r}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError(f"max_frames: must be >= 1, got {self.max_frames}")
        if self.eval_callback is not None:  # validated before a model is loaded
            from proactive_rl.callbacks.config import EvalCallbackConfig

            self.eval_callback = EvalCallbackConfig.from_dict(self.eval_callback, "eval_callback")


@dataclass
class ProactiveSFTConfig(SFTConfig):
    """``trl.SFTConfig`` plus the docs/spec.md §3 loss.

    Args:
        focal_gamma (`float`, *optional*, defaults to `2.0`): focal exponent ``γ`` on the state tokens.
        state_balance (`bool`, *optional*, defaults to `True`): frequency balancing ``N_s / (K · n_y)``.
    """

    focal_gamma: float = field(default=2.0, metadata={"help": "Focal exponent on the state tokens (docs/spec.md §3)."})
    state_balance: bool = field(default=True, metadata={"help": "Frequency-balance the state tokens (docs/spec.md §3)."})

    def __post_init__(self):
        # Episodes are rendered by our collator; SFTTrainer's own tokenisation would fight the frame turns.
        self.remove_unused_columns = False
        self.dataset_kwargs = {**(self.dataset_kwargs or {}), "skip_prepare_dataset": True}
        super().__post_init__()
        if self.focal_gamma < 0:
            raise ValueError(f"focal_gamma: must be >= 0, got {self.focal_gamma}")
        if self.packing or self.padding_free:
            raise ValueError("packing / padding_free: not supported for streaming dialogues (set both to false)")
