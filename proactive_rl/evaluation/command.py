"""`proactive-rl eval`: evaluate one model, or every checkpoint of a training run as it appears.

::

    proactive-rl eval --config recipes/tiny/sft.yaml --model outputs/tiny-sft/checkpoint-60
    proactive-rl eval --config recipes/tiny/sft.yaml --watch outputs/tiny-sft          # beside a training job
    proactive-rl eval --episodes data/val.json --model outputs/tiny-sft                 # episode files, no recipe
    accelerate launch --num_processes 8 -m proactive_rl.cli eval --config RECIPE.yaml --watch OUTPUT_DIR

The evaluators come from the ``eval_callback`` block of a recipe (or a YAML holding that block alone), so a
checkpoint evaluated here gets the numbers the training callback logged for it; a training recipe without the block
is evaluated on its held-out data, and ``--episodes`` on episode files (`proactive_rl.evaluation.implied`). Every file
and folder the evaluators read is checked before any model loads (`proactive_rl.evaluation.data_check`). ``--model``
writes ``results.json``, per-evaluator reports and plots to a folder of its own (default
``<model>/eval/<data>-<YYYYmmdd-HHMMSS>/``, never over another run's results: `proactive_rl.evaluation.run_folder`),
printed at the start and the end; ``--watch`` keeps ``state.json``, one folder per checkpoint and
``leaderboard.{md,json,png}`` in ``--out`` (default ``<OUTPUT_DIR>/eval_watch``). See
`proactive_rl.evaluation.watch` for the watching rules.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from proactive_rl.errors import InputError, MissingInput
from proactive_rl.evaluation import build_evaluators, evaluate_model, load_eval_config
from proactive_rl.evaluation.backends import log_results
from proactive_rl.evaluation.config import EvalCallbackConfig, episodes_eval_config
from proactive_rl.evaluation.data_check import check_data
from proactive_rl.evaluation.run_folder import choose_folder, claim, data_name
from proactive_rl.evaluation.shutdown import exit_launched
from proactive_rl.evaluation.watch import CheckpointWatcher
from proactive_rl.models.spec import check_model_source, load_model_spec
from proactive_rl.shipped import resolve_recipe


def coverage_table(results: dict) -> str:
    """Every metric beside the coverage of its evaluator (scored / total episodes) and the episodes not played."""
    lines = ["| evaluator | metric | value | coverage |", "|---|---|---|---|"]
    notes = []
    for name, entry in results["evaluators"].items():
        if entry.get("status") != "ok":
            lines.append(f"| {name} | (failed: {entry.get('stage')}) | – | – |")
            continue
        summary = entry.get("summary") or {}
        overall = summary.get("overall") or {}
        coverage = overall.get("coverage", str(entry.get("num_items", "–")))
        groups = summary.get("groups") or {}
        for key, value in entry["metrics"].items():
            if key == "coverage" or key.endswith("/coverage") or key == "failed_episodes":
                continue
            group = key.rsplit("/", 1)[0] if "/" in key else None
            row_coverage = (groups.get(group) or {}).get("coverage", coverage) if group else coverage
            shown = f"{value:.2f}" if isinstance(value, float) else str(value)
            lines.append(f"| {name} | {key} | {shown} | {row_coverage} |")
        for failure in summary.get("failures") or []:
            notes.append(f"{name}: {failure['id']} not played: {failure['reason']}")
        notes += [f"{name}: {warning}" for warning in summary.get("warnings") or []]
    return "\n".join(lines + notes)


def load_checkpoint(path: str | Path, dtype: str | None = None):
    """``(model, processor)`` on this process's device, in eval mode (`load_model_spec`: ``tiny:``, hub id, folder)."""
    # deferred: keeps torch/transformers out of light import paths
    from accelerate import PartialState

    model, processor = load_model_spec(str(path), dtype=dtype)
    return model.to(PartialState().device).eval(), processor


def eval_config(args: argparse.Namespace) -> EvalCallbackConfig:
    """The evaluators of ``--config`` (an ``eval_callback`` block, or what a training recipe's held-out data implies)
    or of ``--episodes``; every problem is an `InputError` naming the file and key."""
    if args.episodes:
        if args.config:
            raise InputError("pass --config RECIPE or --episodes FILE [FILE ...], not both")
        _episode_files_nonempty(args.episodes)
        return episodes_eval_config(args.episodes)
    if not args.config:
        raise InputError(
            "pass --config RECIPE (its eval_callback block or held-out data) or --episodes FILE [FILE ...]"
        )
    path = resolve_recipe(args.config)  # a shipped recipe by name too (tiny/sft.yaml)
    try:
        return load_eval_config(path)
    except InputError:
        raise
    except (OSError, ValueError) as err:  # an evaluator's own check of its fields
        raise InputError(f"{path}: {err}") from err


