"""The blind schedule's cost: ``proactive-eval baseline`` on 500 P³I-style episodes (docs/spec.md §14).

500 random episodes of three tasks (10-120 s, 1-4 targets, texts of a small vocabulary; the shape of P³I-Bench's
converted files) are written as an episodes file and a second 500 as a "train" file; the command is run end to
end in a subprocess (interpreter start, loading, fitting both PRS modes, scoring with `score_prs`), by
leave-one-out and fitted on the train file. The issue budget is 10 s for 500 episodes.

    .venv/bin/python -m benchmarks.blind_baseline [--episodes 500] [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import record
from proactive_eval.episodes import Episode, save_episodes
from proactive_rewards import Target

SECTION = "Blind schedule: proactive-eval baseline"
TEXTS = {"accident": ["Warning"], "atomic": ["1", "2", "3", "4"], "compositional": ["start", "end", "turn"]}


def p3i_like(n: int, seed: int) -> list[Episode]:
    """`n` episodes of accident / atomic / compositional, 10-120 s long, 1-4 targets each."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        task = rng.choice(sorted(TEXTS))
        duration = round(rng.uniform(10, 120), 1)
        times = sorted(round(rng.uniform(0, duration), 1) for _ in range(rng.randint(1, 4)))
        targets = [Target(t, rng.choice(TEXTS[task])) for t in times]
        out.append(Episode(f"{task}{i:04d}", task, duration, "Watch.", targets, fps=1.0))
    return out


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "proactive_eval.cli", "baseline", *argv], check=True, capture_output=True)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="100 episodes")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    args = parser.parse_args()
    n = 100 if args.quick else args.episodes
    with tempfile.TemporaryDirectory() as tmp:
        test, train = Path(tmp) / "test.json", Path(tmp) / "train.json"
        save_episodes(test, p3i_like(n, 0))
        save_episodes(train, p3i_like(n, 1))
        loo = timed(["--episodes", str(test)])
        fitted = timed(["--episodes", str(test), "--fit", str(train)])
    line = (
        f"{n} P³I-style episodes (3 tasks, 10-120 s, 1-4 targets): leave-one-out {loo:.2f} s, fitted on {n} train "
        f"episodes {fitted:.2f} s, end to end (interpreter start, load, fit PRS-U and PRS-B, score_prs)"
    )
    record(SECTION, line, dry=args.no_record)


if __name__ == "__main__":
    main()
