"""``proactive-eval``: score predictions, run a policy over episodes, convert public formats (docs/spec.md §1, §4, §5).

    proactive-eval score --episodes anno.json --predictions preds.jsonl --judge rule:token_f1 --out report/
    proactive-eval run --episodes eps.json --policy openai:Qwen2.5-VL-7B@http://localhost:8000/v1 --out run/
    proactive-eval convert --from pvqa WEB/anno.json --out conv/web_episodes.json
    proactive-eval mcqa --data-dir ProactiveBench/test --policy replay:answers.jsonl --out pb/   # filtered benchmark
    proactive-eval baseline --episodes test.json --fit train.json     # the blind schedule's PRS (no model)
    proactive-eval score --benchmark ovo_bench --annotations ovo_bench_new.json --predictions results.json --out r/
    proactive-eval run --benchmark p3i --annotations p3i_test.json --policy openai:MODEL@URL --out run/   # any benchmark

Episodes of task ``pvqa`` are scored with PAUC (a judge is needed: a rule scorer, or any OpenAI-compatible
server); every other task with PRS-U / PRS-B, whose free-text tasks (intervention) take their content score from
the same ``--judge`` (token-F1 by default, as the intervention reward; docs/spec.md §4). Episodes whose video cannot
be played are skipped, named in ``results.json`` and counted in the coverage printed beside every number.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

from proactive_eval.commands.score import JUDGE_HELP, make_judge, prs_content_scorers, score
from proactive_eval.episodes import load_episodes, save_episodes
from proactive_eval.errors import InputError, report
from proactive_eval.predictions import OTHER_SILENCE_SIGNALS, load_predictions
from proactive_rewards import ALPHA

__all__ = ["build_parser", "load_any", "main", "make_judge", "make_policy", "prs_content_scorers", "score"]

logger = logging.getLogger("proactive_eval")

FORMATS = ("auto", "episodes", "pvqa", "p3i")
MISSING_SHOWN = 5  # missing media files named by `convert`
EPISODES_FIX = "write a JSON list (or JSONL) of episode records, docs/spec.md §1, or a ProactiveVideoQA anno.json"
PREDICTIONS_FIX = 'write one JSON line {"id": EPISODE_ID, "responses": [{"time": SECONDS, "text": ...}]} per episode'

# ---- loading -----------------------------------------------------------------------------------------


def detect_format(path: str | Path) -> str:
    """``pvqa`` when the first record has ``answer`` + ``conversation`` (ProactiveVideoQA), else ``episodes``."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.records import read_records

    records = read_records(path)
    first = records[0] if records else {}
    return "pvqa" if isinstance(first, dict) and "answer" in first and "conversation" in first else "episodes"


def load_any(path: str | Path, fmt: str = "auto", on_error: str = "raise", video_root: str | Path | None = None):
    """Episodes from `path` in format `fmt` (one of `FORMATS`); relative videos resolve against `video_root`
    (default: the file's folder)."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.records import nonempty

    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
    _require_file(path, "episodes file")
    if fmt == "auto":
        fmt = detect_format(path)
    if fmt == "pvqa":
        from proactive_eval.benchmarks.pvqa.format import convert_pvqa

        episodes = convert_pvqa(path, on_error=on_error, video_root=video_root)
    elif fmt == "p3i":
        from proactive_eval.benchmarks.p3i.format import convert_p3i

        episodes = convert_p3i(path, on_error=on_error, video_root=video_root)
    else:
        episodes = load_episodes(path, on_error=on_error, video_root=video_root)
    return nonempty(episodes, path, "episodes", EPISODES_FIX)


def _require_file(path, what: str) -> None:
    """An `InputError` naming `path` unless it is a file (a long or invalid path is "not found", not an OSError)."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.records import is_file, shown

    if not is_file(path):
        shown_path = str(path) if len(str(path)) <= 200 else shown(str(path))
        kind = "is a folder, not a file" if _is_dir(path) else "not found"
        raise InputError(f"{what} {kind}: {shown_path}")


def _check_out(path) -> None:
    """An `InputError` when the report folder `path` names an existing file (found before any work is done)."""
    if path is not None and Path(path).exists() and not _is_dir(path):
        raise InputError(f"--out: {path} is a file; name a folder for the report (it is created if missing)")


