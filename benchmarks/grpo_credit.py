"""Streaming GRPO credit study: trajectory vs per-decision vs mixed advantages, with and without dynamic sampling
(docs/spec.md §8), from the demo's SFT checkpoints, every gain with its 95 % interval (docs/spec.md §15).

    make demo SEEDS=3                                   # the world seeds' data and SFT checkpoints (demo_out/seed<k>)
    python -m benchmarks.grpo_credit [--demo-out demo_out] [--jobs 2] [--doc docs/grpo_credit.md]

For each world seed (a `make demo` seed folder), each training seed (the demo's own, then +100) and each variant, the
demo's streaming GRPO stage is rerun from that seed's SFT model with the variant's fields (`VARIANTS`), by the
experimental trainer that has them (``trainer: grpo_streaming_experimental``, `proactive_rl.experimental`), and scored
with the demo's PRS evaluator on the held-out episodes of the streaming tasks (`prs_evaluator`, own frames). Equal
rollout budget: a dynamic-sampling run refills at most once per batch (``max_refills: 1``) and trains
``DS_STEPS`` steps, so its rollouts (counted from its log) stay near the others' (reported); the G = 8 variants
roll the same 16 rollouts a step as 2 groups of 8. Per variant,
pooled over the runs (a stratified bootstrap, `proactive_eval.intervals`): PRS-B gain over SFT, missed and repeated
targets per episode vs SFT, and the change in latency of the targets both answered; and each variant vs the
trajectory variant on the same runs (with the same windows: `MATCHED`). Each run's scores are kept
(``<out>/s<k>/t<j>/<variant>/scores.json``), so an interrupted study resumes. Runs are single-threaded subprocesses (``--jobs`` at once): reproducible numbers.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from benchmarks.common import ROOT, record

SECTION = "Streaming GRPO credit: advantage × dynamic sampling, gain over SFT (6 runs)"
# demo grpo_streaming: 30 steps of 4 windows; a dynamic-sampling batch refills its zero-spread groups (35-44 % on the
# demo) once, so 21 steps roll about as many groups as 30
STEPS, DS_STEPS = 30, 21
LONG_WINDOWS = {"lead_s": 12.0, "tail_s": 8.0, "max_window_s": 24.0}  # the demo's: 6, 4, 12
VARIANTS = {
    "trajectory": {"advantage": "trajectory"},
    "decision": {"advantage": "decision"},
    "mixed": {"advantage": "mixed", "decision_weight": 1.0},
    "trajectory+ds": {"advantage": "trajectory", "dynamic_sampling": True, "max_refills": 1, "max_steps": DS_STEPS},
    "decision+ds": {"advantage": "decision", "dynamic_sampling": True, "max_refills": 1, "max_steps": DS_STEPS},
    "mixed+ds": {
        "advantage": "mixed",
        "decision_weight": 1.0,
        "dynamic_sampling": True,
        "max_refills": 1,
        "max_steps": DS_STEPS,
    },
    # the same rollout budget in groups of 8 (2 windows a step): more rows share each state, more decisions split
    "decision-g8": {"advantage": "decision", "num_generations": 8},
    "mixed-g8": {"advantage": "mixed", "decision_weight": 1.0, "num_generations": 8},
    # a coarser anchor: every row of the group at a step (same frames, any history), so every step where the rows
    # disagreed is credited, not only those whose histories were identical
    "decision-step": {"advantage": "decision", "decision_anchor": "step"},
    "mixed-step": {"advantage": "mixed", "decision_weight": 1.0, "decision_anchor": "step"},
    # windows twice as long (up to 12 decisions instead of 6): one window reward spread over more decisions
    "trajectory-long": {"advantage": "trajectory", **LONG_WINDOWS},
    "decision-step-long": {"advantage": "decision", "decision_anchor": "step", **LONG_WINDOWS},
}
TRAIN_SEED_STEP = 100
# the trainer whose fields the variants set (`proactive_rl.trainers.TRAINERS`)
TRAINER = "grpo_streaming_experimental"
# the trajectory run a variant is compared with when not "trajectory": the one with the same windows
MATCHED = {"decision-step-long": "trajectory-long"}


def _settings(seed_dir: Path):
    """The demo settings of a seed folder (its ``demo_results.json``; while that seed's demo still runs: the default
    settings with the folder's seed, which `make demo SEEDS=3` uses)."""
    from proactive_rl.demo.settings import DemoSettings

    path = seed_dir / "demo_results.json"
    if not path.is_file():
        return DemoSettings(seed=int(seed_dir.name.removeprefix("seed")))
    saved = json.loads(path.read_text())["settings"]
    return DemoSettings(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()})


