"""Single-turn proactive-suggestion GRPO (docs/spec.md §6, §7; ProactiveBench §5) on TRL's `GRPOTrainer`.

- `main`: `SuggestionScriptArguments` (its `environments`: `proactive_rl.data.mcqa.EnvironmentSpec`), the trainer and its entry point
  (``python -m proactive_rl.grpo.suggestion --config RECIPE``).
- `warm_start`: the optional supervised warm start on environment states before GRPO.
"""
