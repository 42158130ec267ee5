"""Arguments of proactive-suggestion GRPO (docs/spec.md §6, §7), parsed by ``trl.TrlParser`` from a YAML recipe.

`SuggestionScriptArguments` (environments: `proactive_rl.data.mcqa.EnvironmentSpec`, reward, generation backend,
warm start, replay), ``trl.GRPOConfig`` and ``trl.ModelConfig``. Everything is
validated in ``__post_init__`` so that a bad recipe fails before a model is loaded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from proactive_rl.data import parse_mixture
from proactive_rl.data.mcqa import parse_environments
from proactive_rl.grpo.reward_guard import ON_ERROR
from proactive_rl.grpo.suggestion.warm_start import STATES
from proactive_rl.training import eval_callback_config

BACKENDS = ("auto", "vllm", "transformers")


@dataclass
class SuggestionScriptArguments:
    """Data, reward and generation backend of a proactive-suggestion GRPO run.

    Args:
        trainer (`str`, *optional*, defaults to `"grpo_suggestion"`): the trainer `proactive-rl train` dispatches to.
        environments (`list`): training environments, see `proactive_rl.data.mcqa.EnvironmentSpec`. Example::

            environments:
              - {source: synthetic, kind: sketch, num_envs: 64, seed: 0}
              - {source: data/QuickDraw/train.jsonl, dataset: QD}
        eval_environments (`list`, *optional*): held-out environments, played greedily before and after training
            by the MCQA evaluator of `proactive_rl.evaluation` with this run's ``hint`` and ``answer_letters_only``
            (``acc``, ``ps``; docs/spec.md §6), written to ``<output_dir>/suggestion_eval.json`` (per-environment
            outcomes in ``<output_dir>/suggestion_eval/{before,after}/``).
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
            (`proactive_rl.grpo.replay`), so a streaming assistant keeps its streaming skills.
        replay_coef (`float`, *optional*, defaults to `1.0`): weight ``c`` of that term.
        warm_start_replay_coef (`float`, *optional*): its weight during the warm start; defaults to ``replay_coef``.
            Lower lets the warm start teach the categories that a strong replay holds back (GRPO then distils
            the streaming skills back at ``replay_coef``).
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
    warm_start_replay_coef: float | None = field(
        default=None, metadata={"help": "Replay weight during the warm start (default: replay_coef)."}
    )
    replay_batch_size: int = field(default=2, metadata={"help": "Dialogues per replay batch."})
    eval_before: bool = field(default=True, metadata={"help": "Evaluate the held-out environments before training."})
    # evaluators run while training: a mapping, see `proactive_rl.evaluation.EvalCallbackConfig`.
    eval_callback: Any = field(default=None, metadata={"help": "Evaluators run while training."})

    def __post_init__(self):
        if self.trainer != "grpo_suggestion":
            raise ValueError(f"trainer: this entry point runs 'grpo_suggestion', got {self.trainer!r}")
        if self.environments is None:
            raise ValueError("environments: required (a list of sources: synthetic kinds or ProactiveBench JSONL)")
        self.environments = parse_environments(self.environments, "environments")
        if self.eval_environments is not None:
            self.eval_environments = parse_environments(self.eval_environments, "eval_environments")
        if self.generation_backend not in BACKENDS:
            raise ValueError(f"generation_backend: expected one of {BACKENDS}, got {self.generation_backend!r}")

        if self.warm_start_states not in STATES:
            raise ValueError(f"warm_start_states: expected one of {', '.join(STATES)}, got {self.warm_start_states!r}")
        if self.reward_on_error not in ON_ERROR:
            raise ValueError(f"reward_on_error: expected one of {ON_ERROR}, got {self.reward_on_error!r}")
        self.eval_callback = eval_callback_config(self.eval_callback)  # validated before a model is loaded
        if self.replay_mixture is not None:
            self.replay_mixture = parse_mixture(self.replay_mixture, "replay_mixture")
            for name in ("replay_coef", "warm_start_replay_coef"):
                value = getattr(self, name)
                if value is not None and not value >= 0:
                    raise ValueError(f"{name}: expected a number >= 0, got {value!r}")
        if self.warm_start_replay_coef is None:
            self.warm_start_replay_coef = self.replay_coef
        # r_p itself is checked by the reward factory (a number in [0, 1]) when the reward is built.