def per_episode(eval_dir: Path) -> dict[str, dict]:
    """Episode id -> ``{"prs_b", "missed", "repeated", "latency": {target time: s}}`` of one PRS evaluation."""
    out = {}
    for line in (eval_dir / "prs" / "prs_episodes.jsonl").read_text().splitlines():
        r = json.loads(line)
        targets = r["per_target_b"]
        out[r["episode_id"]] = {
            "prs_b": 100 * r["prs_b"],
            "missed": sum(t["matched"] == 0 for t in targets),
            "repeated": sum(t["matched"] > 1 for t in targets),
            "latency": {str(t["time"]): t["latency"] for t in targets if t["latency"] is not None},
        }
    return out


def run_one(seed_dir: Path, train_seed: int, variant: str, out: Path) -> dict:
    """Train one variant from the seed's SFT model and score it (in this process); writes ``out/scores.json``."""
    import time

    from proactive_rl.demo.evaluation import prs_evaluator
    from proactive_rl.demo.plan import grpo_streaming_overrides
    from proactive_rl.evaluation import evaluate_model
    from proactive_rl.models import load_model

    settings = _settings(seed_dir)
    data = seed_dir / "data"
    recipe = {
        **grpo_streaming_overrides(settings, data, seed_dir / "runs" / "sft"),
        "seed": settings.seed + TRAIN_SEED_STEP * train_seed,
        "max_steps": STEPS,
        **VARIANTS[variant],
    }
    t0 = time.perf_counter()
    model_dir = train_variant(recipe, out)
    train_s = time.perf_counter() - t0
    logs = json.loads((model_dir / "trainer_state.json").read_text())["log_history"]
    steps = [entry for entry in logs if "reward" in entry]
    rows, group = 16, recipe.get("num_generations", 4)  # the tiny recipe's rollouts a step, and G
    model, processor = load_model(str(model_dir))
    model.eval()
    looked_at = replace(settings, counterfactual=False)
    evaluate_model(model, processor, [prs_evaluator(data, looked_at)], out_dir=out / "eval", fail_fast=True)
    scores = {
        "world_seed": settings.seed,
        "train_seed": recipe["seed"],
        "variant": variant,
        "episodes": per_episode(out / "eval"),
        "rollouts": sum(rows + group * e.get("rollout/refilled_groups", 0) for e in steps),
        "zero_spread": statistics.fmean(e.get("rollout/zero_spread_groups", e["frac_reward_zero_std"]) for e in steps),
        "train_s": round(train_s, 1),
    }
    (out / "scores.json").write_text(json.dumps(scores) + "\n")
    return scores


def train_variant(fields: dict, out: Path) -> Path:
    """The demo's streaming GRPO stage (as `proactive_rl.demo.stages.train_stage` runs it) with `fields`, by the
    experimental trainer: the shipped ``tiny/grpo_streaming.yaml`` with `fields` and ``trainer: TRAINER`` is written to
    ``out/recipes/grpo.yaml`` and trained into ``out/runs/grpo``, which is returned."""
    from proactive_rl.demo.stages import derive_recipe
    from proactive_rl.trainers import trainer_module

    model_dir = out / "runs" / "grpo"
    recipe = derive_recipe("grpo_streaming", {**fields, "trainer": TRAINER, "output_dir": str(model_dir)}, out, "grpo")
    module = trainer_module(TRAINER)
    module.main(*module.make_parser().parse_args_and_config(["--config", str(recipe)]))
    if not (model_dir / "config.json").is_file():
        raise RuntimeError(f"{TRAINER}: training finished but {model_dir} holds no model (config.json missing)")
    return model_dir


