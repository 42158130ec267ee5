"""The `proactive-rl` command: ``proactive-rl <command> [options]``.

Commands are registered in `COMMANDS` as ``name -> (help, add_arguments, run)``; ``run(args) -> exit code``.
Heavy imports happen inside ``run``, so ``proactive-rl --help`` stays fast.

- ``synth``: write the embedded synthetic world to files (`proactive_rl.synthetic.export`).
- ``train``: the recipe's trainer from `proactive_rl.trainers`; ``eval``: `proactive_rl.evaluation.command`; ``demo``.
- ``recipes``: list the shipped recipes or copy one out (`proactive_rl.recipes_cli`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

# argparse only (the evaluation package, which runs them, loads transformers)
from proactive_rl.eval_cli import add_arguments as add_eval_arguments

# --- synth -------------------------------------------------------------------------------------------


def _add_synth_arguments(parser: argparse.ArgumentParser) -> None:
    # deferred: keeps --help / light imports fast
    from proactive_eval.episodes import TASKS  # light: numpy only
    from proactive_rl.synthetic.export import FRACTIONS
    from proactive_rl.synthetic.tasks import Knobs

    kinds = ("occlusion", "corruption", "sketch", "zoom_out")
    parser.add_argument("--out", required=True, help="output folder (train/, validation/, test/ inside)")
    parser.add_argument(
        "--tasks", default=",".join(TASKS), help=f"comma-separated task kinds from: {', '.join(TASKS)}"
    )
    parser.add_argument("--n", type=int, default=10, help="episodes per task, over all splits (default: 10)")
    parser.add_argument("--seed", type=int, default=0, help="run seed (default: 0); split seeds are 3*seed+{0,1,2}")
    parser.add_argument(
        "--envs",
        default=",".join(kinds),
        help=f"comma-separated MCQA environment kinds from: {', '.join(kinds)}; 'none' for none",
    )
    parser.add_argument(
        "--n-envs", type=int, default=None, help="environments per kind over all splits (default: --n)"
    )
    split = ",".join(f"{f:g}" for f in FRACTIONS)
    parser.add_argument("--split", default=split, help=f"train,validation,test fractions (default: {split})")
    parser.add_argument("--no-videos", action="store_true", help="skip the mp4 files (episodes JSON only)")
    parser.add_argument("--overwrite", action="store_true", help="rewrite every file, even in a folder made otherwise")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument(
        "--streaming-benchmarks",
        action="store_true",
        help="also write OVO-Bench forward records and StreamingBench Proactive Output questions in the official "
        "formats (out/ovo_bench/, out/streamingbench/; --n records per task)",
    )
    knobs = parser.add_argument_group("difficulty knobs (defaults: `proactive_rl.synthetic.tasks.Knobs`)")
    default = Knobs()
    knobs.add_argument(
        "--size", type=int, default=default.size, help=f"frame side in pixels (default: {default.size})"
    )
    duration = ",".join(str(s) for s in default.duration)
    knobs.add_argument("--duration", default=duration, help=f"episode length in seconds MIN,MAX (default: {duration})")
    for flag, kind, what in (
        ("--distractors", int, "distracting objects/events"),
        ("--speed", float, "motion speed multiplier"),
        ("--event-duration", int, "event length in steps"),
        ("--noise", float, "pixel noise std, 0-255 units"),
    ):
        value = getattr(default, flag[2:].replace("-", "_"))
        knobs.add_argument(flag, type=kind, default=value, help=f"{what} (default: {value:g})")


def _csv(value: str, valid: Sequence[str], flag: str) -> list[str]:
    # deferred: keeps --help / light imports fast
    from proactive_rl.errors import InputError, did_you_mean

    items = [] if value.strip().lower() == "none" else [v.strip() for v in value.split(",") if v.strip()]
    unknown = [v for v in items if v not in valid]
    if unknown:
        hint = did_you_mean(unknown[0], valid)
        raise InputError(f"{flag}: unknown {', '.join(unknown)};{hint} expected one of {', '.join(valid)}")
    return items


def _run_synth(args: argparse.Namespace) -> int:
    # deferred: keeps --help / light imports fast
    from proactive_eval.episodes import TASKS
    from proactive_rl.errors import InputError
    from proactive_rl.synthetic.environments import KINDS
    from proactive_rl.synthetic.export import export_dataset

    tasks = _csv(args.tasks, TASKS, "--tasks")
    envs = _csv(args.envs, KINDS, "--envs")
    try:
        fractions = [float(x) for x in args.split.split(",")]
        lo, hi = (int(x) for x in args.duration.split(","))
    except ValueError:
        raise InputError(
            f"--split takes three numbers and --duration two integers, got {args.split!r}, {args.duration!r}"
        ) from None
    try:
        result = export_dataset(
            args.out,
            tasks,
            args.n,
            seed=args.seed,
            env_kinds=envs,
            n_envs=args.n_envs,
            fractions=fractions,
            videos=not args.no_videos,
            progress=not args.no_progress,
            overwrite=args.overwrite,
            size=args.size,
            duration=(lo, hi),
            distractors=args.distractors,
            speed=args.speed,
            event_duration=args.event_duration,
            noise=args.noise,
        )
    except (ValueError, TypeError) as err:  # a knob out of range, a folder made with other arguments
        if isinstance(err, InputError):
            raise
        raise InputError(str(err)) from err
    if result["reused_folder"]:
        print(
            f"{args.out}: same arguments as before: reusing existing files ({result['reused']} reused, "
            f"{result['written']} written)"
        )
    else:
        print(f"{args.out}: {result['written']} files written")
    for split, sizes in result["splits"].items():
        empty = (tasks and not sizes["episodes_per_task"]) or (envs and not sizes["environments_per_kind"])
        print(
            f"  {split}: {sizes['episodes_per_task']} episodes x {len(tasks)} tasks, "
            f"{sizes['environments_per_kind']} environments x {len(envs)} kinds"
            + (" (empty here: too few to fill every split)" if empty else "")
        )
    if args.streaming_benchmarks:
        from proactive_rl.synthetic.streaming_benchmarks import export_streaming_benchmarks

        files = export_streaming_benchmarks(
            args.out, args.n, args.seed, not args.no_videos, size=args.size, duration=(lo, hi), noise=args.noise
        )
        print(f"  {files['ovo_bench']}: {files['records']} records; {files['streamingbench']}: {files['questions']}")
    return 0


# --- eval (proactive_rl.evaluation.command) ----------------------------------------------------------------------


def _run_eval(args: argparse.Namespace) -> int:
    if sys.stderr.isatty():  # the imports below take seconds: say something first (a log gets nothing)
        print("proactive-rl eval: starting (importing torch and transformers)", file=sys.stderr, flush=True)
    # deferred: keeps --help / light imports fast
    from proactive_rl.evaluation.command import run

    return run(args)


# --- train (proactive_rl.trainers; `main` hands it the arguments before argparse, which does not know them) ------


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("rest", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)


def _run_train(args: argparse.Namespace) -> int:
    # deferred: keeps --help / light imports fast
    from proactive_rl.trainers import run_train

    return run_train(args.rest)


COMMANDS: dict[str, tuple[str, Callable, Callable]] = {
    "synth": ("write the synthetic world (mp4 + episodes JSON + MCQA JSONL)", _add_synth_arguments, _run_synth),
    "train": ("train a model (SFT / GRPO) from a YAML recipe", _no_arguments, _run_train),
    "eval": ("evaluate a model, or each checkpoint of a run as it appears", add_eval_arguments, _run_eval),
    "recipes": (
        "list the shipped recipes and launch configs (ls), or copy one out to edit (cp tiny/sft.yaml my_sft.yaml)",
        lambda parser: __import__("proactive_rl.recipes_cli", fromlist=["add_arguments"]).add_arguments(parser),
        lambda args: __import__("proactive_rl.recipes_cli", fromlist=["run"]).run(args),
    ),
    # proactive_rl.demo imports only its settings at module level; the heavy imports happen inside run
    "demo": (
        "the end-to-end demo on the synthetic world: build, evaluate, SFT, streaming GRPO, suggestion GRPO, report",
        lambda parser: __import__("proactive_rl.demo", fromlist=["add_arguments"]).add_arguments(parser),
        lambda args: __import__("proactive_rl.demo", fromlist=["run"]).run(args),
    ),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="proactive-rl",
        description="RL post-training for proactive assistants.",
        epilog="An error about your input (recipe, data, model path) is one line with exit status 2; "
        "`proactive-rl --debug COMMAND ...` or PROACTIVE_RL_DEBUG=1 shows its traceback.",
    )
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True
    for name, (help_text, add_arguments, _run) in COMMANDS.items():
        add_arguments(sub.add_parser(name, help=help_text, description=help_text))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `proactive-rl` console script; returns the exit code."""
    # deferred: keeps --help / light imports fast
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--debug"]:  # tracebacks for input errors too (proactive_rl.errors)
        os.environ["PROACTIVE_RL_DEBUG"] = "1"
        argv = argv[1:]
    try:
        if argv and argv[0] == "train":  # TrlParser owns the train flags (recipe fields), so argparse steps aside
            return _run_train(argparse.Namespace(rest=argv[1:]))
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command][2](args)
    except Exception as err:  # an error about the user's input: one line, exit status 2; anything else: traceback
        from proactive_rl.errors import input_errors, report

        if isinstance(err, input_errors()):
            return report(f"proactive-rl {argv[0] if argv else ''}".strip(), err)
        raise


if __name__ == "__main__":
    sys.exit(main())
