"""The demo's pipeline: the stages in order, their table and checks, and the ``proactive-rl demo`` command.

`run_demo` runs the stages listed in `STAGES` (`proactive_rl.demo.stages` builds and trains,
`proactive_rl.demo.evaluation` evaluates, `proactive_rl.demo.report` and `.checks` write the table); `run` is the
command (one seed, or ``--seeds N`` through `proactive_rl.demo.seeds`). The heavy imports happen inside
`run_demo`, so ``proactive-rl --help`` stays fast.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import logging
import os
import platform
import random
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from proactive_rl.demo.settings import DemoSettings, quick

STAGES = [
    # (key, table name, trainer stage or None, what it runs)
    ("untrained", "untrained", None, "tiny model, random init"),
    (
        "grounding",
        "grounding",
        "sft",
        "SFT on per-frame captions of the same videos (proactive_rl.synthetic.captions), scored on held-out captions",
    ),
    ("sft", "SFT", "sft", "focal SFT on the multi-task mixture (recipes/tiny/sft.yaml)"),
    (
        "grpo_streaming",
        "streaming GRPO",
        "grpo_streaming",
        "streaming GRPO from SFT (recipes/tiny/grpo_streaming.yaml)",
    ),
    (
        "grpo_suggestion",
        "suggestion GRPO",
        "grpo_suggestion",
        "suggestion GRPO with streaming replay (recipes/tiny/grpo_suggestion.yaml): the final model",
    ),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out", default="demo_out", help="output folder (model, data, runs, eval, report; default: demo_out)"
    )
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: every stage on a fraction of the data and steps"
    )
    parser.add_argument("--seed", type=int, default=0, help="model, data and training seed (default: 0)")
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="run the demo for seeds 0..N-1 (in <out>/seed<k>) and write a mean ± sd table to <out>/report/seeds.md",
    )
    parser.add_argument(
        "--stages",
        default=",".join(k for k, *_ in STAGES[1:]),
        help="training stages to run, comma-separated from grounding,sft,grpo_streaming,grpo_suggestion "
        "(default: all)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="INFO logs of the trainers and evaluators")


def _overrides(key: str, settings: DemoSettings, data: Path, model: Path) -> dict[str, Any]:
    # deferred: keeps --help / light imports fast
    from proactive_rl.demo import stages

    return getattr(stages, f"{key}_overrides")(settings, data, model)


def stage_runs(key: str, settings: DemoSettings) -> list[tuple[str, str]]:
    """The training runs of a stage, in order: ``(run name, overrides key)``; each starts from the model of the run
    before it, and the stage's model is the last one's (``<out>/runs/<key>``). Streaming GRPO has two phases when
    ``settings.grpo_count_tasks`` is set: every streaming task (``runs/grpo_streaming_all``), then the count windows."""
    if key == "grpo_streaming" and settings.grpo_count_tasks:
        return [("grpo_streaming_all", "grpo_streaming"), ("grpo_streaming", "grpo_count")]
    return [(key, key)]


def train_runs(key: str, trainer: str, settings: DemoSettings, data: Path, start: Path, out: Path) -> Path:
    """Train the runs of `stage_runs` with `trainer`, the first from `start`; returns the stage's model."""
    # deferred: keeps --help / light imports fast
    from proactive_rl.demo import stages

    checkpoint = start
    for name, overrides in stage_runs(key, settings):
        checkpoint = stages.train_stage(trainer, _overrides(overrides, settings, data, checkpoint), out, name=name)
    return checkpoint


def _timeline_episodes(data: Path, settings: DemoSettings) -> list:
    """One evaluated test episode of each streaming task, drawn at random with the demo's seed (what the timelines
    show: not the first episode, which would be a choice)."""
    # deferred: keeps --help / light imports fast

    from proactive_eval.episodes import load_episodes
    from proactive_rl.demo.stages import task_file

    rng, chosen = random.Random(settings.seed), []
    for task in settings.prs_tasks:
        episodes = load_episodes(task_file(data, "test", task))[: settings.eval_episodes]
        if episodes:
            chosen.append(episodes[rng.randrange(len(episodes))])
    return chosen


