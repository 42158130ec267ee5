"""`ExperimentalStreamingGRPOTrainer`: `StreamingGRPOTrainer` with per-decision credit and dynamic sampling
(docs/spec.md §8; what they change on the demo: docs/grpo_credit.md).

- ``advantage: decision | mixed``: TRL's per-row ``advantages`` (shape ``(B,)``) are replaced by per-token ones
  (``(B, T)``, which TRL's ``_compute_loss`` takes as they are): each policy turn's tokens carry its step's advantage
  (`proactive_rl.experimental.credit`); ``credit/split_decisions`` is logged.
- ``dynamic_sampling``: after a rank's rollouts, each group whose weighted rewards have no spread is replaced by a
  new training window's group, up to ``max_refills`` rounds; the refilled rows' columns are handed to TRL with the
  rollout, so the rewards read the new windows (``rollout/zero_spread_groups``, ``rollout/refilled_groups``).

Pinned version: **trl 1.16.0** (`proactive_rl.grpo.streaming.trl_overrides.TRL_VERSION`). The TRL internals touched
here are declared in ``PRIVATE_TOUCHES``: ``_generate_and_score_completions`` (the per-token advantages, after the
stable override attached the frames), ``_calculate_rewards`` (the prompts of refilled rows) and ``_metrics``.
"""

from __future__ import annotations

import torch
from accelerate.utils import gather_object

from proactive_rl.experimental.config import ExperimentalStreamingGRPOConfig
from proactive_rl.experimental.credit import split_fraction, step_advantages, token_values, turn_steps
from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer
from proactive_rl.grpo.streaming.trl_overrides import TRL_VERSION
from proactive_rl.grpo.streaming.windows import RolloutWindow

PRIVATE_TOUCHES = {
    "_generate_and_score_completions": f"trl {TRL_VERSION}: GRPOTrainer._generate_and_score_completions overridden "
    "(its output's advantages replaced by per-token ones)",
    "_calculate_rewards": f"trl {TRL_VERSION}: GRPOTrainer._calculate_rewards overridden (the prompts read from the "
    "inputs, where TRL merged the rollout's columns)",
    "_metrics": f"trl {TRL_VERSION}: GRPOTrainer._metrics[mode][name], a list of floats averaged into the next log",
}


