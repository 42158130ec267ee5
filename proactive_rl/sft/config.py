"""Arguments of `proactive-rl train` (SFT), parsed by ``trl.TrlParser`` from a YAML recipe plus CLI overrides.

Three dataclasses, as in open-r1: :class:`SFTScriptArguments` (data), :class:`ProactiveSFTConfig` (a
``trl.SFTConfig`` with the docs/spec.md §3 loss knobs) and ``trl.ModelConfig`` (model, dtype, attention, LoRA).
Everything is validated in ``__post_init__`` so that a bad recipe fails before a model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trl import SFTConfig

from proactive_rl.chat.messages import TRUNCATION
from proactive_rl.data.mixture import ON_ERROR, check_data_arguments
from proactive_rl.evaluation.config import EvalCallbackConfig

DATA_PIPELINES = ("lazy", "eager")


@dataclass
class SFTScriptArguments:
    """Data of an SFT run.

    Args:
        dataset_mixture (`list` or `dict`): training sources, see :class:`DatasetSource`. Example::

            dataset_mixture:
              - {source: synthetic, task: atomic, num_episodes: 64, seed: 0}
              - {source: data/accident.json, weight: 1.0}
        eval_mixture (`list` or `dict`, *optional*): held-out sources, same form.
        register_tasks (`list[str]`, *optional*): user tasks to add to the task table before the data loads, by
            import path (``my_pkg.tasks:SPEC`` or a module that registers them; `proactive_rewards.load_tasks`).
        on_bad_record (`str`, *optional*, defaults to `"raise"`): ``"raise"`` stops before the first step naming the
            record; ``"skip"`` drops bad records and reports how many and why.
        truncation (`str`, *optional*, defaults to `"drop_frames"`): an episode longer than ``max_length`` drops
            whole early frames (keeping the instruction) or, with ``"error"``, is a bad record.
        max_frames (`int`, *optional*): keep only the latest K images in the history (docs/spec.md §2); text stays.
        freeze_vision_tower (`bool`, *optional*, defaults to `True`): P³I setting: vision encoder frozen, language
            model and merger trainable.
        data_pipeline (`str`, *optional*, defaults to `"lazy"`): ``"lazy"`` validates and measures episodes without
            pixels (a cached ``Dataset.map``) and decodes each batch's frames in the DataLoader
            (`proactive_rl.data.lazy`); ``"eager"`` encodes every episode in memory before step 1 (same batches).
        data_cache_dir (`str`, *optional*): where measured datasets are cached (default
            ``$PROACTIVE_RL_CACHE/measured`` or ``~/.cache/proactive_rl/measured``).
        data_num_proc (`int`, *optional*): processes of the measuring ``Dataset.map``.
    """

    # `proactive-rl train` dispatches on this recipe field (proactive_rl.cli.TRAINERS).
    trainer: str = field(default="sft", metadata={"help": "Trainer to dispatch to (sft for this one)."})
    # user tasks by import path, registered before the data loads (proactive_rewards.load_tasks).
    register_tasks: list[str] | None = field(default=None, metadata={"help": "User tasks: import paths."})
    dataset_mixture: Any = field(default=None, metadata={"help": "Training sources (list of mappings)."})
    eval_mixture: Any = field(default=None, metadata={"help": "Held-out sources (same form)."})
    on_bad_record: str = field(default="raise", metadata={"help": f"One of {ON_ERROR}."})
    truncation: str = field(default="drop_frames", metadata={"help": f"One of {TRUNCATION}."})
    max_frames: int | None = field(default=None, metadata={"help": "Keep only the latest K images."})
    freeze_vision_tower: bool = field(default=True, metadata={"help": "Freeze the vision encoder (P³I)."})
    data_pipeline: str = field(default="lazy", metadata={"help": f"One of {DATA_PIPELINES}."})
    data_cache_dir: str | None = field(default=None, metadata={"help": "Cache of measured datasets."})
    data_num_proc: int | None = field(default=None, metadata={"help": "Processes of the measuring map."})
    # evaluators run while training: a mapping, see `proactive_rl.evaluation.EvalCallbackConfig`.
    eval_callback: Any = field(default=None, metadata={"help": "Evaluators run while training."})

    def __post_init__(self):
        check_data_arguments(self)
        if self.truncation not in TRUNCATION:
            raise ValueError(f"truncation: expected one of {TRUNCATION}, got {self.truncation!r}")
        if self.data_pipeline not in DATA_PIPELINES:
            raise ValueError(f"data_pipeline: expected one of {DATA_PIPELINES}, got {self.data_pipeline!r}")
        if self.max_frames is not None and self.max_frames < 1:
            raise ValueError(f"max_frames: must be >= 1, got {self.max_frames}")
        if self.eval_callback is not None:  # validated before a model is loaded
            self.eval_callback = EvalCallbackConfig.from_dict(self.eval_callback, "eval_callback")


@dataclass
class ProactiveSFTConfig(SFTConfig):
    """``trl.SFTConfig`` plus the docs/spec.md §3 loss.

    Args:
        focal_gamma (`float`, *optional*, defaults to `2.0`): focal exponent ``γ`` on the state tokens.
        state_balance (`bool`, *optional*, defaults to `True`): frequency balancing ``(N_s / (K · n_y))^β``.
        state_balance_power (`float`, *optional*, defaults to `1.0`): its exponent ``β`` (1: P³I's balancing;
            0.5: smoothed, more of the loss left to the answers' words).
        content_weight (`float`, *optional*, defaults to `1.0`): weight of the other supervised tokens (the answers'
            words and end-of-turn tokens) against the state tokens'.
    """

    focal_gamma: float = field(default=2.0, metadata={"help": "Focal exponent on the state tokens (docs/spec.md §3)."})
    state_balance: bool = field(
        default=True, metadata={"help": "Frequency-balance the state tokens (docs/spec.md §3)."}
    )
    state_balance_power: float = field(
        default=1.0, metadata={"help": "Exponent of the frequency balancing (docs/spec.md §3; 1 = P³I)."}
    )
    content_weight: float = field(
        default=1.0, metadata={"help": "Weight of the answers' tokens against the state tokens' (docs/spec.md §3)."}
    )

    def __post_init__(self):
        # Episodes are rendered by our collator; SFTTrainer's own tokenisation would fight the frame turns.
        self.remove_unused_columns = False
        self.dataset_kwargs = {**(self.dataset_kwargs or {}), "skip_prepare_dataset": True}
        super().__post_init__()
        if self.focal_gamma < 0:
            raise ValueError(f"focal_gamma: must be >= 0, got {self.focal_gamma}")
        if not 0 <= self.state_balance_power <= 1:
            raise ValueError(f"state_balance_power: must be in [0, 1], got {self.state_balance_power}")
        if not self.content_weight > 0:
            raise ValueError(f"content_weight: must be > 0, got {self.content_weight}")
        if self.packing or self.padding_free:
            raise ValueError("packing / padding_free: not supported for streaming dialogues (set both to false)")