def _episode_files_nonempty(paths: list[str]) -> None:
    """An `EpisodeError` naming the first ``--episodes`` file that holds no episodes (`nonempty`): read as it is, it
    would be scored 0.00 on coverage 0/0. Paths that are no file are left to `episodes_eval_config`'s own checks."""
    # deferred: keeps the CLI's import light
    from proactive_eval.episodes import load_episodes
    from proactive_eval.records import is_file, nonempty

    fix = "write a JSON list (or JSONL) of episode records (docs/spec.md §1), e.g. with proactive-eval convert"
    for path in paths:
        if is_file(path):
            nonempty(load_episodes(path), path, "episodes", fix)


def checkpoint_hint(model: str) -> str:
    """The fix for a missing ``--model`` folder: the checkpoints that exist beside it, else the other model specs."""
    folder = Path(model).expanduser()
    run_dir = folder if folder.name and not folder.name.startswith("checkpoint-") else folder.parent
    steps = {p: p.name.rpartition("-")[2] for p in (run_dir.glob("checkpoint-*") if run_dir.is_dir() else [])}
    found = sorted((p for p, step in steps.items() if step.isdigit()), key=lambda p: int(steps[p]))
    if found:
        return f"checkpoints there: {', '.join(str(p) for p in found[-3:])}"
    return "pass --model a saved model folder (OUTPUT_DIR or OUTPUT_DIR/checkpoint-N), a hub id or tiny:qwen2_5_vl:xs"


def _run_folder(args: argparse.Namespace, name: str, evaluators, state) -> Path:
    """The folder of this ``--model`` run (`choose_folder`), chosen on the main process and told to every rank; an
    ``--out`` refused there is an `InputError` on every rank (no rank left waiting)."""
    # deferred: keeps torch/transformers out of light import paths
    from accelerate.utils import broadcast_object_list

    chosen = None
    if state.is_main_process:
        try:
            names = [ev.name for ev in evaluators]
            folder, note = choose_folder(args.model, args.out, name, names, fresh=args.fresh, overwrite=args.overwrite)
            claim(folder, args.model, name)
            print(note, file=sys.stderr, flush=True)  # at the start too: a killed run is resumed by its folder
            chosen = (str(folder), None)
        except InputError as err:
            chosen = (None, str(err))
    if state.num_processes > 1:
        chosen = broadcast_object_list([chosen])[0]
    if chosen[1] is not None:
        raise InputError(chosen[1])
    return Path(chosen[0])


def run(args: argparse.Namespace) -> int:
    """The ``eval`` command; exit code 0, or 1 when an evaluator failed on a single ``--model``."""
    return exit_launched(_run(args))


def _run(args: argparse.Namespace) -> int:
    # deferred: keeps torch/transformers out of light import paths
    from accelerate import PartialState

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = eval_config(args)
    if args.model:
        check_model_source(args.model, "--model", "--model", checkpoint_hint(args.model))
    elif args.once and not Path(args.watch).is_dir():  # without --once the watcher waits for the run to start
        raise MissingInput(f"--watch: no training output folder at {args.watch!r}; pass the run's output_dir")
    evaluators = build_evaluators(config.evaluators, progress=config.progress, log_samples=config.log_samples)
    check_data(evaluators, args.config or "--episodes")  # every file they read, before any model loads
    import torch

    # Without CUDA, `accelerate launch --num_processes N` gives N CPU processes only if the state is told so (gloo).
    state = PartialState(cpu=not torch.cuda.is_available())
    out = _run_folder(args, data_name(args.config, args.episodes), evaluators, state) if args.model else None
    report_to = [r for r in args.report_to.split(",") if r and r != "none"]
    if state.is_main_process and "wandb" in report_to:
        import wandb

        wandb.init(job_type="eval", config={"target": args.model or args.watch, "config": args.config})

    if args.model:
        if state.is_main_process and evaluators[0].progress:  # on a terminal: a large model takes a while to load
            names = ", ".join(ev.name for ev in evaluators)
            print(f"proactive-rl eval: loading {args.model}, then evaluating it with {names}", file=sys.stderr)
        model, processor = load_checkpoint(args.model, args.dtype)
        results = evaluate_model(
            model,
            processor,
            evaluators,
            out_dir=out,  # every rank: resumable runs store each finished episode as it ends
            plots=not args.no_plots,
            meta={"checkpoint": args.model},
            resume=not args.fresh,
        )
        if state.is_main_process:
            log_results(results, results.get("step") or 0, report_to=report_to, logging_dir=str(out / "tb"))
            print(coverage_table(results))
            print(f"results (every metric, the reports and predictions) of this run: {out / 'results.json'}")
        return 0 if results["complete"] else 1

    run_dir = Path(args.watch)
    out = Path(args.out) if args.out else run_dir / "eval_watch"

    def load(path: Path):
        return load_checkpoint(path, args.dtype)

    def on_result(results):
        if report_to:
            log_results(results, results["step"], report_to=report_to, logging_dir=str(out / "tb"))

    watcher = CheckpointWatcher(
        run_dir, out, evaluators, load, settle_s=args.settle, plots=not args.no_plots, on_result=on_result
    )
    n = watcher.run(poll_s=args.poll, once=args.once, follow=args.follow, max_idle_s=args.max_idle)
    if state.is_main_process:
        print(f"evaluated {n} checkpoint(s); leaderboard: {out / 'leaderboard.md'}")
    return 0
