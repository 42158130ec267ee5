"""Clean exits: back-to-back 2-process ``accelerate launch`` runs of the tiny recipes must all exit 0.

A successful run that exits non-zero fails the job step that ran it (SLURM, a pipeline) although its model and
evaluation are complete. This script launches, in turn, the three 2-process runs a user starts most: tiny SFT under
DDP (gloo), tiny streaming GRPO under DeepSpeed ZeRO-3 (CPU accelerator, gloo), and ``proactive-rl eval --watch
--once`` over a saved checkpoint; each launch must exit 0 and leave its output. It prints one line per launch and,
at the end, the count per kind, appended to results.jsonl.

    .venv/bin/python -m benchmarks.clean_exit [--launches 100] [--kinds sft,grpo,eval] [--cores DIR] [--no-record]

``--cores DIR`` lets a crashing rank write a core file (``ulimit -c unlimited``; each launch runs in its own folder)
and keeps the folder of every failed launch under DIR, to read with ``gdb python DIR/<launch>/core``. Not run by
``make bench`` (about half a minute per launch on an idle 2-core machine).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.common import record

SECTION = "clean exits: back-to-back 2-process launches"
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
KINDS = ("sft", "grpo", "eval")
SHORT = {"duration": [10, 10]}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def prepare(work: Path) -> dict[str, Path]:
    """The recipes the launches use, and (1 process) the checkpoint folder ``eval --watch --once`` scores."""
    grpo = yaml.safe_load((ROOT / "recipes/tiny/grpo_streaming.yaml").read_text())
    grpo.update(
        model_name_or_path="tiny:qwen2_5_vl:xs",
        dataset_mixture=[{"source": "synthetic", "task": "accident", "num_episodes": 2, "seed": 11, "knobs": SHORT}],
        per_device_train_batch_size=2,
        num_generations=2,
        max_steps=2,
        disable_tqdm=True,
    )
    grpo.pop("eval_callback")
    (work / "grpo.yaml").write_text(yaml.safe_dump(grpo))
    sft = yaml.safe_load((ROOT / "recipes/tiny/sft.yaml").read_text())
    prs = {"source": "synthetic", "task": "accident", "num_episodes": 3, "seed": 99, "knobs": SHORT}
    mcqa = {"type": "mcqa", "environments": [{"kind": "occlusion", "n": 3, "seed": 0}], "max_new_tokens": 4}
    sft.update(
        dataset_mixture=[{"source": "synthetic", "task": "accident", "num_episodes": 4, "seed": 1, "knobs": SHORT}],
        max_steps=1,
        save_steps=1,
        per_device_train_batch_size=2,
        output_dir=str(work / "checkpoints"),
        report_to="none",
        disable_tqdm=True,
        eval_callback={"evaluators": [{"type": "prs", "episodes": [prs], "max_new_tokens": 4}, mcqa]},
    )
    (work / "sft_eval.yaml").write_text(yaml.safe_dump(sft))
    if not (work / "checkpoints" / "checkpoint-1").is_dir():
        env = {**os.environ, "OMP_NUM_THREADS": "1"}
        cmd = [sys.executable, "-m", "proactive_rl.sft", "--config", str(work / "sft_eval.yaml")]
        proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"the checkpoint for eval --watch was not written:\n{proc.stderr[-3000:]}")
    return {"grpo": work / "grpo.yaml", "eval": work / "sft_eval.yaml", "checkpoints": work / "checkpoints"}


def command(kind: str, files: dict[str, Path], out: Path) -> tuple[list[str], dict[str, str], Path]:
    """``(argv, extra env, the file a complete run leaves)`` of one launch of `kind`."""
    launch = [str(BIN / "accelerate"), "launch", "--num_processes", "2", "--main_process_port", str(_free_port())]
    if kind == "sft":
        cmd = launch + ["--config_file", str(ROOT / "launch/ddp.yaml"), "-m", "proactive_rl.sft"]
        cmd += ["--config", str(ROOT / "recipes/tiny/sft.yaml"), "--max_steps", "2", "--logging_steps", "1"]
        cmd += ["--save_strategy", "no", "--disable_tqdm", "true", "--report_to", "none"]
        cmd += ["--per_device_train_batch_size", "2", "--output_dir", str(out)]
        return cmd, {}, out / "trainer_state.json"
    if kind == "grpo":
        cmd = launch + ["--config_file", str(ROOT / "launch/zero3.yaml"), "-m", "proactive_rl.cli", "train"]
        cmd += ["--config", str(files["grpo"]), "--output_dir", str(out)]
        cmd += ["--use_cpu", "false", "--ddp_backend", "gloo"]
        return cmd, {"DS_ACCELERATOR": "cpu"}, out / "trainer_state.json"
    cmd = launch + ["--config_file", str(ROOT / "launch/ddp.yaml"), "-m", "proactive_rl.cli", "eval"]
    cmd += ["--config", str(files["eval"]), "--watch", str(files["checkpoints"]), "--once", "--settle", "0"]
    cmd += ["--out", str(out)]
    return cmd, {}, out / "checkpoint-1" / "results.json"


def _allow_cores() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--launches", type=int, default=100, help="launches in all, the kinds taken in turn")
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, from {', '.join(KINDS)}")
    parser.add_argument("--cores", type=Path, default=None, help="keep failed launches (with core files) here")
    parser.add_argument("--work", type=Path, default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--timeout", type=int, default=1200, help="seconds one launch may take")
    parser.add_argument("--no-record", action="store_true", help="print only, do not append to results.jsonl")
    args = parser.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if unknown := set(kinds) - set(KINDS):
        raise SystemExit(f"--kinds: unknown {', '.join(sorted(unknown))}; expected from {', '.join(KINDS)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="clean_exit_"))
    work.mkdir(parents=True, exist_ok=True)
    files = prepare(work)
    env0 = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    counts = {k: [0, 0] for k in kinds}  # kind -> [launched, exited 0 with its output]
    failures: list[str] = []
    start = time.time()
    for i in range(args.launches):
        kind = kinds[i % len(kinds)]
        run_dir = work / f"{i:03d}-{kind}"
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir()
        cmd, env, done = command(kind, files, run_dir / "out")
        t0 = time.time()
        try:
            proc = subprocess.run(
                cmd,
                cwd=run_dir,
                env={**env0, **env},
                capture_output=True,
                text=True,
                timeout=args.timeout,
                preexec_fn=_allow_cores if args.cores else None,
            )
            rc, log = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as e:
            rc, log = "timeout", f"{e.stdout or ''}{e.stderr or ''}"
        ok = rc == 0 and done.is_file()
        counts[kind][0] += 1
        counts[kind][1] += ok
        wrote = "yes" if done.is_file() else "no"
        print(f"{i + 1:3d} {kind:4s} rc={rc} output={wrote} {time.time() - t0:.0f}s", flush=True)
        (run_dir / "launch.log").write_text(log)
        if not ok:
            tail = [line for line in log.splitlines() if line.strip()][-3:]
            failures.append(f"{i + 1} {kind}: rc {rc}, output {wrote}: {tail}")
            print("   " + failures[-1], flush=True)
            if args.cores:
                args.cores.mkdir(parents=True, exist_ok=True)
                shutil.move(str(run_dir), str(args.cores / run_dir.name))
                continue
        shutil.rmtree(run_dir / "out", ignore_errors=True)
    total = sum(c[0] for c in counts.values())
    passed = sum(c[1] for c in counts.values())
    per_kind = ", ".join(f"{k} {c[1]}/{c[0]}" for k, c in counts.items())
    line = (
        f"{passed}/{total} 2-process launches exited 0 with their outputs ({per_kind}; {total - passed} non-zero "
        f"or incomplete), {time.time() - start:.0f} s in all"
    )
    if failures:
        line += "; failures: " + "; ".join(failures)
    record(SECTION, line, dry=args.no_record)
    if args.work is None and not failures:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if not failures else 1)


if __name__ == "__main__":
    main()
