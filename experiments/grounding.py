"""Does a grounding stage make the demo's model look? Grounding SFT on per-frame captions, then the proactive SFT.

Runs the demo's own stage functions on the demo's world (`DemoSettings`): the caption episodes of
`proactive_rl.synthetic.captions` for the streaming tasks' training split, ``--ground-steps`` of SFT on them, then
``--sft-steps`` of the demo's proactive SFT from that model, and scores each on 10 held-out episodes per task with
their own frames and with each episode's frames swapped for another's (``counterfactual: [swap]``), beside the
blind schedule fitted on the training split::

    python -m experiments.grounding --out ablation/grounding --ground-steps 300 --sft-steps 300
    python -m experiments.grounding --out ablation/no_grounding --ground-steps 0 --sft-steps 300
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace
from pathlib import Path

from proactive_rl.data import load_mixture
from proactive_rl.demo.evaluation import evaluate_grounding
from proactive_rl.demo.settings import STREAMING_TASKS, DemoSettings
from proactive_rl.demo.stages import (
    build_model,
    generate_data,
    grounding_overrides,
    sft_overrides,
    task_file,
    train_stage,
)
from proactive_rl.evaluation import EvaluatorConfig, PRSEvaluator, evaluate_model
from proactive_rl.models import load_model


def score(model_dir: Path, data: Path, tasks, out: Path, n: int, max_new_tokens: int) -> dict:
    config = EvaluatorConfig.from_dict(
        {
            "type": "prs",
            "episodes": [{"source": str(task_file(data, "test", t))} for t in tasks],
            "baseline_episodes": [{"source": str(task_file(data, "train", t))} for t in tasks],
            "max_new_tokens": max_new_tokens,
            "counterfactual": ["swap"],
        },
        "grounding.prs",
    )
    items = [e for src in config.episodes for e in load_mixture([src])[0][:n]]
    model, processor = load_model(str(model_dir))
    results = evaluate_model(model.eval(), processor, [PRSEvaluator(config, progress=False, items=items)], out_dir=out)
    metrics = results["evaluators"]["prs"]["metrics"]
    return {k: round(float(v), 1) for k, v in metrics.items() if "prs_b" in k and v is not None}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ground-steps", type=int, default=300)
    parser.add_argument("--ground", default="{}", help="JSON overrides of the grounding SFT recipe")
    parser.add_argument("--sft-steps", type=int, default=300)
    parser.add_argument("--sft", default="{}", help="JSON overrides of the proactive SFT recipe")
    parser.add_argument("--tasks", default=",".join(STREAMING_TASKS), help="streaming tasks (SFT and scores)")
    parser.add_argument("--eval-episodes", type=int, default=10)
    args = parser.parse_args(argv)
    import transformers

    transformers.logging.set_verbosity_error()
    out = Path(args.out)
    tasks = tuple(args.tasks.split(","))
    base = DemoSettings(seed=args.seed)
    grounding = {**base.grounding, "max_steps": args.ground_steps, **json.loads(args.ground)}
    settings = replace(base, sft_tasks=tasks, grounding_tasks=tasks, grounding=grounding)
    model = build_model(out, settings)
    data = generate_data(out, settings, progress=False)
    report = {"args": vars(args)}
    if args.ground_steps:
        t0 = time.time()
        model = train_stage("sft", grounding_overrides(settings, data, model), out, "grounding")
        report["grounding_s"] = round(time.time() - t0)
        metrics = evaluate_grounding(model, data, settings, out / "eval_grounding", progress=False)
        report["grounding"] = {k: round(v, 1) for k, v in metrics.items() if k != "predictions"}
        print("grounding", report["grounding"], flush=True)
    if args.sft_steps:
        t0 = time.time()
        overrides = {**sft_overrides(settings, data, model), "max_steps": args.sft_steps, **json.loads(args.sft)}
        model = train_stage("sft", overrides, out, "sft")
        report["sft_s"] = round(time.time() - t0)
        report["sft"] = score(model, data, tasks, out / "eval_sft", args.eval_episodes, settings.prs_max_new_tokens)
        print("sft", report["sft"], flush=True)
    (out / "grounding_report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
