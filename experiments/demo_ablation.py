"""The demo with some of its settings changed: the ablations behind the multi-skill demo (benchmarks/RESULTS.md).

Each run is `proactive_rl.demo.run_demo` with `DemoSettings` fields replaced (``--set field=JSON``; a dict field
such as ``sft`` is merged into the default one), into its own folder, and prints the demo's table and directions::

    python -m experiments.demo_ablation --out ablation/no_replay --set replay_tasks=[]
    python -m experiments.demo_ablation --out ablation/frozen_vision --set 'sft={"freeze_vision_tower": true}' \\
        --stages sft
    python -m experiments.demo_ablation --out ablation/grpo_lr1e-4 --set 'grpo_streaming={"learning_rate": 1e-4}' \\
        --stages sft,grpo_streaming
"""

from __future__ import annotations

import argparse
import json
from dataclasses import fields, replace

from proactive_rl.demo import run_demo
from proactive_rl.demo.settings import DemoSettings


def settings_with(assignments: list[str], seed: int = 0) -> DemoSettings:
    """`DemoSettings` with ``field=JSON`` assignments applied (lists become tuples; dicts merge into the default)."""
    base = DemoSettings(seed=seed)
    known = {f.name for f in fields(DemoSettings)}
    changes = {}
    for assignment in assignments:
        name, sep, raw = assignment.partition("=")
        if not sep or name not in known:
            raise SystemExit(f"--set {assignment!r}: expected FIELD=JSON with FIELD one of {', '.join(sorted(known))}")
        value = json.loads(raw)
        if isinstance(value, list):
            value = tuple(value)
        if isinstance(value, dict):
            value = {**getattr(base, name), **value}
        changes[name] = value
    return replace(base, **changes)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="output folder (one per variant)")
    parser.add_argument("--set", action="append", default=[], metavar="FIELD=JSON", help="a DemoSettings field")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--stages", default="grounding,sft,grpo_streaming,grpo_suggestion")
    args = parser.parse_args(argv)
    import transformers

    transformers.logging.set_verbosity_error()
    settings = settings_with(args.set, args.seed)
    command = "python -m experiments.demo_ablation --out " + args.out + "".join(f" --set '{a}'" for a in args.set)
    summary = run_demo(args.out, settings, tuple(args.stages.split(",")), progress=False, command=command)
    return 0 if all(s["status"] == "ok" or s["status"].startswith("not run") for s in summary["stages"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
