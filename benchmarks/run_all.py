"""Run every benchmark (``make bench``): each script appends its records to `benchmarks/results.jsonl`; RESULTS.md is
then rewritten from it (`benchmarks.results`).

Scripts run one after the other, each in its own process (a crash or a leak in one does not touch the next), at the
sizes in `SCRIPTS`: ``--quick`` for the scripts that have it, so the whole run takes minutes on a 2-core CPU. A
failing script is reported and the others still run; the exit code is 1 if any failed. Scripts in this folder that
are not in `SCRIPTS` are run too when they accept ``--quick``, and listed otherwise.

    .venv/bin/python -m benchmarks.run_all [--full] [--only rollout scoring ...] [--no-record] [--list]

``--full`` runs every script at its own default sizes (tens of minutes) and includes the slow ones (the SFT
ablation trains two models). GPU scripts (`benchmarks/gpu/`) are not run here; see the README.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import results

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NOT_BENCHMARKS = {"__init__", "common", "results", "run_all"}

#: script name -> (arguments for `make bench`, run by default). Order: cheapest first.
SCRIPTS: dict[str, tuple[list[str], bool]] = {
    "rewards": ([], True),
    "synthetic": (["--repeats", "1"], True),
    "tiny_model": (["--steps", "5"], True),
    "scoring": (["--quick"], True),
    "sft_step": (["--quick"], True),
    "rollout": (["--quick"], True),
    "streaming": (["--frames", "16", "64", "256"], True),
    "callback_overhead": (["--quick"], True),
    "memory": (["--quick"], True),
    "sft_ablation": (["--steps", "30"], False),  # trains two tiny models: --full only
    "grpo_credit": ([], False),  # 6 streaming GRPO runs a variant from `make demo SEEDS=3`'s folders: --full only
}


def _accepts(script: Path, flag: str) -> bool:
    # read, not `--help`: importing torch for every script would cost more than the check is worth
    return f'"{flag}"' in script.read_text()


def plan(full: bool, only: list[str] | None) -> tuple[list[tuple[str, list[str]]], list[str]]:
    """``(runs, skipped)``: the ``(name, argv)`` to run, and the scripts left out (with why)."""
    present = sorted(p.stem for p in HERE.glob("*.py") if p.stem not in NOT_BENCHMARKS)
    runs, skipped = [], []
    for name in [n for n in SCRIPTS if n in present] + [n for n in present if n not in SCRIPTS]:
        if only and name not in only:
            continue
        script = HERE / f"{name}.py"
        if name in SCRIPTS:
            quick_args, default = SCRIPTS[name]
            if full:
                runs.append((name, []))
            elif default or only:
                runs.append((name, [a for a in quick_args if a != "--quick" or _accepts(script, "--quick")]))
            else:
                skipped.append(f"{name} (slow: --full or --only {name})")
        elif _accepts(script, "--quick") or full:
            runs.append((name, [] if full else ["--quick"]))
        else:
            skipped.append(f"{name} (not in run_all.SCRIPTS and has no --quick)")
    missing = [n for n in (only or []) if n not in present]
    skipped += [f"{n} (no benchmarks/{n}.py)" for n in missing]
    return runs, skipped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="every script at its default sizes, slow ones included")
    parser.add_argument("--only", nargs="+", help="run only these scripts (names without .py)")
    parser.add_argument(
        "--no-record", action="store_true", help="pass --no-record: print, do not append to results.jsonl"
    )
    parser.add_argument("--list", action="store_true", help="print what would run, and exit")
    args = parser.parse_args(argv)

    runs, skipped = plan(args.full, args.only)
    if args.no_record:
        # a script that cannot print without recording is left out rather than allowed to write
        skipped += [f"{n} (has no --no-record)" for n, _ in runs if not _accepts(HERE / f"{n}.py", "--no-record")]
        runs = [(n, a + ["--no-record"]) for n, a in runs if _accepts(HERE / f"{n}.py", "--no-record")]
    if args.list:
        for name, extra in runs:
            print(f"python -m benchmarks.{name} {' '.join(extra)}".rstrip())
        for s in skipped:
            print(f"skipped: {s}")
        return 0

    env = {**os.environ, "TQDM_DISABLE": "1", "TOKENIZERS_PARALLELISM": "false"}
    summary, failed = [], []
    for name, extra in runs:
        command = [sys.executable, "-m", f"benchmarks.{name}", *extra]
        print(f"\n=== python {' '.join(command[1:])}", flush=True)
        start = time.perf_counter()
        code = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
        seconds = time.perf_counter() - start
        summary.append(f"{name:<18} {seconds:7.1f} s  {'ok' if code == 0 else f'FAILED (exit {code})'}")
        if code:
            failed.append(name)
    print("\n=== summary")
    print("\n".join(summary))
    for s in skipped:
        print(f"skipped: {s}")
    if args.no_record:
        print("nothing recorded (--no-record)")
    else:
        results.main()  # RESULTS.md: the latest record of each benchmark
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
