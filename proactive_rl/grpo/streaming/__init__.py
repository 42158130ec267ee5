"""Multi-turn streaming GRPO (docs/spec.md §8): rollout windows, KV-cache rollouts, the TRL trainer.

- `windows`: episodes cut into rollout windows (ground-truth prefix, targets inside, task reward by ``task``).
- `rollout`: G rollouts of a window through the streaming engine, with the policy's own token masks.
- `config`: `StreamingGRPOConfig` (``trl.GRPOConfig`` + rollout and reward knobs), `StreamingGRPOScriptArguments`.
- `trainer`: `StreamingGRPOTrainer`, its rollout function and the task rewards.
- `trl_overrides`: the TRL internals this trainer replaces (one place, pinned TRL version named).
- `main`: the entry point (``python -m proactive_rl.grpo.streaming --config RECIPE``).
"""