def _run_dir(out: Path, world_seed: int, train_seed: int, variant: str) -> Path:
    return out / f"s{world_seed}" / f"t{train_seed}" / variant


def _subprocess(seed_dir: Path, train_seed: int, variant: str, out: Path) -> None:
    if (out / "scores.json").is_file():
        return
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "benchmarks.grpo_credit", "--one", str(seed_dir), str(train_seed), variant, str(out)]
    with open(out / "log.txt", "w") as log:
        done = subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    if done.returncode:
        raise RuntimeError(f"{variant} (world {seed_dir.name}, training seed {train_seed}) failed: see {out}/log.txt")
    print(f"[grpo_credit] {seed_dir.name} t{train_seed} {variant}: done", flush=True)


def _pairs(runs: list[dict], baselines: list[dict], key: str) -> list[tuple[list[float], list[float]]]:
    """Per run, (variant, baseline) values of `key` over the episodes both scored."""
    out = []
    for run, base in zip(runs, baselines):
        ids = [i for i in run["episodes"] if i in base["episodes"]]
        out.append(([run["episodes"][i][key] for i in ids], [base["episodes"][i][key] for i in ids]))
    return out


def _latency_pairs(runs: list[dict], baselines: list[dict]) -> list[tuple[list[float], list[float]]]:
    """Per run, (variant, baseline) latencies of the targets both answered."""
    out = []
    for run, base in zip(runs, baselines):
        a, b = [], []
        for i, episode in run["episodes"].items():
            other = base["episodes"].get(i, {}).get("latency", {})
            for t, latency in episode["latency"].items():
                if t in other:
                    a.append(latency)
                    b.append(other[t])
        out.append((a, b) if a else ([0.0], [0.0]))
    return out


def _fmt(interval) -> str:
    i = interval if isinstance(interval, dict) else interval.as_dict()
    return f"{i['diff']:+.2f} [{i['low']:+.2f}, {i['high']:+.2f}]"


