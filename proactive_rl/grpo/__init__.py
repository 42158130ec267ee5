"""GRPO on TRL's `GRPOTrainer` (docs/spec.md §7, §8).

- `proactive_rl.grpo.suggestion`: single-turn proactive-suggestion GRPO on MCQA environment states (ProactiveBench §5).
- `proactive_rl.data.mcqa`: environments → TRL prompt datasets with images and reward columns.
- `proactive_rl.grpo.replay`: the streaming replay term (distillation towards the starting model) either stage adds.
- `proactive_rl.grpo.reward_guard`: reward functions that raise or return the wrong number of values are named.
"""
