"""Single-turn proactive-suggestion GRPO (docs/spec.md §6, §7; ProactiveBench §5) on TRL's `GRPOTrainer`.

- `config`: `SuggestionScriptArguments` (its `environments`: `proactive_rl.data.mcqa.EnvironmentSpec`).
- `trainer`: `ReplayGRPOTrainer` (``trl.GRPOTrainer`` plus the optional streaming replay term).
- `backend`: the generation backend (TRL's vLLM path or transformers, never claimed when absent).
- `evaluation`: the held-out environments played by the MCQA evaluator before and after training.
- `warm_start`: the optional supervised warm start on environment states before GRPO.
- `main`: the entry point (``python -m proactive_rl.grpo.suggestion --config RECIPE``).
"""