def _is_dir(path) -> bool:
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def _read_predictions(path, silence=()):
    """`load_predictions` of a file that must hold at least one record (an empty one is an error, exit 2)."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.records import nonempty

    _require_file(path, "predictions file")
    return nonempty(load_predictions(path, silence), path, "predictions", PREDICTIONS_FIX)


def load_files(paths, fmt: str = "auto", on_error: str = "raise", video_root: str | Path | None = None):
    """The episodes of every file of `paths` (one or more), in order, as one `EpisodeList` (see `load_any`)."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.records import EpisodeList

    out = EpisodeList()
    for path in [paths] if isinstance(paths, (str, Path)) else paths:
        episodes = load_any(path, fmt, on_error, video_root)
        out.extend(episodes)
        out.skipped.extend(getattr(episodes, "skipped", []))
    return out


def make_policy(spec: str):
    """A `StreamingPolicy` from ``silent``, ``replay:PREDICTIONS.jsonl``, ``openai:MODEL@BASE_URL`` or
    ``package.module:factory`` (called with no arguments)."""
    # deferred: keeps --help / light imports fast
    from proactive_eval import streaming

    kind, _, rest = spec.partition(":")
    if spec == "silent":
        return streaming.SilentPolicy()
    if kind == "replay" and rest:
        return streaming.ScriptedPolicy(_read_predictions(rest))
    if kind == "openai" and "@" in rest:
        try:
            from proactive_eval.common.openai_policy import OpenAIChatPolicy
        except ImportError as err:
            raise InputError(f"the OpenAI-compatible policy is not available: {err}") from None
        model, _, base_url = rest.partition("@")
        return OpenAIChatPolicy(base_url=base_url, model=model, api_key=os.environ.get("OPENAI_API_KEY"))
    if rest and "." in kind:
        try:
            factory = getattr(importlib.import_module(kind), rest)
        except (ImportError, AttributeError) as err:
            raise InputError(f"cannot import policy factory {spec!r}: {err}") from None
        return factory()
    raise InputError(
        f"unknown policy {spec!r}; expected silent | replay:PREDICTIONS.jsonl | openai:MODEL@BASE_URL | module:factory"
    )


# ---- commands ----------------------------------------------------------------------------------------


def _silence(args) -> tuple[str, ...]:
    return tuple(args.silence or ())


def _score_args(
    args, episodes, predictions: dict, out, meta: dict[str, Any], failed=None, counterfactuals=None, step_seconds=None
) -> dict[str, Any]:
    """`score` with the scoring options shared by ``score`` and ``run``."""
    fit = load_files(args.fit or (), args.format, args.on_error, args.video_root)
    return score(
        episodes,
        predictions,
        args.judge,
        out,
        tuple(args.omega),
        plots=not args.no_plots,
        progress=not args.no_progress,
        meta=meta,
        judge_concurrency=args.judge_concurrency,
        failed=failed,
        fit_episodes=fit or None,
        counterfactuals=counterfactuals,
        step_seconds=step_seconds,
    )


def _check_scoring_flags(args) -> None:
    """The flags of ``score`` and ``run``, checked before any file is read or any episode played."""
    if not all(0 <= o <= 1 for o in args.omega):  # also refuses nan
        raise InputError(f"--omega: every ω must be in [0, 1], got {' '.join(map(str, args.omega))}")
    if args.judge_concurrency < 1:
        raise InputError(f"--judge-concurrency: must be >= 1, got {args.judge_concurrency}")
    _check_out(args.out)


