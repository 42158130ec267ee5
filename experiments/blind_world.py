"""How well a frame-blind schedule does in a synthetic world: the check behind the demo's world (benchmarks/RESULTS.md).

For each task, the blind schedule (`proactive_eval.baseline`, docs/spec.md §14) is fitted on `--train` episodes and
scored (PRS-B) on `--test` held-out episodes of other seeds, and on every block of `--block` of them (the demo scores
10 per task): the population value, the worst block and the share of blocks above `--limit`::

    python -m experiments.blind_world --knobs '{"duration": [10, 14]}'
    python -m experiments.blind_world --knobs '{"duration": [30, 90], "fps": 0.5, "scale": 2.0, "distractors": 0, "max_events": 3}'
    python -m experiments.blind_world --demo          # the demo's own world (DemoSettings), its split sizes
"""

from __future__ import annotations

import argparse
import json


def blind_world(tasks, knobs: dict, train: int = 70, test: int = 300, block: int = 10, limit: float = 65.0):
    """``{task: {"prs_b", "worst_block", "share_above"}}`` (PRS-B × 100)."""
    from proactive_eval.baseline import blind_prs_summary
    from proactive_rl.synthetic.generate import generate_episodes

    out = {}
    for task in tasks:
        fit = generate_episodes(task, train, 100, **knobs)
        held = generate_episodes(task, test, 200, **knobs)
        blocks = [blind_prs_summary(held[i : i + block], fit)["overall"]["prs_b"] for i in range(0, test, block)]
        out[task] = {
            "prs_b": round(blind_prs_summary(held, fit)["overall"]["prs_b"], 1),
            "worst_block": round(max(blocks), 1),
            "share_above": round(sum(b > limit for b in blocks) / len(blocks), 2),
        }
    return out


def demo_splits(seeds=(0, 1, 2)):
    """The blind PRS-B of the demo's own splits (fitted on its train split, scored on the episodes it evaluates)."""
    from proactive_eval.baseline import blind_prs_summary
    from proactive_rl.demo.settings import DemoSettings
    from proactive_rl.synthetic.export import split_seed, split_sizes
    from proactive_rl.synthetic.generate import generate_episodes

    settings = DemoSettings()
    sizes = split_sizes(settings.episodes_per_task, settings.fractions)
    knobs = {"duration": settings.duration, **settings.knobs}
    out = {}
    for seed in seeds:
        for task in settings.prs_tasks:
            fit = generate_episodes(task, sizes[0], split_seed(seed, "train"), **knobs)
            held = generate_episodes(task, sizes[2], split_seed(seed, "test"), **knobs)[: settings.eval_episodes]
            out[f"seed {seed} {task}"] = round(blind_prs_summary(held, fit)["overall"]["prs_b"], 1)
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", nargs="+", default=["accident", "atomic", "compositional"])
    parser.add_argument("--knobs", default="{}", help="difficulty knobs as JSON (proactive_rl.synthetic.Knobs)")
    parser.add_argument("--demo", action="store_true", help="the demo's own splits, seeds 0-2")
    parser.add_argument("--limit", type=float, default=65.0)
    args = parser.parse_args(argv)
    if args.demo:
        print(json.dumps(demo_splits(), indent=1))
        return
    for task, row in blind_world(args.tasks, json.loads(args.knobs), limit=args.limit).items():
        print(
            f"{task}: blind PRS-B {row['prs_b']}, worst block of 10 {row['worst_block']}, "
            f"share of blocks above {args.limit:g}: {row['share_above']}"
        )


if __name__ == "__main__":
    main()
