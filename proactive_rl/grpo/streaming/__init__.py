"""Multi-turn streaming GRPO (docs/spec.md §8): rollout windows, KV-cache rollouts, the TRL trainer.

- `windows`: episodes cut into rollout windows (ground-truth prefix, targets inside, task reward by ``task``).
- `rollout`: G rollouts of a window through the streaming engine, with the policy's own token masks.
- `trl_overrides`: the TRL internals this trainer replaces (one place, pinned TRL version named).
- `main`: `StreamingGRPOConfig` / `StreamingGRPOScriptArguments`, the trainer and its entry point
  (``python -m proactive_rl.grpo.streaming --config RECIPE``).
"""
