"""The flags of `proactive-rl eval` (`proactive_rl.evaluation.command` runs them).

Apart from the evaluation package, whose import loads transformers and the evaluators: ``proactive-rl --help``
and ``proactive-rl eval --help`` import argparse only.
"""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--model", help="a checkpoint directory, a hub id, or tiny:<arch>:<size>")
    target.add_argument("--watch", metavar="OUTPUT_DIR", help="a training output_dir: evaluate each new checkpoint-N")
    parser.add_argument(
        "--config",
        help="a recipe YAML: its eval_callback block, a YAML with that block alone, or a training recipe (its "
        "held-out data: eval_mixture / eval_environments)",
    )
    parser.add_argument(
        "--episodes",
        nargs="+",
        metavar="FILE",
        help="episode files to evaluate without a recipe (PAUC where every target has a reply window, else PRS)",
    )
    parser.add_argument(
        "--out",
        help="output folder (default: a new <model>/eval/<data>-<YYYYmmdd-HHMMSS> each run; <OUTPUT_DIR>/eval_watch)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="--model: write into an --out that holds an earlier run's results.json (refused otherwise)",
    )
    parser.add_argument("--dtype", default=None, help="model dtype: float32, bfloat16, float16, auto (default: auto)")
    parser.add_argument("--report_to", default="none", help="comma-separated: wandb, tensorboard, trackio, or none")
    parser.add_argument("--no-plots", action="store_true", help="no report / leaderboard plots")
    parser.add_argument(
        "--fresh",
        action="store_true",
        help="--model: replay every episode in a new folder (default: resume a killed run of the same model and data)",
    )
    watch = parser.add_argument_group("watching (--watch)")
    watch.add_argument("--poll", type=float, default=30.0, help="seconds between scans (default: 30)")
    watch.add_argument(
        "--settle", type=float, default=10.0, help="seconds a checkpoint's files must stay unchanged (default: 10)"
    )
    watch.add_argument("--once", action="store_true", help="evaluate the checkpoints there now, then exit")
    watch.add_argument("--follow", action="store_true", help="keep watching after the run has finished")
    watch.add_argument("--max-idle", type=float, default=None, help="exit after this many seconds with nothing new")
