"""Experimental variants of the library's trainers, kept out of their stable configs (as ``trl.experimental``).

Streaming GRPO's credit study (docs/grpo_credit.md: no variant beats the default) runs here, as the trainer
``trainer: grpo_streaming_experimental`` (`proactive_rl.trainers.TRAINERS`):

- `credit`: per-decision advantages from the rows that shared a state (docs/spec.md §8).
- `config`: `ExperimentalStreamingGRPOConfig` (`StreamingGRPOConfig` + ``advantage``, ``decision_weight``,
  ``decision_anchor``, ``dynamic_sampling``, ``max_refills``) and its script arguments.
- `trainer`: `ExperimentalStreamingGRPOTrainer`, the streaming GRPO trainer with per-token advantages and dynamic
  sampling.
- `main`: the entry point (``proactive-rl train --config RECIPE`` with ``trainer: grpo_streaming_experimental``).

Nothing in `proactive_rl.grpo` imports this package (docs/architecture.md).
"""
