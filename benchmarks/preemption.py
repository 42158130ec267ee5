"""Runs that survive their cluster: a tiny SFT command killed at random moments, relaunched with
``--resume_from_checkpoint true``, must end with the uninterrupted run's weights (`proactive_rl.checkpoints`,
`proactive_rl.preemption`).

Three measurements on the tiny SFT recipe (``--steps`` 120, a checkpoint every ``--save-every`` 20, the last two
kept), each in a fresh output folder, each compared to one uninterrupted run of the same command:

1. ``--kills`` times: SIGKILL at a moment drawn uniformly over the uninterrupted run's wall time, then the same
   command plus ``--resume_from_checkpoint true``: status 0 and max |Δw| ≤ 1e-5;
2. SIGKILL after a checkpoint is written, then the newest checkpoint's weights cut to half (what a kill during a
   non-atomic save leaves): the relaunch names it, resumes from the one before, and ends equal;
3. SIGTERM at a random moment: status 75 with ``checkpoint-<the step reached>`` complete, and a relaunch that ends
   equal.

    .venv/bin/python -m benchmarks.preemption [--kills 10] [--steps 120] [--save-every 20] [--seed 0] [--no-record]

Not run by ``make bench`` (about 12 tiny SFT runs: ~15 min on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from safetensors.torch import load_file

from benchmarks.common import record
from proactive_rl.checkpoints import checkpoints, missing_parts
from proactive_rl.preemption import REQUEUE_EXIT_CODE

ROOT = Path(__file__).resolve().parents[1]

TOL = 1e-5


def recipe(folder: Path, steps: int, save_every: int) -> Path:
    """The tiny SFT recipe, shortened: half the episodes, ``steps`` steps, a checkpoint every ``save_every``."""
    fields = yaml.safe_load((ROOT / "recipes" / "tiny" / "sft.yaml").read_text())
    fields["dataset_mixture"] = [
        {**m, "num_episodes": max(2, m["num_episodes"] // 4)} for m in fields["dataset_mixture"]
    ]
    fields |= {"max_steps": steps, "save_steps": save_every, "save_total_limit": 2, "logging_steps": save_every}
    fields |= {"per_device_train_batch_size": 2, "disable_tqdm": True}
    path = folder / "sft.yaml"
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    return path


def command(config: Path, out: Path, resume: bool = False) -> list[str]:
    cmd = [sys.executable, "-m", "proactive_rl.cli", "train", "--config", str(config), "--output_dir", str(out)]
    return cmd + (["--resume_from_checkpoint", "true"] if resume else [])


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}


def start(cmd: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=log.open("w"), stderr=subprocess.STDOUT)


def finish(cmd: list[str], log: Path) -> int:
    return start(cmd, log).wait()


def max_dw(reference: dict, out: Path) -> float:
    got = load_file(out / "model.safetensors")
    assert got.keys() == reference.keys()
    return max((reference[k].float() - got[k].float()).abs().max().item() for k in reference)


def resumed_from(log: Path) -> str:
    text = log.read_text()
    found = re.search(r"resuming from (\S+)", text)
    return Path(found.group(1)).name if found else ("fresh" if "starting fresh" in text else "?")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--save-every", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="preemption-"))
    config = recipe(work, args.steps, args.save_every)

    began = time.perf_counter()
    if finish(command(config, work / "straight"), work / "straight.log") != 0:
        print((work / "straight.log").read_text()[-3000:])
        return 1
    wall = time.perf_counter() - began
    reference = load_file(work / "straight" / "model.safetensors")
    print(f"uninterrupted: {args.steps} steps in {wall:.0f} s")

    ok, lines = 0, []
    for k in range(args.kills):  # 1. SIGKILL at a random moment
        out, at = work / f"kill{k}", rng.uniform(0, wall)
        run = start(command(config, out), work / f"kill{k}.log")
        time.sleep(at)
        run.send_signal(signal.SIGKILL)
        run.wait()
        newest = next((p.name for p in checkpoints(out)), "none")
        rc = finish(command(config, out, resume=True), work / f"kill{k}-resume.log")
        dw = max_dw(reference, out) if rc == 0 else float("nan")
        ok += rc == 0 and dw <= TOL
        log = work / f"kill{k}-resume.log"
        lines.append(f"kill at {at:.0f} s (newest {newest}): resumed from {resumed_from(log)}, rc {rc}, |dw| {dw:.2g}")
        print(lines[-1], flush=True)

    out = work / "cut"  # 2. the newest checkpoint cut as a non-atomic save killed mid-way leaves it
    run = start(command(config, out), work / "cut.log")
    while len(checkpoints(out)) < 2 and run.poll() is None:
        time.sleep(0.2)
    run.send_signal(signal.SIGKILL)
    run.wait()
    newest, before = checkpoints(out)[:2]
    weights = newest / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    log = work / "cut-resume.log"
    rc = finish(command(config, out, resume=True), log)
    named = f"skipping incomplete checkpoint {newest}" in log.read_text()
    dw = max_dw(reference, out) if rc == 0 else float("nan")
    cut_ok = rc == 0 and named and resumed_from(log) == before.name and dw <= TOL
    cut_line = f"cut {newest.name}: named {named}, resumed from {resumed_from(log)}, rc {rc}, |dw| {dw:.2g}"
    print(cut_line, flush=True)

    out, at = work / "sigterm", rng.uniform(0.3 * wall, 0.8 * wall)  # 3. SIGTERM
    run = start(command(config, out), work / "sigterm.log")
    time.sleep(at)
    run.send_signal(signal.SIGTERM)
    status = run.wait()
    stopped = re.search(r"stopped by SIGTERM after step (\d+)", (work / "sigterm.log").read_text())
    step = int(stopped.group(1)) if stopped else None
    complete = step is not None and missing_parts(out / f"checkpoint-{step}") is None
    log = work / "sigterm-resume.log"
    rc = finish(command(config, out, resume=True), log)
    dw = max_dw(reference, out) if rc == 0 else float("nan")
    term_ok = status == REQUEUE_EXIT_CODE and complete and rc == 0 and dw <= TOL
    term_line = (
        f"SIGTERM at {at:.0f} s: status {status}, checkpoint-{step} complete {complete}, "
        f"resumed from {resumed_from(log)}, rc {rc}, |dw| {dw:.2g}"
    )
    print(term_line, flush=True)

    summary = (
        f"tiny SFT, {args.steps} steps, a checkpoint every {args.save_every} ({wall:.0f} s uninterrupted): "
        f"{ok}/{args.kills} SIGKILL+relaunch end rc 0 with |dw| <= {TOL:g}; cut newest checkpoint "
        f"{'ok' if cut_ok else 'FAILED'}; SIGTERM -> {REQUEUE_EXIT_CODE} + relaunch {'ok' if term_ok else 'FAILED'}"
    )
    record("preemption", summary, dry=args.no_record)
    print(f"logs and runs: {work}")
    return 0 if ok == args.kills and cut_ok and term_ok else 1


if __name__ == "__main__":
    sys.exit(main())
