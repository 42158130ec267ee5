"""The demo's pipeline: a loop over the stages, their table and checks, and the ``proactive-rl demo`` command.

`run_demo` runs the stage records of `proactive_rl.demo.plan.STAGES` in order (`proactive_rl.demo.stages` builds and
trains, `proactive_rl.demo.evaluation` evaluates, `proactive_rl.demo.report` and `.checks` write the table); `run` is the
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
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from proactive_rl.demo.plan import STAGES, TRAINED, Stage
from proactive_rl.demo.settings import DemoSettings, quick
from proactive_rl.errors import InputError

OUT = "demo_out"  # the output folder of `run_demo` and ``proactive-rl demo``


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default=OUT, help=f"output folder (model, data, runs, eval, report; default: {OUT})")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: every stage on a fraction of the data and steps"
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=DemoSettings.seed,
        help=f"model, data and training seed (default: {DemoSettings.seed})",
    )
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="run the demo for seeds 0..N-1 (in <out>/seed<k>; a seed folder holding that seed's finished run is reused) "
        "and write a mean ± sd table to <out>/report/seeds.md",
    )
    parser.add_argument(
        "--stages",
        default=",".join(TRAINED),
        help=f"training stages to run, comma-separated from {','.join(TRAINED)} (default: all)",
    )
    parser.add_argument(
        "--doc",
        default=None,
        help="also write the report's markdown (seeds.md with --seeds) to this file (`make demo SEEDS=3`: docs/results.md)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("-v", "--verbose", action="store_true", help="INFO logs of the trainers and evaluators")


def _timeline_episodes(data: Path, settings: DemoSettings) -> list:
    """One evaluated test episode of each streaming task, drawn at random with the demo's seed (what the timelines
    show: not the first episode, which would be a choice)."""
    # deferred: keeps --help / light imports fast

    from proactive_eval.episodes import load_episodes
    from proactive_rl.demo.plan import task_file

    rng, chosen = random.Random(settings.seed), []
    for task in settings.tasks:
        episodes = load_episodes(task_file(data, "test", task))[: settings.eval_episodes]
        if episodes:
            chosen.append(episodes[rng.randrange(len(episodes))])
    return chosen


def run_demo(
    out: str | Path = OUT,
    settings: DemoSettings | None = None,
    train_stages: tuple[str, ...] = TRAINED,
    progress: bool = True,
    command: str = "proactive-rl demo",
) -> dict[str, Any]:
    """Run the demo; returns ``{"stages": [...], "wall_s", "report": {...}}`` (also written to
    ``<out>/demo_results.json``)."""
    # deferred: keeps --help / light imports fast
    from proactive_rl.demo.checks import SMOKE_NOTE, checks_markdown, claims, directions, smoke_checks
    from proactive_rl.demo.comparisons import comparisons
    from proactive_rl.demo.pauc_floor import FINAL, floor_note
    from proactive_rl.demo.report import console_table, write_report
    from proactive_rl.demo.stages import build_model, generate_data, say

    settings = settings or DemoSettings()
    unknown = sorted(set(settings.overrides) - set(TRAINED))
    if unknown:
        raise ValueError(f"overrides: {', '.join(unknown)}: not a training stage ({', '.join(TRAINED)})")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if settings.smoke:
        say(SMOKE_NOTE)
    start = time.perf_counter()
    t0 = time.perf_counter()
    model_dir = build_model(out, settings)
    data = generate_data(out, settings, progress=progress)
    say(f"setup (model + data): {time.perf_counter() - t0:.0f} s")

    results: list[dict[str, Any]] = []
    models: dict[str, Path] = {}  # stage key -> its model, in order; a training stage starts from the latest
    for stage in STAGES:
        row: dict[str, Any] = {"key": stage.key, "name": stage.name, "what": stage.what, "metrics": None}
        results.append(row)
        model = model_dir if stage.trainer is None else _train(stage, row, settings, data, out, train_stages, models)
        if model is not None:
            models[stage.key] = model
            _evaluate(stage, row, model, data, settings, out, progress)

    wall = time.perf_counter() - start
    meta = _run_meta(wall, command)
    gains = comparisons(out, results)
    checks = smoke_checks(results) if settings.smoke else directions(results, settings.tasks) + claims(results, gains)
    # a claim against the blind schedule that fails is explained beside the table (a smoke run claims nothing)
    note = "" if settings.smoke else floor_note([out / "eval" / FINAL], gains)
    markdown = checks_markdown(checks) + (f"\n\n{note}" if note else "")
    files = write_report(
        out,
        results,
        _timeline_episodes(data, settings),
        meta,
        f"{SMOKE_NOTE}\n\n{markdown}" if settings.smoke else markdown,
        gains,
    )
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
    if settings.smoke:
        say(SMOKE_NOTE)
    for name, ok, detail in checks:
        print(f"  {'ok ' if ok else 'NO ' if ok is False else '-- '} {name}: {detail}")
    if note:
        say(note.replace("**", ""))
    say(f"every gain with its 95 % interval: {files['comparisons']}")
    say(f"total wall time {wall:.0f} s; report: {files['markdown']}")
    return summary


def _train(
    stage: Stage,
    row: dict[str, Any],
    settings: DemoSettings,
    data: Path,
    out: Path,
    chosen: tuple[str, ...],
    models: dict[str, Path],
) -> Path | None:
    """Train `stage` from the latest of `models` (stage key -> model, in order); returns its model, or `None` with
    ``row["status"]`` saying why there is none."""
    # deferred: keeps --help / light imports fast
    from proactive_rl.demo import stages

    missing = [s.name for s in STAGES if s.key in stage.needs and s.key not in models]
    if stage.key not in chosen:
        row["status"] = "not run: not selected (--stages)"
        stages.say(f"{stage.name}: {row['status']}")
        return None
    if missing:
        row["status"] = f"not run: {', '.join(missing)} did not produce a model ({stage.name} starts from it)"
        stages.say(f"{stage.name}: {row['status'].upper()}")
        return None
    t0 = time.perf_counter()
    try:
        start = list(models.values())[-1]
        checkpoint = stages.train_stage(stage.trainer, stage.recipe(settings, data, start), out, name=stage.key)
    except stages.StageSkipped as err:
        row["status"] = f"not run: {err}"
    except Exception as err:  # a stage that breaks is reported in the table; the others still run
        traceback.print_exc()
        row["status"] = f"failed: {type(err).__name__}: {err}"
    row["train_s"] = round(time.perf_counter() - t0, 1)
    if "status" in row:
        stages.say(f"{stage.name}: {row['status'].upper()}")
        return None
    stages.say(f"{stage.name}: trained in {row['train_s']:.0f} s -> {checkpoint}")
    return checkpoint


def _evaluate(
    stage: Stage, row: dict[str, Any], model: Path, data: Path, settings: DemoSettings, out: Path, progress: bool
) -> None:
    """Evaluate `model` as `stage` into ``row`` (metrics, predictions, status)."""
    # deferred: keeps --help / light imports fast
    from proactive_rl.demo import evaluation
    from proactive_rl.demo.stages import say

    t0 = time.perf_counter()
    evaluate = evaluation.evaluate_grounding if stage.captions else evaluation.evaluate_stage
    looked_at = settings if stage.swapped_frames else replace(settings, counterfactual=False)
    try:
        evaluated = evaluate(model, data, looked_at, out / "eval" / stage.key, progress=progress, label=stage.name)
    except Exception as err:
        traceback.print_exc()
        row["status"] = f"failed: evaluation: {type(err).__name__}: {err}"
        say(f"{stage.name}: {row['status'].upper()}")
        return
    row["eval_s"] = round(time.perf_counter() - t0, 1)
    row["predictions"] = evaluated.pop("predictions")
    row["metrics"], row["status"], row["checkpoint"] = evaluated, "ok", str(model)
    scores = [
        f"{k} {v:.1f}" for k, v in evaluated.items() if v is not None and ("/" not in k or k.startswith("caption/"))
    ]
    say(f"{stage.name}: evaluated in {row['eval_s']:.0f} s: " + ", ".join(scores))


def run(args: argparse.Namespace) -> int:
    """The ``demo`` command; exit code 0 when every selected stage ran, 1 otherwise (the report is written anyway)."""
    # deferred: keeps --help / light imports fast
    level = logging.INFO if args.verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if not args.verbose:
        import transformers

        transformers.logging.set_verbosity_error()
    chosen = tuple(s.strip() for s in args.stages.split(",") if s.strip())
    unknown = [s for s in chosen if s not in TRAINED]
    if unknown:
        raise InputError(f"--stages: unknown {', '.join(unknown)}; expected some of {', '.join(TRAINED)}")
    settings = DemoSettings(seed=args.seed)
    if args.quick:
        settings = quick(settings)
    command = (
        f"proactive-rl demo --out {args.out}"
        + (" --quick" if args.quick else "")
        + (f" --seed {args.seed}" if args.seed else "")
    )
    if chosen != TRAINED:
        command += f" --stages {','.join(chosen)}"
    if args.seeds > 1:
        return _run_seeds(args, settings, chosen, command + f" --seeds {args.seeds}")
    summary = run_demo(args.out, settings, chosen, progress=not args.no_progress, command=command)
    _copy_doc(Path(args.out) / "report" / "README.md", args.doc)
    return 0 if _stages_ok(summary["stages"], chosen) else 1


def _copy_doc(report: Path, doc: str | None) -> None:
    """``--doc``: the report's markdown, as written, at `doc` too (the results page of the docs is this file)."""
    if doc and report.exists():
        Path(doc).parent.mkdir(parents=True, exist_ok=True)
        Path(doc).write_text(report.read_text())


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
    `platform.processor`: the demo's floats depend on it (the same seed differed by up to 25 PRS-B points between two
    2-core machines), so the report names it."""
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


def finished_seed(folder: Path, settings: DemoSettings, chosen: tuple[str, ...]) -> dict[str, Any] | None:
    """The summary (``demo_results.json``) of a seed's run in `folder` that finished with these `settings` and every
    stage of `chosen` ok, else `None`: ``--seeds N`` reuses it, so a killed multi-seed run resumes at the seed it was
    on (and seeds run apart, one ``--seed k --out OUT/seed<k>`` each, are then reported together)."""
    try:
        summary = json.loads((folder / "demo_results.json").read_text())
    except (OSError, ValueError):
        return None
    same = summary.get("settings") == json.loads(json.dumps(settings.as_dict(), default=str))
    stages = summary.get("stages")
    ok = isinstance(stages, list) and all(isinstance(s, dict) and "status" in s for s in stages)
    return summary if same and ok and _stages_ok(stages, chosen) and "wall_s" in summary else None


def _run_seeds(args: argparse.Namespace, settings: DemoSettings, chosen: tuple[str, ...], command: str) -> int:
    """``--seeds N``: the demo for seeds 0..N-1 in ``<out>/seed<k>``, then ``<out>/report/seeds.md``."""
    # deferred: keeps --help / light imports fast

    from proactive_rl.demo.seeds import directions_table, seeds_table, write_seeds_report
    from proactive_rl.demo.stages import say

    runs, ok, wall = {}, True, 0.0
    for seed in range(args.seeds):
        folder = Path(args.out) / f"seed{seed}"
        summary = finished_seed(folder, replace(settings, seed=seed), chosen)
        if summary is not None:
            say(f"seed {seed}: {folder} holds this seed's finished run (same settings, every stage ok): reused")
        else:
            say(f"seed {seed} of 0..{args.seeds - 1} -> {folder}")
            summary = run_demo(
                folder,
                replace(settings, seed=seed),
                chosen,
                progress=not args.no_progress,
                command=command.replace(f" --seeds {args.seeds}", "")
                + f" --seed {seed} (one of --seeds {args.seeds})",
            )
        runs[seed] = summary["stages"]
        wall += summary["wall_s"]
        ok = ok and _stages_ok(summary["stages"], chosen)
    meta = _run_meta(wall, command)
    path = write_seeds_report(Path(args.out), runs, settings.tasks, meta)
    _copy_doc(path, args.doc)
    print()
    print(seeds_table(runs))
    print()
    print(directions_table(runs, settings.tasks))
    print()
    say(f"{args.seeds} seeds in {meta['wall_s']:.0f} s; report: {path}")
    return 0 if ok else 1
