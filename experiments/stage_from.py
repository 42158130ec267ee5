"""One demo stage from an existing checkpoint, with some of its settings changed: the stage ablations of
benchmarks/RESULTS.md without re-running the stages before it.

``--demo DIR`` is a demo folder (its ``data``; ``--from`` defaults to the checkpoint of the stage before
``--stage`` there); the stage trains into ``<out>/runs/<stage>`` and is evaluated as the demo evaluates it::

    python -m experiments.stage_from --demo demo_out --out ablation/grpo_lr1e-4 --stage grpo_streaming \\
        --set 'grpo_streaming={"learning_rate": 1e-4, "max_steps": 60}'

A stage of two runs (`pipeline.stage_runs`: streaming GRPO's count phase) trains both; ``--set 'grpo_count_tasks=[]'``
trains the first alone.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from experiments.demo_ablation import settings_with
from proactive_rl.demo import pipeline
from proactive_rl.demo.evaluation import evaluator_for
from proactive_rl.demo.stages import generate_data

_TRAINER = {key: trainer for key, _, trainer, _ in pipeline.STAGES if trainer}
# where each stage starts in a demo folder: the checkpoint of the trained stage before it (the first from the model)
_START = dict(zip(_TRAINER, ["model", *(f"runs/{key}" for key in _TRAINER)]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--demo", required=True, help="a demo output folder (its data, and its checkpoints)")
    parser.add_argument("--out", required=True)
    parser.add_argument("--stage", required=True, choices=sorted(_TRAINER))
    parser.add_argument("--from", dest="start", help="checkpoint to start from (default: the demo's stage before)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help="a DemoSettings field")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    import transformers

    transformers.logging.set_verbosity_error()
    demo, out = Path(args.demo), Path(args.out)
    settings = settings_with(args.set, args.seed)
    start = Path(args.start) if args.start else demo / _START[args.stage]
    generate_data(demo, settings, progress=False)  # reused file by file; rewritten where the recipes changed
    t0 = time.time()
    checkpoint = pipeline.train_runs(args.stage, _TRAINER[args.stage], settings, demo / "data", start, out)
    train_s = time.time() - t0
    metrics = evaluator_for(args.stage)(checkpoint, demo / "data", settings, out / "eval" / args.stage, progress=False)
    metrics.pop("predictions")
    report = {"stage": args.stage, "from": str(start), "set": args.set, "train_s": round(train_s), "metrics": metrics}
    (out / f"{args.stage}_report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