def run_demo(
    out: str | Path = "demo_out",
    settings: DemoSettings | None = None,
    train_stages: tuple[str, ...] = ("grounding", "sft", "grpo_streaming", "grpo_suggestion"),
    progress: bool = True,
    command: str = "proactive-rl demo",
) -> dict[str, Any]:
    """Run the demo; returns ``{"stages": [...], "wall_s", "report": {...}}`` (also written to
    ``<out>/demo_results.json``)."""
    # deferred: keeps --help / light imports fast
    from proactive_rl.demo.checks import checks_markdown, claims, directions
    from proactive_rl.demo.evaluation import evaluator_for
    from proactive_rl.demo.report import console_table, write_report
    from proactive_rl.demo.stages import StageSkipped, build_model, generate_data, say

    settings = settings or DemoSettings()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    t0 = time.perf_counter()
    model_dir = build_model(out, settings)
    data = generate_data(out, settings, progress=progress)
    say(f"setup (model + data): {time.perf_counter() - t0:.0f} s")

    results: list[dict[str, Any]] = []
    previous = model_dir  # the checkpoint each training stage starts from
    sft_ok = False
    for key, name, trainer, what in STAGES:
        stage: dict[str, Any] = {"key": key, "name": name, "what": what, "metrics": None}
        results.append(stage)
        checkpoint = model_dir
        if trainer is not None:
            if key not in train_stages:
                stage["status"] = "not run: not selected (--stages)"
                say(f"{name}: {stage['status']}")
                continue
            if key == "grounding" and not settings.grounding_tasks:
                stage["status"] = "not run: no grounding tasks (grounding_tasks is empty)"
                say(f"{name}: {stage['status']}")
                continue
            if key == "grpo_streaming" and not sft_ok:
                stage["status"] = "not run: the SFT stage did not produce a model (streaming GRPO starts from it)"
                say(f"{name}: {stage['status'].upper()}")
                continue
            t0 = time.perf_counter()
            try:
                checkpoint = train_runs(key, trainer, settings, data, previous, out)
            except StageSkipped as err:
                stage["status"] = f"not run: {err}"
            except Exception as err:  # a stage that breaks is reported in the table; the others still run
                traceback.print_exc()
                stage["status"] = f"failed: {type(err).__name__}: {err}"
            stage["train_s"] = round(time.perf_counter() - t0, 1)
            if "status" in stage:
                say(f"{name}: {stage['status'].upper()}")
                continue
            previous = checkpoint
            sft_ok = sft_ok or key == "sft"
            say(f"{name}: trained in {stage['train_s']:.0f} s -> {checkpoint}")
        t0 = time.perf_counter()
        # The untrained model is not played on swapped frames: a random init scores chance whatever it sees, and
        # that run cost a third of its evaluation (49 s -> 33 s on seed 0).
        looked_at = replace(settings, counterfactual=False) if trainer is None else settings
        try:
            evaluate = evaluator_for(key)
            evaluated = evaluate(checkpoint, data, looked_at, out / "eval" / key, progress=progress, label=name)
        except Exception as err:
            traceback.print_exc()
            stage["status"] = f"failed: evaluation: {type(err).__name__}: {err}"
            say(f"{name}: {stage['status'].upper()}")
            continue
        stage["eval_s"] = round(time.perf_counter() - t0, 1)
        stage["predictions"] = evaluated.pop("predictions")
        stage["metrics"], stage["status"], stage["checkpoint"] = evaluated, "ok", str(checkpoint)
        say(
            f"{name}: evaluated in {stage['eval_s']:.0f} s: "
            + ", ".join(
                f"{k} {v:.1f}"
                for k, v in evaluated.items()
                if v is not None and ("/" not in k or k.startswith("caption/"))
            )
        )

    wall = time.perf_counter() - start
    meta = _run_meta(wall, command)
    checks = directions(results, settings.sft_tasks) + claims(results)
    files = write_report(out, results, _timeline_episodes(data, settings), meta, checks_markdown(checks))
    summary = {
        "stages": [{k: v for k, v in s.items() if k != "predictions"} for s in results],
        "settings": settings.as_dict(),
        **meta,
        "report": {k: str(v) for k, v in files.items()},
        "directions": [{"direction": n, "holds": ok, "values": d} for n, ok, d in checks],
    }
    (out / "demo_results.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    print()
    print(console_table(results))
    print()
    for name, ok, detail in checks:
        print(f"  {'ok ' if ok else 'NO ' if ok is False else '-- '} {name}: {detail}")
    say(f"total wall time {wall:.0f} s; report: {files['markdown']}")
    return summary


def run(args: argparse.Namespace) -> int:
    """The ``demo`` command; exit code 0 when every selected stage ran, 1 otherwise (the report is written anyway)."""
    # deferred: keeps --help / light imports fast
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        import transformers

        transformers.logging.set_verbosity_error()
    valid = [k for k, *_ in STAGES[1:]]
    chosen = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    unknown = [s for s in chosen if s not in valid]
    if unknown:
        print(
            f"proactive-rl demo: --stages: unknown {', '.join(unknown)}; expected some of {', '.join(valid)}",
            file=sys.stderr,
        )
        return 2
    settings = DemoSettings(seed=args.seed)
    if args.quick:
        settings = quick(settings)
    command = (
        f"proactive-rl demo --out {args.out}"
        + (" --quick" if args.quick else "")
        + (f" --seed {args.seed}" if args.seed else "")
    )
    if chosen != tuple(valid):
        command += f" --stages {','.join(chosen)}"
    if args.seeds > 1:
        return _run_seeds(args, settings, chosen, command + f" --seeds {args.seeds}")
    summary = run_demo(args.out, settings, chosen, progress=not args.no_progress, command=command)
    return 0 if _stages_ok(summary["stages"], chosen) else 1


def _stages_ok(stages: list[dict[str, Any]], chosen: tuple[str, ...]) -> bool:
    """Every stage that was asked for (and the untrained evaluation) ran and was evaluated."""
    return all(s["status"] == "ok" for s in stages if s["key"] == "untrained" or s["key"] in chosen)


def _run_meta(wall_s: float, command: str) -> dict[str, Any]:
    """When, where and how long a demo run took, and its command (the report's header)."""
    return {
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": f"{platform.machine()} ({cpu_model()}), {os.cpu_count()} CPUs, Python {platform.python_version()}",
        "wall_s": wall_s,
        "command": command,
    }


def cpu_model(cpuinfo: str = "/proc/cpuinfo") -> str:
    """The CPU's name, family / model numbers and whether it has AVX-512, from `cpuinfo` (Linux), else
    `platform.processor`: the demo's floats depend on it (the same seed differs by up to 25 PRS-B points between two
    2-core machines, benchmarks/RESULTS.md, "three seeds of another CPU"), so the report names it."""
    fallback = platform.processor() or "unknown CPU"
    fields: dict[str, str] = {}
    try:
        for line in Path(cpuinfo).read_text().splitlines():
            key, sep, value = line.partition(":")
            if sep and key.strip() not in fields:
                fields[key.strip()] = value.strip()
    except OSError:
        return fallback
    name = fields.get("model name") or fallback
    numbers = ("cpu family", "model")
    family = f" family {fields['cpu family']} model {fields['model']}" if all(k in fields for k in numbers) else ""
    avx512 = ", AVX-512" if "avx512f" in fields.get("flags", "").split() else ""
    return name + family + avx512


def _run_seeds(args: argparse.Namespace, settings: DemoSettings, chosen: tuple[str, ...], command: str) -> int:
    """``--seeds N``: the demo for seeds 0..N-1 in ``<out>/seed<k>``, then ``<out>/report/seeds.md``."""
    # deferred: keeps --help / light imports fast

    from proactive_rl.demo.seeds import directions_table, seeds_table, write_seeds_report
    from proactive_rl.demo.stages import say

    start, runs, ok = time.perf_counter(), {}, True
    for seed in range(args.seeds):
        say(f"seed {seed} of 0..{args.seeds - 1} -> {Path(args.out) / f'seed{seed}'}")
        summary = run_demo(
            Path(args.out) / f"seed{seed}",
            replace(settings, seed=seed),
            chosen,
            progress=not args.no_progress,
            command=command.replace(f" --seeds {args.seeds}", "") + f" --seed {seed} (one of --seeds {args.seeds})",
        )
        runs[seed] = summary["stages"]
        ok = ok and _stages_ok(summary["stages"], chosen)
    meta = _run_meta(time.perf_counter() - start, command)
    path = write_seeds_report(Path(args.out), runs, settings.sft_tasks, meta)
    print()
    print(seeds_table(runs))
    print()
    print(directions_table(runs, settings.sft_tasks))
    print()
    say(f"{args.seeds} seeds in {meta['wall_s']:.0f} s; report: {path}")
    return 0 if ok else 1
