"""Does streaming GRPO learn? The tiny recipe from the tiny SFT checkpoint, on CPU.

Runs `recipes/tiny/grpo_streaming.yaml`, and reports

- the training reward over its steps (TRL's logged ``reward``: mean of the first and last quarter of the steps);
- on held-out synthetic episodes (other seeds), before and after: PRS-B (docs/spec.md §4, the benchmark metric, over whole
  episodes streamed from the first frame), the task reward of greedy rollouts of the held-out windows, and the
  number of non-silent responses per episode::

    python -m experiments.streaming_grpo --model_name_or_path outputs/tiny-sft --record

Any other ``--field value`` overrides the recipe (e.g. ``--max_steps 8``). ``--record`` appends the table's summary
to ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/tiny/grpo_streaming.yaml"


def evaluate(model, processor, episodes, windows, max_turn_tokens: int = 8, alpha: float = 0.05, lam: float = 0.2):
    """Greedy streaming evaluation: ``{"prs_b", "reward", "responses"}``.

    PRS-B (× 100, whole episodes streamed from the first frame) and responses per episode come from the PRS
    evaluator of `proactive_rl.evaluation` (what `proactive-rl eval` and the training callback run); the window
    reward is the training objective itself: the task reward of one greedy rollout of each held-out window, by the
    trainer's own rollout."""
    import json

    from proactive_rewards import get_reward, get_task
    from proactive_rl.evaluation import EvaluatorConfig, PRSEvaluator, evaluate_model
    from proactive_rl.grpo.streaming.rollout import rollout_window
    from proactive_rl.streaming import SamplingParams

    config = EvaluatorConfig(type="prs", name="prs", max_new_tokens=max_turn_tokens, alpha=alpha)
    with tempfile.TemporaryDirectory() as out:
        results = evaluate_model(model, processor, [PRSEvaluator(config, items=episodes)], out_dir=out, fail_fast=True)
        lines = (Path(out) / "prs" / "predictions.jsonl").read_text().splitlines()
    responses = [len(json.loads(line)["responses"]) for line in lines]
    greedy = SamplingParams(max_new_tokens=max_turn_tokens, do_sample=False)
    rewards = []
    for window in windows:
        (traj,) = rollout_window(model, processor, window, 1, greedy)
        task = get_task(window.task)
        reward = get_reward(task.reward, **task.reward_params(alpha, lam))
        rewards.append(reward([traj.texts], targets=[window.row()["targets"]], times=[traj.times])[0])
    return {
        "prs_b": results["metrics"]["prs/prs_b"],
        "reward": sum(rewards) / len(rewards),
        "responses": sum(responses) / len(responses),
    }


def run(argv: list[str], eval_episodes: int = 16, eval_seed: int = 1000) -> dict:
    """Train with the recipe (plus `argv` overrides) and evaluate before and after."""
    from proactive_rl.grpo.streaming.main import build_trainer, make_parser
    from proactive_rl.grpo.streaming.windows import build_windows
    from proactive_rl.synthetic import generate_episodes

    with tempfile.TemporaryDirectory() as out:
        script_args, training_args, model_args = make_parser().parse_args_and_config(
            ["--config", str(RECIPE), "--output_dir", out, *argv]
        )
        trainer = build_trainer(script_args, training_args, model_args)
        tasks = sorted({w.task for w in trainer.windows.values()})
        knobs = script_args.dataset_mixture[0].knobs
        held_out = [e for t in tasks for e in generate_episodes(t, eval_episodes, seed=eval_seed, **knobs)]
        held_windows = build_windows(
            held_out,
            lead_s=script_args.lead_s,
            tail_s=script_args.tail_s,
            max_window_s=script_args.max_window_s,
            prefix_s=script_args.prefix_s,
        )
        model, processor = trainer.model, trainer.processing_class
        settings = dict(max_turn_tokens=training_args.max_turn_tokens, alpha=training_args.reward_alpha)
        before = evaluate(model, processor, held_out, held_windows, **settings, lam=training_args.reward_lambda)
        trainer.train()
        after = evaluate(model, processor, held_out, held_windows, **settings, lam=training_args.reward_lambda)
    rewards = [h["reward"] for h in trainer.state.log_history if "reward" in h]
    quarter = max(1, len(rewards) // 4)
    return {
        "model": model_args.model_name_or_path,
        "steps": len(rewards),
        "reward_first": sum(rewards[:quarter]) / quarter,
        "reward_last": sum(rewards[-quarter:]) / quarter,
        "rewards": rewards,
        "before": before,
        "after": after,
        "n_episodes": len(held_out),
        "n_windows": len(held_windows),
    }


def table(result: dict) -> str:
    b, a = result["before"], result["after"]
    q = max(1, result["steps"] // 4)
    return "\n".join(
        [
            f"Streaming GRPO, {result['steps']} steps from `{result['model']}` "
            f"({result['n_episodes']} held-out episodes, {result['n_windows']} held-out windows)",
            "",
            f"| | train reward (mean of first/last {q} steps) | held-out PRS-B | held-out window reward "
            "| responses / episode |",
            "|---|---|---|---|---|",
            f"| before | {result['reward_first']:.3f} | {b['prs_b']:.1f} | {b['reward']:.3f} | {b['responses']:.2f} |",
            f"| after | {result['reward_last']:.3f} | {a['prs_b']:.1f} | {a['reward']:.3f} | {a['responses']:.2f} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--eval_episodes", type=int, default=16, help="held-out episodes per task (default: 16)")
    parser.add_argument("--eval_seed", type=int, default=1000, help="seed of the held-out episodes")
    parser.add_argument("--record", action="store_true", help="append the summary to benchmarks/RESULTS.md")
    args, overrides = parser.parse_known_args(argv)
    logging.basicConfig(level=logging.WARNING)
    result = run(overrides, args.eval_episodes, args.eval_seed)
    print(table(result))
    print("per-step reward:", " ".join(f"{r:.3f}" for r in result["rewards"]))
    if args.record:
        sys.path.insert(0, str(ROOT))
        from benchmarks.common import record

        b, a = result["before"], result["after"]
        line = (
            f"tiny streaming GRPO ({result['steps']} steps from {result['model']}): train reward "
            f"{result['reward_first']:.3f} -> {result['reward_last']:.3f}; held-out PRS-B {b['prs_b']:.1f} -> "
            f"{a['prs_b']:.1f}; held-out window reward {b['reward']:.3f} -> {a['reward']:.3f}; responses/episode "
            f"{b['responses']:.2f} -> {a['responses']:.2f}"
        )
        record(
            "Streaming GRPO learning",
            line,
            "python -m " + __spec__.name + " " + shlex.join(argv or sys.argv[1:]),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
