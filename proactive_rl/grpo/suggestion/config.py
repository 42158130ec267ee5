"""Arguments of proactive-suggestion GRPO (docs/spec.md §6, §7), parsed by ``trl.TrlParser`` from a YAML recipe.

`SuggestionScriptArguments` (environments, reward, generation backend, warm start, replay) with its environment
sources (`EnvironmentSource`, `parse_sources`), ``trl.GRPOConfig`` and ``trl.ModelConfig``. Everything is
validated in ``__post_init__`` so that a bad recipe fails before a model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proactive_rl.training import eval_callback_config

BACKENDS = ("auto", "vllm", "transformers")
_SOURCE_KEYS = {"source", "kind", "num_envs", "seed", "dataset", "data_dir", "max_states", "name", "format"}
FORMATS = ("records", "rows")
# Difficulty knobs of the synthetic environments (`proactive_rl.synthetic.environments.EnvKnobs`) and frame size.
_KNOB_KEYS = {"negatives", "colours", "layout", "corruptions", "object_radius", "colour_weights", "size"}


@dataclass
class EnvironmentSource:
    """One entry of an environment list.

    Args:
        source (`str`): ``"synthetic"`` (the embedded ask-for-help environments) or a ProactiveBench JSONL file.
        format (`str`, *optional*, defaults to `"records"`): a JSONL source holds the authors' records (one
            environment each; every state becomes a row), or ``"rows"``: single-turn training rows written by
            `proactive_rl.data.proactivebench.train_set` (the paper's QuickDraw + MS-COCO set), used as they are.
        kind (`str`, *optional*): synthetic kind (``occlusion``, ``corruption``, ``sketch``, ``zoom_out``).
        num_envs (`int`, *optional*): how many synthetic environments.
        seed (`int`, *optional*, defaults to `0`): synthetic seed (use different seeds for train and held-out).
        dataset (`str`, *optional*): ProactiveBench dataset (``QD``, ``ROD``, ...); defaults to each record's field.
        data_dir (`str`, *optional*): ProactiveBench image root; defaults to the JSONL's folder.
        max_states (`int`, *optional*): training rows per environment (its first states); all by default.
        negatives, colours, layout, corruptions, object_radius, colour_weights, size (*optional*): synthetic difficulty
            knobs and frame size, passed to `proactive_rl.synthetic.make_environments` (see `EnvKnobs`; defaults: the
            standard environments).
    """

    source: str
    kind: str | None = None
    num_envs: int | None = None
    seed: int = 0
    dataset: str | None = None
    data_dir: str | None = None
    max_states: int | None = None
    name: str | None = None
    negatives: str | None = None
    colours: list[str] | None = None
    layout: str | None = None
    corruptions: list[str] | None = None
    object_radius: float | None = None
    colour_weights: list[float] | None = None
    size: int | None = None
    format: str = "records"

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> EnvironmentSource:
        from proactive_rl.synthetic.environments import KINDS, make_environments

        if isinstance(raw, str):
            raw = {"source": raw}
        if not isinstance(raw, dict) or "source" not in raw:
            raise ValueError(f"{where}: expected a mapping with a 'source' ('synthetic' or a JSONL file), got {raw!r}")
        unknown = set(raw) - _SOURCE_KEYS - _KNOB_KEYS
        if unknown:
            raise ValueError(
                f"{where}: unknown keys {sorted(unknown)}; expected some of {sorted(_SOURCE_KEYS | _KNOB_KEYS)}"
            )
        src = cls(**raw)
        if src.source == "synthetic":
            if src.kind not in KINDS:
                raise ValueError(f"{where}.kind: expected one of {', '.join(KINDS)}, got {src.kind!r}")
            if not isinstance(src.num_envs, int) or src.num_envs < 1:
                raise ValueError(f"{where}.num_envs: a synthetic source needs num_envs >= 1, got {src.num_envs!r}")
            try:  # the knobs are checked now (a bad one names its field), not at the first build
                make_environments(src.kind, 1, src.seed, **src.knobs())
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
        elif src.kind is not None or src.num_envs is not None or set(raw) & _KNOB_KEYS:
            raise ValueError(
                f"{where}: 'kind', 'num_envs' and the knobs {sorted(_KNOB_KEYS)} only apply to source: synthetic"
            )
        if src.format not in FORMATS:
            raise ValueError(f"{where}.format: expected one of {', '.join(FORMATS)}, got {src.format!r}")
        if src.format == "rows" and (src.source == "synthetic" or src.dataset or src.max_states):
            raise ValueError(f"{where}: format rows is a rows JSONL file, without dataset / max_states")
        # A JSONL source is read (and a missing file reported, naming it) when the environments are built.
        if src.max_states is not None and src.max_states < 1:
            raise ValueError(f"{where}.max_states: must be >= 1, got {src.max_states}")
        src.name = src.name or (f"synthetic/{src.kind}" if src.source == "synthetic" else src.source)
        return src

    def knobs(self) -> dict[str, Any]:
        """The synthetic knobs this source sets (keyword arguments of `make_environments`)."""
        return {k: getattr(self, k) for k in sorted(_KNOB_KEYS) if getattr(self, k) is not None}

    def build(self, hint: bool = False) -> list:
        """The environments of this source."""
        if self.format == "rows":
            raise ValueError(f"{self.name}: a rows file holds training rows, not environments (it cannot be played)")
        if self.source == "synthetic":
            from proactive_rl.synthetic.environments import make_environments

            return make_environments(self.kind, self.num_envs, seed=self.seed, **self.knobs())
        from proactive_rl.data.mcqa import proactivebench_environments

        return proactivebench_environments(self.source, self.dataset, self.data_dir, hint=hint)


def parse_sources(raw: Any, where: str) -> list[EnvironmentSource]:
    """A list of sources (each a path or a mapping; a single one is accepted too)."""
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ValueError(f"{where}: expected a non-empty list of environment sources, got {raw!r}")
    return [EnvironmentSource.from_dict(item, f"{where}[{i}]") for i, item in enumerate(raw)]


@dataclass
class SuggestionScriptArguments:
    """Data, reward and generation backend of a proactive-suggestion GRPO run.

    Args:
        trainer (`str`, *optional*, defaults to `"grpo_suggestion"`): the trainer `proactive-rl train` dispatches to.
        environments (`list`): training environments, see :class:`EnvironmentSource`. Example::

            environments:
              - {source: synthetic, kind: sketch, num_envs: 64, seed: 0}
              - {source: data/QuickDraw/train.jsonl, dataset: QD}
        eval_environments (`list`, *optional*): held-out environments, played greedily before and after training
            by the MCQA evaluator of `proactive_rl.evaluation` with this run's ``hint`` and ``answer_letters_only``
            (``acc``, ``ps``; docs/spec.md §6), written to ``<output_dir>/mcqa_eval.json`` (per-environment
            outcomes in ``<output_dir>/mcqa_eval/{before,after}/``).
        r_p (`float`, *optional*, defaults to `0.5`): reward of a valid proactive suggestion (paper: 0.5/0.75/1.0).
        hint (`bool`, *optional*, defaults to `False`): add the dataset's hint to each question (ProactiveBench §4.3).
        answer_letters_only (`bool`, *optional*, defaults to `False`): sample (and evaluate) only option-letter
            tokens. For a randomly initialised tiny model, which would otherwise almost never name an option; with
            ``max_completion_length: 1`` each completion is one letter.
        generation_backend (`str`, *optional*, defaults to `"auto"`): ``"auto"`` uses TRL's vLLM path when vLLM is
            installed and a CUDA GPU is visible, else transformers' `generate` (logged); ``"vllm"`` fails at start-up
            when either is missing; ``"transformers"`` never uses vLLM.
        reward_on_error (`str`, *optional*, defaults to `"raise"`): a reward that raises or returns the wrong number
            of values stops the run naming it (``"raise"``), or (``"skip"``) its group is skipped and
            ``rewards/<name>/error_rate`` logged (`proactive_rl.grpo.reward_guard`).
        max_reward_error_rate (`float`, *optional*, defaults to `0.1`): with ``"skip"``, the error rate that stops the run.
        warm_start_steps (`int`, *optional*, defaults to `0`): before GRPO, train this many supervised steps on the
            training environments' reference images (`proactive_rl.grpo.suggestion.warm_start`): a randomly
            initialised tiny model then recognises the categories, as the paper's instruction-tuned models do.
        warm_start_lr (`float`, *optional*, defaults to `3e-3`): its learning rate.
        warm_start_suggest_rate (`float`, *optional*, defaults to `0.1`): fraction of warm-start rows whose target is
            the suggestion option (teaches which option it is, not when to use it).
        warm_start_states (`str`, *optional*, defaults to `"reference"`): warm-start rows from the reference images
            only, or from ``"all"`` states with the correct category as target (each state's best guess).
        replay_mixture (`list`, *optional*): streaming episodes (a dataset mixture, docs/spec.md §1) replayed at every
            warm-start and GRPO step as a distillation term towards the starting model
            (`proactive_rl.grpo.suggestion.replay`), so a streaming assistant keeps its streaming skills.
        replay_coef (`float`, *optional*, defaults to `1.0`): weight ``c`` of that term.
        replay_batch_size (`int`, *optional*, defaults to `2`): dialogues per replay batch.
        eval_before (`bool`, *optional*, defaults to `True`): also play the held-out environments before training.
        eval_callback (`dict`, *optional*): evaluators run on the live model while training (on save / every N
            steps), as in SFT: `proactive_rl.evaluation.EvalCallbackConfig`.
    """

    trainer: str = field(default="grpo_suggestion", metadata={"help": "Trainer to dispatch to."})
    environments: Any = field(default=None, metadata={"help": "Training environments (list of mappings)."})
    eval_environments: Any = field(default=None, metadata={"help": "Held-out environments (same form)."})
    r_p: float = field(default=0.5, metadata={"help": "Reward of a valid proactive suggestion."})
    hint: bool = field(default=False, metadata={"help": "Add the dataset hint to each question."})
    answer_letters_only: bool = field(default=False, metadata={"help": "Sample only option letters."})
    generation_backend: str = field(default="auto", metadata={"help": f"One of {BACKENDS}."})
    reward_on_error: str = field(default="raise", metadata={"help": "raise or skip."})
    max_reward_error_rate: float = field(default=0.1, metadata={"help": "Error rate that stops a 'skip' run."})
    warm_start_steps: int = field(default=0, metadata={"help": "Supervised warm-start steps before GRPO."})
    warm_start_lr: float = field(default=3e-3, metadata={"help": "Warm-start learning rate."})
    warm_start_suggest_rate: float = field(default=0.1, metadata={"help": "Warm-start rows targeting the suggestion."})
    warm_start_states: str = field(default="reference", metadata={"help": "reference or all."})
    replay_mixture: Any = field(default=None, metadata={"help": "Streaming episodes replayed (distilled) each step."})
    replay_coef: float = field(default=1.0, metadata={"help": "Weight of the streaming replay term."})
    replay_batch_size: int = field(default=2, metadata={"help": "Dialogues per replay batch."})
    eval_before: bool = field(default=True, metadata={"help": "Evaluate the held-out environments before training."})
    # evaluators run while training: a mapping, see `proactive_rl.evaluation.EvalCallbackConfig`.
    eval_callback: Any = field(default=None, metadata={"help": "Evaluators run while training."})

    def __post_init__(self):
        from proactive_rl.grpo.reward_guard import ON_ERROR

        if self.trainer != "grpo_suggestion":
            raise ValueError(f"trainer: this entry point runs 'grpo_suggestion', got {self.trainer!r}")
        if self.environments is None:
            raise ValueError("environments: required (a list of sources: synthetic kinds or ProactiveBench JSONL)")
        self.environments = parse_sources(self.environments, "environments")
        if self.eval_environments is not None:
            self.eval_environments = parse_sources(self.eval_environments, "eval_environments")
        if self.generation_backend not in BACKENDS:
            raise ValueError(f"generation_backend: expected one of {BACKENDS}, got {self.generation_backend!r}")
        from proactive_rl.grpo.suggestion.warm_start import STATES

        if self.warm_start_states not in STATES:
            raise ValueError(f"warm_start_states: expected one of {', '.join(STATES)}, got {self.warm_start_states!r}")
        if self.reward_on_error not in ON_ERROR:
            raise ValueError(f"reward_on_error: expected one of {ON_ERROR}, got {self.reward_on_error!r}")
        self.eval_callback = eval_callback_config(self.eval_callback)  # validated before a model is loaded
        if self.replay_mixture is not None:
            from proactive_rl.data import parse_mixture

            self.replay_mixture = parse_mixture(self.replay_mixture, "replay_mixture")
            if not self.replay_coef >= 0:
                raise ValueError(f"replay_coef: expected a number >= 0, got {self.replay_coef!r}")
        # r_p itself is checked by the reward factory (finite number) when the reward is built.