def _print_report(name: str, report: dict[str, Any]) -> None:
    """A registered benchmark's short table of `report` (its ``results.json``), or the JSON where it has none."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.benchmarks import get_benchmark

    text = get_benchmark(name).report_text
    print(text(report) if text is not None else json.dumps(report, indent=1, ensure_ascii=False))


def cmd_score(args) -> int:
    if args.benchmark:  # a registered benchmark's official results file (docs/architecture.md, "A new benchmark")
        # deferred: keeps --help / light imports fast
        from proactive_eval.commands.benchmark import score_benchmark

        report = score_benchmark(
            args.benchmark, args.annotations, args.predictions, args.out, args.model, args.video_root
        )
        _print_report(args.benchmark, report)
        return 0
    if args.episodes is None:
        raise InputError("--episodes is required (or --benchmark NAME with --annotations)")
    _check_scoring_flags(args)
    episodes = load_files(args.episodes, args.format, args.on_error, args.video_root)
    predictions = _read_predictions(args.predictions, _silence(args))
    meta = {
        "episodes": " ".join(args.episodes),
        "predictions": str(args.predictions),
        "skipped": len(episodes.skipped),
    }
    _score_args(args, episodes, predictions, args.out, meta)
    return 0


def cmd_run_benchmark(args) -> int:
    """``run --benchmark``: a registered benchmark's items put to the policy under its protocol
    (`proactive_eval.commands.benchmark`): an OpenAI-compatible server asked each question (``official``), or a
    state-token policy that decides when to speak (the benchmark's `policy_protocols`: any ``--policy``)."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.benchmarks import get_benchmark
    from proactive_eval.benchmarks.stream_bench.run import EndpointPrompter
    from proactive_eval.commands.benchmark import run_benchmark

    bench = get_benchmark(args.benchmark, needs="runnable")  # an unknown name first, before the other flags
    protocol = args.protocol or ("official" if "official" in bench.protocols else bench.protocols[0])
    if protocol not in bench.protocols:
        raise InputError(f"--protocol: benchmark {bench.name!r} has {', '.join(bench.protocols)}, got {protocol!r}")
    if args.annotations is None or not Path(args.annotations).is_file():
        raise InputError(f"--annotations: file not found: {args.annotations}")
    kind, _, rest = args.policy.partition(":")
    if protocol in bench.policy_protocols:
        prompter = make_policy(args.policy)
    elif kind != "openai" or "@" not in rest:
        raise InputError(
            f"--protocol {protocol} asks an openai:MODEL@BASE_URL server (a local model: proactive-rl eval)"
        )
    else:
        model, _, base_url = rest.partition("@")
        prompter = EndpointPrompter(base_url, model, os.environ.get("OPENAI_API_KEY"))
    summary = run_benchmark(args.benchmark, args.annotations, prompter, protocol, args.out, args.video_root)
    if summary["missing_videos"]:
        print(f"warning: {len(summary['missing_videos'])} videos not found: {summary['missing_videos'][:5]}")
    _print_report(args.benchmark, summary)
    return 0


def cmd_run(args) -> int:
    if args.benchmark:
        return cmd_run_benchmark(args)
    if args.episodes is None:
        raise InputError("--episodes is required (or --benchmark NAME with --annotations)")
    # deferred: keeps --help / light imports fast
    try:
        from proactive_eval.streaming import run_streaming
    except ImportError as err:
        raise InputError(f"the streaming loop is not available: {err}") from None
    # deferred: keeps --help / light imports fast
    from proactive_eval.episodes import MAX_FPS

    if args.fps is not None and not 0 < args.fps <= MAX_FPS:  # also refuses nan
        raise InputError(f"--fps: must be > 0 and at most {MAX_FPS:g}, got {args.fps}")
    if args.max_frames is not None and args.max_frames < 1:
        raise InputError(f"--max-frames: must be >= 1, got {args.max_frames}")
    _check_scoring_flags(args)
    episodes = load_files(args.episodes, args.format, args.on_error, args.video_root)
    policy = make_policy(args.policy)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    predictions_path = out / "predictions.jsonl"
    frame_source = None
    if args.fps is not None:
        from proactive_eval.video import iter_frames

        def frame_source(episode):
            return iter_frames(episode, fps=args.fps)

    predictions = run_streaming(
        policy,
        episodes,
        predictions_path,
        frame_source=frame_source,
        silence_signals=_silence(args),
        max_frames=args.max_frames,
        progress=not args.no_progress,
        plain=args.turn_format == "plain",
        on_error=args.on_video_error,
    )
    print(f"predictions: {predictions_path} ({predictions.resumed} episodes resumed from it)")
    if predictions.failed:
        print(f"{len(predictions.failed)} of {len(episodes)} episodes could not be played:", file=sys.stderr)
        for eid, reason in predictions.failed.items():
            print(f"  {eid}: {reason}", file=sys.stderr)
    runs = {}
    for kind in args.counterfactual or ():  # docs/spec.md §14: the same policy, other frames
        from proactive_eval.common.counterfactual import counterfactual_source, swap_partners
        from proactive_eval.video import iter_frames

        played = [e for e in episodes if e.id not in predictions.failed]
        partners = swap_partners(played) if kind == "swap" else {}
        source = counterfactual_source(kind, played, frame_source or iter_frames)
        runs[kind] = run_streaming(
            policy,
            [e for e in played if kind != "swap" or e.id in partners],
            out / f"predictions_{kind}.jsonl",
            frame_source=source,
            silence_signals=_silence(args),
            max_frames=args.max_frames,
            progress=not args.no_progress,
            plain=args.turn_format == "plain",
            on_error=args.on_video_error,
        )
        print(f"predictions with {kind} frames: {out / f'predictions_{kind}.jsonl'}")
    meta = {"episodes": " ".join(args.episodes), "predictions": str(predictions_path), "policy": args.policy}
    # speed: the episodes played by this run (resumed ones were not timed)
    _score_args(args, episodes, predictions, out, meta, predictions.failed, runs, predictions.step_seconds)
    return 0


def cmd_convert(args) -> int:
    # deferred: keeps --help / light imports fast
    from proactive_eval.commands.paths import missing_media, rebase_episodes, rebase_proactivebench

    src = Path(args.input)
    _require_file(src, "input file")
    if args.video_root is not None and not _is_dir(args.video_root):
        raise InputError(f"--video-root: not a folder: {args.video_root}")
    if args.source == "proactivebench":
        from proactive_eval.benchmarks.proactivebench.format import load_proactivebench, save_proactivebench
        from proactive_eval.records import nonempty

        records = load_proactivebench(src, on_error=args.on_error, data_dir=args.video_root)
        nonempty(records, src, "ProactiveBench records", "write one JSON record per line (docs/spec.md §6)")
        items = rebase_proactivebench(records, args.out, args.paths)
        save_proactivebench(args.out, items)
    else:
        records = load_any(src, args.source, args.on_error, args.video_root)
        items = rebase_episodes(records, args.out, args.paths)
        save_episodes(args.out, items)
    print(f"wrote {len(records)} records to {args.out} (media paths {args.paths} to its folder)")
    for err in records.skipped:
        print(f"skipped: {err}", file=sys.stderr)
    if records.skipped:
        print(f"skipped {len(records.skipped)} bad records", file=sys.stderr)
    missing = missing_media(items)
    if missing:
        what = "images" if args.source == "proactivebench" else "videos"
        first = ", ".join(missing[:MISSING_SHOWN]) + (" ..." if len(missing) > MISSING_SHOWN else "")
        print(
            f"warning: {len(missing)} of {len(items)} {what} not found: {first}; an evaluation will skip those "
            "episodes. If the data moved, pass --video-root DIR (the folder the paths are relative to).",
            file=sys.stderr,
        )
    return 0


def cmd_baseline(args) -> int:
    """The blind schedule (PRS / PAUC) or image-blind policy (MCQA) of the files (docs/spec.md §14)."""
    # deferred: keeps --help / light imports fast

    from proactive_eval.commands.baseline import baseline_results, baseline_text

    if not 0 <= args.alpha < float("inf"):  # also refuses nan
        raise InputError(f"--alpha: must be a finite number >= 0, got {args.alpha}")
    if args.benchmark:  # a registered benchmark's blind floor, fitted on its official annotation file
        from proactive_eval.commands.benchmark import baseline_benchmark

        results = baseline_benchmark(args.benchmark, args.annotations, args.video_root)
        print(json.dumps(results, indent=1, ensure_ascii=False))
        return 0
    if not args.episodes:
        raise InputError("--episodes is required (or --benchmark NAME with --annotations)")
    if args.dataset:
        from proactive_eval.benchmarks.proactivebench.blind import blind_mcqa_summary
        from proactive_eval.benchmarks.proactivebench.environments import ENVIRONMENTS_FIX, load_environments
        from proactive_eval.records import nonempty

        def load(paths):
            envs = []
            for path in paths:
                _require_file(path, "environments file")
                try:
                    loaded = load_environments(
                        path, args.dataset, args.data_dir, load_images=False, protocol=args.protocol
                    )
                except InputError:
                    raise
                except ValueError as err:  # an unknown dataset or protocol: the message lists the valid ones
                    raise InputError(str(err)) from None
                envs += nonempty(loaded, path, f"{args.protocol} benchmark records", ENVIRONMENTS_FIX)
            return envs

        results = {"mcqa": blind_mcqa_summary(load(args.episodes), load(args.fit) if args.fit else None)}
    else:
        episodes = load_files(args.episodes, args.format, args.on_error, args.video_root)
        fit = load_files(args.fit or (), args.format, args.on_error, args.video_root)
        _warn_missing_videos(episodes)
        results = baseline_results(episodes, fit or None, args.alpha, args.judge)
    print(json.dumps(results, indent=1, ensure_ascii=False) if args.json else baseline_text(results))
    return 0


def _warn_missing_videos(episodes) -> None:
    """`baseline` reads no video, `run` and `proactive-rl eval` skip an episode whose video is missing: say so, as
    their blind rows then cover fewer episodes than this one (the same number needs the same episodes)."""
    # deferred: keeps --help / light imports fast
    from proactive_eval.commands.paths import missing_media

    missing = missing_media(episodes)
    if missing and len(missing) < len(episodes):
        print(
            f"warning: {len(missing)} of {len(episodes)} episodes' videos are missing (e.g. {missing[0]}): `run` and "
            "`proactive-rl eval` skip them, so their blind rows cover the others; this one covers all",
            file=sys.stderr,
        )


def _names(needs: str) -> str:
    """The registered benchmarks that have `needs` (a `Benchmark` field, or "runnable"), for a flag's help."""
    # deferred: keeps `import proactive_eval.cli` light
    from proactive_eval.benchmarks import benchmark_names

    return ", ".join(benchmark_names(needs))


def _add_baseline(sub) -> None:
    p = sub.add_parser("baseline", help="the blind schedule (PRS / PAUC) or image-blind policy (MCQA) of a benchmark")
    p.add_argument("--episodes", nargs="+", help="the evaluated episode files, or environment files (1+)")
    p.add_argument(
        "--benchmark", metavar="NAME", help=f"the blind floor of a registered benchmark: {_names('blind_floor')}"
    )
    p.add_argument("--annotations", help="--benchmark: the official annotation (question) file")
    p.add_argument("--fit", nargs="+", help="files to fit on (e.g. the training split); default: leave-one-out")
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"PRS decay rate (default: {ALPHA})")
    p.add_argument("--json", action="store_true", help="print the results (with the schedules) as JSON")
    p.add_argument("--format", default="auto", choices=FORMATS, help="episodes file format (default: auto)")
    p.add_argument("--judge", default="rule:token_f1", help=f"PAUC judge and free-text content scorer: {JUDGE_HELP}")
    p.add_argument("--video-root", help="folder the episodes' video paths resolve against (videos are not read)")
    p.add_argument("--on-error", default="raise", choices=("raise", "skip"), help="bad records: stop or skip")
    p.add_argument("--dataset", help="the files are ProactiveBench environments of this dataset (e.g. QD)")
    p.add_argument("--data-dir", help="ProactiveBench: the image root (default: the file's folder; not read)")
    p.add_argument(
        "--protocol", default="filtered", choices=("filtered", "unfiltered"), help="ProactiveBench (default: filtered)"
    )
    p.set_defaults(func=cmd_baseline)


