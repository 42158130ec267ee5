"""Memory: peak RSS of the tiny SFT and GRPO recipes, each in its own process.

Each recipe runs as users launch it (its YAML, a few steps, a temporary output folder) under a small wrapper process
that reports ``resource.getrusage(RUSAGE_CHILDREN).ru_maxrss`` of that one child, so runs do not see each other's
peak. The import floor (``import torch, transformers, trl, proactive_rl``) is measured the same way, to show what the
model, data and optimizer add on top.

    .venv/bin/python -m benchmarks.memory [--steps 3] [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.common import record

SECTION = "Memory"
ROOT = Path(__file__).resolve().parent.parent
# Runs `argv` as a child and prints the child's peak RSS in KiB (Linux reports ru_maxrss in KiB).
_WRAPPER = (
    "import resource, subprocess, sys\n"
    "code = subprocess.run(sys.argv[1:]).returncode\n"
    "print('PEAK_RSS_KIB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)\n"
)


def recipes(out: str, steps: int) -> dict[str, list[str]]:
    """The commands measured: the trainers' entry points (``python -m proactive_rl.sft`` ...; the ``.main`` modules
    only define them, so running those measured an import) on the tiny recipes, shortened to `steps` optimizer steps.
    Each must leave a model in its ``--output_dir`` (`trained`)."""
    py = sys.executable
    return {
        "import floor (torch, transformers, trl, proactive_rl)": [
            py,
            "-c",
            "import torch, transformers, trl, proactive_rl.sft.main, proactive_rl.grpo.streaming",
        ],
        "tiny SFT (recipes/tiny/sft.yaml)": [
            py, "-m", "proactive_rl.sft", "--config", "recipes/tiny/sft.yaml",
            "--max_steps", str(steps), "--output_dir", f"{out}/sft", "--save_strategy", "no",
        ],
        "tiny streaming GRPO (recipes/tiny/grpo_streaming.yaml, from the untrained tiny model)": [
            py, "-m", "proactive_rl.grpo.streaming", "--config", "recipes/tiny/grpo_streaming.yaml",
            "--model_name_or_path", "tiny:qwen2_5_vl:xs", "--max_steps", str(steps), "--output_dir", f"{out}/grpo",
        ],
        "tiny suggestion GRPO (recipes/tiny/grpo_suggestion.yaml, LoRA)": [
            py, "-m", "proactive_rl.grpo.suggestion", "--config", "recipes/tiny/grpo_suggestion.yaml",
            "--max_steps", str(steps), "--output_dir", f"{out}/suggestion",
        ],
    }  # fmt: skip


def trained(argv: list[str]) -> bool:
    """Whether a recipe command left a model (or LoRA adapter) in its ``--output_dir``; the import floor has none."""
    if "--output_dir" not in argv:
        return True
    out = Path(argv[argv.index("--output_dir") + 1])
    return (out / "config.json").is_file() or (out / "adapter_config.json").is_file()


def peak_rss(argv: list[str]) -> tuple[float, float]:
    """``(peak RSS in MiB, seconds)`` of `argv` run in a fresh process from the repository root."""
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"), "TQDM_DISABLE": "1"}
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, *argv], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - start
    line = [x for x in proc.stdout.splitlines() if x.startswith("PEAK_RSS_KIB")]
    if not line or line[-1].split()[2] != "0" or not trained(argv):
        raise RuntimeError(f"{' '.join(argv)} failed or left no model:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return int(line[-1].split()[1]) / 1024, seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps per recipe")
    parser.add_argument("--quick", action="store_true", help="make bench sizes (2 steps)")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    args = parser.parse_args(argv)
    if args.quick:
        args.steps = min(args.steps, 2)

    with tempfile.TemporaryDirectory() as out:
        parts, floor = [], None
        for name, cmd in recipes(out, args.steps).items():
            mib, seconds = peak_rss(cmd)
            floor = mib if floor is None else floor
            extra = "" if mib == floor else f" (+{mib - floor:,.0f} over the floor)"
            parts.append(f"{name}: {mib:,.0f} MiB{extra}, {seconds:.0f} s")
            print(parts[-1], flush=True)
    line = f"peak RSS, {args.steps} optimizer steps each, one process each: " + "; ".join(parts)
    record(f"{SECTION}: peak RSS of the tiny recipes", line, dry=args.no_record)


if __name__ == "__main__":
    main()