def summarise(results: dict[tuple, dict], sft: dict[str, dict]) -> tuple[str, dict]:
    """The markdown table and the values: each variant's gains over SFT and over the trajectory variant."""
    from proactive_eval.intervals import stratified_interval

    keys = sorted({(s, t) for s, t, _ in results})
    lines = [
        "| variant | PRS-B gain over SFT [95 % CI] | vs trajectory [95 % CI] | missed / episode vs SFT | "
        "repeated / episode vs SFT | latency vs SFT (s) | median latency (s) | rollouts | zero-spread groups |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    values = {}
    for variant in VARIANTS:
        runs = [results[(s, t, variant)] for s, t in keys if (s, t, variant) in results]
        if len(runs) < len(keys):
            continue
        base = [sft[s] for s, _ in keys]
        trajectory = [results.get((s, t, MATCHED.get(variant, "trajectory"))) for s, t in keys]
        gain = stratified_interval(_pairs(runs, base, "prs_b"))
        versus = stratified_interval(_pairs(runs, trajectory, "prs_b")) if all(trajectory) else None
        missed = stratified_interval(_pairs(runs, base, "missed"))
        repeated = stratified_interval(_pairs(runs, base, "repeated"))
        latency = stratified_interval(_latency_pairs(runs, base))
        median = statistics.median(x for r in runs for e in r["episodes"].values() for x in e["latency"].values())
        rollouts = statistics.fmean(r["rollouts"] for r in runs)
        zero = 100 * statistics.fmean(r["zero_spread"] for r in runs)
        values[variant] = {"gain": gain.as_dict(), "vs_trajectory": versus and versus.as_dict(), "rollouts": rollouts}
        vs = "—" if variant == "trajectory" or versus is None else _fmt(versus)
        vs += f" (vs {MATCHED[variant]})" if variant in MATCHED and versus is not None else ""
        lines.append(
            f"| {variant} | {_fmt(gain)} | {vs} | {_fmt(missed)} | {_fmt(repeated)} | {_fmt(latency)} | "
            f"{median:.1f} | {rollouts:.0f} | {zero:.0f} % |"
        )
    return "\n".join(lines), values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--demo-out", default="demo_out", help="a `make demo SEEDS=3` folder (seed<k> inside)")
    parser.add_argument("--out", default="study_out/grpo_credit")
    parser.add_argument("--world-seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--train-seeds", type=int, default=2, help="training seeds per world seed")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--doc", default=None, help="also write the table to this markdown page")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--one", nargs=4, metavar=("SEED_DIR", "TRAIN_SEED", "VARIANT", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        seed_dir, train_seed, variant, out = args.one
        run_one(Path(seed_dir), int(train_seed), variant, Path(out))
        return 0
    demo, out = Path(args.demo_out).resolve(), Path(args.out).resolve()
    seeds = {s: demo / f"seed{s}" for s in args.world_seeds}
    missing = [str(d) for d in seeds.values() if not (d / "runs" / "sft" / "config.json").is_file()]
    if missing:
        print(f"[grpo_credit] no SFT model in {', '.join(missing)}: run `make demo SEEDS=3` first", file=sys.stderr)
        return 2
    jobs = [(s, t, v) for s in seeds for t in range(args.train_seeds) for v in args.variants]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(lambda job: _subprocess(seeds[job[0]], job[1], job[2], _run_dir(out, *job)), jobs))
    results = {job: json.loads((_run_dir(out, *job) / "scores.json").read_text()) for job in jobs}
    sft = {s: {"episodes": per_episode(d / "eval" / "sft")} for s, d in seeds.items()}
    table, values = summarise(results, sft)
    print(table)
    runs = len(seeds) * args.train_seeds
    best = max(values, key=lambda v: values[v]["gain"]["low"])
    line = (
        f"{runs} runs ({len(seeds)} world × {args.train_seeds} training seeds), PRS-B gain over SFT [95 % CI]: "
        + "; ".join(f"{v} {_fmt(values[v]['gain'])}" for v in values)
        + f"; highest lower bound: {best}"
    )
    if args.doc:
        command = " ".join(["python -m benchmarks.grpo_credit", *(sys.argv[1:] if argv is None else argv)])
        fields = "\n".join(f"- `{v}`: {', '.join(f'`{k}: {x}`' for k, x in VARIANTS[v].items())}" for v in values)
        Path(args.doc).write_text(DOC.format(table=table, runs=runs, command=command, fields=fields))
    record(SECTION, line, dry=args.no_record, values=values)
    return 0


DOC = """# Streaming GRPO: per-decision credit and dynamic sampling

Written by `{command}` from the SFT checkpoints of `make demo SEEDS=3`; do not edit by hand. What the variants are:
docs/spec.md §8 (advantages, dynamic sampling); the intervals: docs/spec.md §15.

{runs} runs per variant (3 world seeds × 2 training seeds), each the demo's streaming GRPO stage from that world's SFT
model, scored on the world's held-out episodes of the streaming tasks (own frames). Gains are paired over
episodes within a run and pooled over runs (stratified bootstrap, 95 %).

{table}

The variants (recipe fields over the demo's streaming GRPO stage, `benchmarks/grpo_credit.py`), run by the
experimental trainer that has these knobs: `trainer: grpo_streaming_experimental` (`proactive_rl.experimental`; the
stable `grpo_streaming` keeps the default, `trajectory` without dynamic sampling):

{fields}
"""


if __name__ == "__main__":
    raise SystemExit(main())