def build_parser() -> argparse.ArgumentParser:
    # deferred: keeps --help / light imports fast
    parser = argparse.ArgumentParser(prog="proactive-eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)

    def common(p: argparse.ArgumentParser, episodes_required: bool = True) -> None:
        p.add_argument(
            "--episodes",
            nargs="+",
            required=episodes_required,
            help="episodes JSON/JSONL, or ProactiveVideoQA anno.json (1+)",
        )
        p.add_argument("--format", default="auto", choices=FORMATS, help="episodes file format (default: auto)")
        p.add_argument("--video-root", help="folder the episodes' video paths resolve against (a moved dataset)")
        p.add_argument(
            "--judge",
            default="rule:token_f1",
            help=f"PAUC judge, and PRS content scorer of free-text tasks (intervention): {JUDGE_HELP}",
        )
        p.add_argument("--judge-concurrency", type=int, default=8, help="parallel judge requests")
        p.add_argument("--omega", type=float, nargs="+", default=[0, 0.5, 1], help="PAUC ω values")
        p.add_argument("--on-error", default="raise", choices=("raise", "skip"), help="bad episode records")
        p.add_argument(
            "--silence",
            nargs="+",
            help="the model's own silence signals besides </Silence> (docs/spec.md §13), e.g. "
            + " ".join(repr(x) for x in OTHER_SILENCE_SIGNALS),
        )
        p.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
        p.add_argument("--no-progress", action="store_true", help="no progress bars")
        p.add_argument(
            "--fit",
            nargs="+",
            help="episodes to fit the blind schedule on (e.g. the training split); default: leave-one-out",
        )

    p = sub.add_parser("score", help="score a predictions file against episodes")
    common(p, episodes_required=False)
    p.add_argument("--benchmark", metavar="NAME", help=f"an official results file of a benchmark: {_names('summary')}")
    p.add_argument("--annotations", help="--benchmark: the official annotation (question) file")
    p.add_argument("--model", help="--benchmark streamingbench_po: the model's key in the results file")
    p.add_argument("--predictions", required=True, help='JSONL {"id", "responses"} or official model_response_list')
    p.add_argument("--out", help="report folder (results.json, report.md, plots); omitted: print only")
    p.set_defaults(func=cmd_score)

    p = sub.add_parser("run", help="run a policy over episodes (resumable), then score")
    common(p, episodes_required=False)
    p.add_argument("--benchmark", metavar="NAME", help=f"a registered benchmark's items: {_names('runnable')}")
    p.add_argument("--annotations", help="--benchmark: the official annotation (question) file")
    p.add_argument(
        "--protocol",
        help="--benchmark: how items are put to the policy (default: official where the benchmark has it, else its "
        "first: p3i, pvqa streaming)",
    )
    p.add_argument(
        "--policy", required=True, help="silent | replay:PREDICTIONS.jsonl | openai:MODEL@BASE_URL | module:factory"
    )
    p.add_argument("--out", required=True, help="run folder: predictions.jsonl and the report")
    p.add_argument("--fps", type=float, help="frames per second (default: each episode's fps)")
    p.add_argument("--max-frames", type=int, help="keep only the latest K images in the model's history")
    p.add_argument(
        "--counterfactual",
        nargs="+",
        choices=("swap", "freeze"),
        help="also play every episode with another episode's frames (swap) or its first frame (freeze) and report "
        "<metric>_swap and vision_gain (docs/spec.md §14)",
    )
    p.add_argument(
        "--turn-format",
        default="state_tokens",
        choices=("state_tokens", "plain"),
        help="state_tokens (default): a turn must be </Silence> or </Response> + content; plain: the model writes "
        "bare text (a bare turn is a response, an empty one silence); docs/spec.md §13",
    )
    p.add_argument(
        "--on-video-error",
        default="skip",
        choices=("skip", "raise"),
        help="an episode whose video is missing, truncated or undecodable: skip it (named in results.json, "
        "counted in the coverage; default) or stop",
    )
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("convert", help="convert a public format to episodes")
    p.add_argument("--from", dest="source", required=True, choices=("pvqa", "p3i", "proactivebench"))
    p.add_argument("input", help="the input file")
    p.add_argument("--out", required=True, help="output file (episodes JSON; normalised JSONL for proactivebench)")
    p.add_argument("--on-error", default="raise", choices=("raise", "skip"), help="bad records: stop or skip")
    p.add_argument(
        "--video-root", help="folder the input's video (image) paths are relative to (default: the input's folder)"
    )
    p.add_argument(
        "--paths",
        default="relative",
        choices=("relative", "absolute"),
        help="write media paths relative to the output's folder (default) or absolute",
    )
    p.set_defaults(func=cmd_convert)

    from proactive_eval.benchmarks.proactivebench.command import add_parser as add_mcqa

    add_mcqa(sub)
    _add_baseline(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return args.func(args)
    except InputError as err:  # a flag, file, record or video of the user's (EpisodeError, VideoError): exit 2
        return report("proactive-eval", err)
    except Exception as err:  # a judge or server failure: say what failed, not a traceback
        if type(err).__name__ == "JudgeError":
            print(f"proactive-eval: error: {err}", file=sys.stderr)
            return 1
        raise


if __name__ == "__main__":
    sys.exit(main())