class ExperimentalStreamingGRPOTrainer(StreamingGRPOTrainer):
    """`StreamingGRPOTrainer` with the knobs of `ExperimentalStreamingGRPOConfig` (see the module docstring); at
    their defaults it trains as `StreamingGRPOTrainer` does.

    Args:
        model, windows, processing_class, **kwargs: as `StreamingGRPOTrainer`.
        args (`ExperimentalStreamingGRPOConfig`): GRPO + rollout settings and the credit study's knobs.
    """

    _credit_turns: list[list[str]] | None = None
    _credit_token_steps: list[list[int]] | None = None
    _rolled_groups: list[tuple[RolloutWindow, int]] | None = None

    def __init__(self, model, args: ExperimentalStreamingGRPOConfig, windows: list[RolloutWindow], *pos, **kwargs):
        if not isinstance(args, ExperimentalStreamingGRPOConfig):
            raise TypeError(f"args must be an ExperimentalStreamingGRPOConfig, got {type(args).__name__}")
        super().__init__(model, args, windows, *pos, **kwargs)
        self._train_window_ids = [w.id for w in windows]

    def streaming_rollout(self, prompts: list[str]) -> dict:
        """`StreamingGRPOTrainer.streaming_rollout`, keeping the turns and token steps the per-token advantages need;
        with ``dynamic_sampling`` the rollout also carries each row's window columns (TRL merges them into its
        inputs: a refilled group's rewards read its window)."""
        output = super().streaming_rollout(prompts)
        self._credit_turns = self._rollout_turns
        self._credit_token_steps = [turn_steps(mask) for mask in output["env_mask"]]
        if self.args.dynamic_sampling:
            rows = [window.row() for window, n in self._rolled_groups for _ in range(n)]
            output.update({key: [row[key] for row in rows] for key in rows[0]})
        return output

    def _roll_groups(self, unwrapped, groups: list[tuple[RolloutWindow, int]]) -> list[list]:
        per_group = super()._roll_groups(unwrapped, groups)
        if self.args.dynamic_sampling and self.model.training:
            self._refill(unwrapped, groups, per_group)
        self._rolled_groups = groups
        return per_group

    def _refill(self, unwrapped, groups: list, per_group: list) -> None:
        """Dynamic sampling (docs/spec.md §8): replace, in place, each group whose rewards have no spread with a new
        training window's group, up to ``max_refills`` rounds; log the fraction found and the groups refilled."""
        flat = [k for k, (window, _) in enumerate(groups) if not _has_spread(self, window, per_group[k])]
        found, refilled = len(flat), 0
        for _ in range(self.args.max_refills):
            if not flat:
                break
            picks = torch.randint(0, len(self._train_window_ids), (len(flat),)).tolist()
            new = [(self.windows[self._train_window_ids[i]], groups[k][1]) for k, i in zip(flat, picks)]
            for k, group, trajectories in zip(flat, new, self._roll(unwrapped, new)):
                groups[k], per_group[k] = group, trajectories
            refilled += len(flat)
            flat = [k for k in flat if not _has_spread(self, groups[k][0], per_group[k])]
        stats = torch.tensor([found / len(groups), refilled], dtype=torch.float32, device=self.accelerator.device)
        stats = self.accelerator.gather(stats.unsqueeze(0))
        self._metrics["train"]["rollout/zero_spread_groups"].append(stats[:, 0].mean().item())
        self._metrics["train"]["rollout/refilled_groups"].append(stats[:, 1].sum().item())

    def _generate_and_score_completions(self, inputs):
        try:
            output = super()._generate_and_score_completions(inputs)
            if self.args.advantage != "trajectory":
                output["advantages"] = self._token_advantages(output["advantages"], output["completion_ids"].size(1))
            return output
        finally:
            self._credit_turns, self._credit_token_steps, self._rolled_groups = None, None, None

    def _token_advantages(self, advantages: torch.Tensor, width: int) -> torch.Tensor:
        """This rank's ``(B, width)`` per-token advantages from TRL's per-row ones; a group may span ranks, so the
        turns and advantages of all ranks are gathered first (TRL's row order)."""
        group_size = self.num_generations if self.model.training else self.num_generations_eval
        turns = gather_object(self._credit_turns)
        all_rows = self.accelerator.gather(advantages).tolist()
        args = self.args
        per_step = step_advantages(
            turns, all_rows, group_size, args.advantage, args.decision_weight, args.decision_anchor
        )
        start = self.accelerator.process_index * advantages.size(0)
        local = per_step[start : start + advantages.size(0)]
        mode = "train" if self.model.training else "eval"
        self._metrics[mode]["credit/split_decisions"].append(split_fraction(turns, group_size, args.decision_anchor))
        values = [token_values(row, steps, width) for row, steps in zip(local, self._credit_token_steps)]
        return torch.tensor(values, dtype=advantages.dtype, device=advantages.device)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        prompts = [x["prompt"] for x in inputs]  # TRL's list predates a dynamic-sampling refill
        return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)


def _has_spread(trainer: StreamingGRPOTrainer, window: RolloutWindow, trajectories: list) -> bool:
    """Whether a group's weighted rewards differ (a reward that raises here counts as spread: TRL's own call, right
    after, applies ``reward_on_error``)."""
    n = len(trajectories)
    columns = {key: [value] * n for key, value in window.row().items() if key != "prompt"}
    columns["times"] = [t.times for t in trajectories]
    totals = [0.0] * n
    for func, weight in zip(trainer.reward_funcs, trainer.reward_weights.tolist()):
        try:
            values = getattr(func, "fn", func)(
                prompts=[window.id] * n,
                completions=[t.texts for t in trajectories],
                completion_ids=[t.completion_ids for t in trajectories],
                trainer_state=trainer.state,
                **columns,
            )
        except Exception:  # noqa: BLE001 - see the docstring
            return True
        totals = [total + weight * (value or 0.0) for total, value in zip(totals, values)]
    return max(totals) - min(totals) > 1e-9
