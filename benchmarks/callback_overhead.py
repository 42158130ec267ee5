"""What `ProactiveEvalCallback` adds to the tiny SFT run.

Trains the shipped tiny recipe (``recipes/tiny/sft.yaml``: 60 steps, a save every 30) twice in this process, without
and with an ``eval_callback`` (streaming PRS on held-out synthetic episodes of the three training tasks, and MCQA
environments), and records the wall-time ratio and the callback's own measured time per evaluation.

    python -m benchmarks.callback_overhead            # the full tiny run
    python -m benchmarks.callback_overhead --quick    # 10 steps, a save every 5 (a smoke run)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.common import record

ROOT = Path(__file__).resolve().parents[1]
HELD_OUT = [
    {"source": "synthetic", "task": task, "num_episodes": 2, "seed": 1000 + i, "knobs": {"duration": [10, 14]}}
    for i, task in enumerate(("atomic", "accident", "compositional"))
]
EVAL_CALLBACK = {
    "evaluators": [
        {"type": "prs", "episodes": HELD_OUT},
        {"type": "mcqa", "environments": [{"kind": "occlusion", "n": 4, "seed": 7}]},
    ]
}


def train_seconds(recipe: dict, out: Path) -> tuple[float, object]:
    from proactive_rl.sft.main import build_trainer, make_parser

    path = out / "recipe.yaml"
    path.write_text(yaml.safe_dump({**recipe, "output_dir": str(out / "run")}))
    trainer = build_trainer(*make_parser().parse_args_and_config(["--config", str(path)]))
    start = time.perf_counter()
    trainer.train()
    return time.perf_counter() - start, trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 steps, a save every 5")
    args = parser.parse_args()
    recipe = yaml.safe_load((ROOT / "recipes/tiny/sft.yaml").read_text())
    recipe.update(report_to="none", disable_tqdm=True, save_total_limit=None)
    if args.quick:
        recipe.update(max_steps=10, save_steps=5)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "a").mkdir()
        (Path(tmp) / "b").mkdir()
        base, _ = train_seconds(recipe, Path(tmp) / "a")
        with_cb, trainer = train_seconds({**recipe, "eval_callback": EVAL_CALLBACK}, Path(tmp) / "b")
    from proactive_rl.evaluation import ProactiveEvalCallback

    [callback] = [c for c in trainer.callback_handler.callbacks if isinstance(c, ProactiveEvalCallback)]
    n = len(callback.history)
    per_eval = ", ".join(f"step {r['step']}: {r['wall_time_s']:.1f} s" for r in callback.history)
    overhead = with_cb / base - 1
    line = (
        f"tiny SFT ({recipe['max_steps']} steps, save every {recipe['save_steps']}): {base:.1f} s without the callback, "
        f"{with_cb:.1f} s with it (+{100 * overhead:.0f}%); the callback measured {callback.total_seconds:.1f} s over "
        f"{n} evaluations ({per_eval}) of PRS on 6 episodes + MCQA on 4 environments"
    )
    record("callback overhead", line)


if __name__ == "__main__":
    main()
