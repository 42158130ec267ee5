"""Data at scale: peak RSS and time to first step of tiny SFT as the corpus grows, lazy vs eager data path.

Generates (in a temp folder, never committed) N episodes of 30 s at 640x360 and 1 FPS, and runs 10 steps of the
tiny SFT recipe on them in a fresh subprocess per configuration, which reports its peak RSS (``ru_maxrss``) and the
seconds from its start to the first optimizer step:

- lazy (``data_pipeline: lazy``, the default): N = 100 and N = 2,000, measured anew; N = 2,000 again from the
  measurement cache (a resume or a second rank);
- eager (the previous path: every episode decoded and encoded in memory before step 1) at the sizes it can hold.

Every record has its own mp4 file (2,000 files of ~17 KB, ~0.2 s each to write); ``--videos K`` makes the records
cycle over K files instead, for a quicker run (each record is still probed, decoded and encoded on its own). The tiny Qwen2.5-VL processor keeps the recipe's pixel clamp (every frame resized to 56x56, 4
vision tokens), so the eager path's memory per clip is ~2 MiB of pixels instead of the 155 MiB of a full-size
processor: its growth with N is the point, not its level.

    python -m benchmarks.data_scale                  # N = 100, 2000 (lazy); 100, 400 (eager); appends to results.jsonl
    python -m benchmarks.data_scale --no-record --sizes 20 100 --eager-sizes 20
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START = time.time()
ROOT = Path(__file__).resolve().parents[1]


def make_videos(folder: Path, count: int, seconds: int = 30, size=(360, 640)) -> list[str]:
    """`count` mp4 files of `seconds` frames at 1 FPS: a moving block over a gradient (each file different)."""
    import numpy as np
    from tqdm.auto import tqdm

    from proactive_eval.video import write_video

    (folder / "videos").mkdir(parents=True, exist_ok=True)
    h, w = size
    names = []
    for v in tqdm(range(count), desc="writing videos", unit="video"):
        frames = []
        for k in range(seconds):
            frame = np.zeros((h, w, 3), dtype=np.uint8)
            frame[..., 0] = np.linspace(0, 255, w, dtype=np.uint8)[None, :]
            frame[..., 1] = (v * 37) % 256
            x = (k * 20 + v * 7) % (w - 80)
            frame[100:180, x : x + 80] = (255, 255, 255)
            frames.append(frame)
        name = f"videos/v{v:05d}.mp4"
        write_video(folder / name, frames, fps=1.0, keyframe_interval=10)
        names.append(name)
    return names


def write_episodes(folder: Path, n: int, videos: list[str]) -> Path:
    records = [
        {
            "id": f"ep{i:05d}",
            "task": "atomic",
            "video": videos[i % len(videos)],
            "duration": 30.0,
            "fps": 1.0,
            "instruction": "Tell me when the white block reaches the right half.",
            "targets": [{"time": float(10 + i % 15), "text": "now"}],
        }
        for i in range(n)
    ]
    path = folder / f"episodes_{n}.json"
    path.write_text(json.dumps(records))
    return path


def worker(episodes: str, pipeline: str, steps: int, cache: str, out: str) -> None:
    """One run: tiny SFT on `episodes` for `steps` steps; prints a JSON line with peak RSS and time to first step."""
    import resource

    import yaml
    from transformers import TrainerCallback

    from proactive_rl.sft.main import build_trainer, make_parser

    first = {}

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            first.setdefault("t", time.time() - START)

    recipe = yaml.safe_load((ROOT / "recipes/tiny/sft.yaml").read_text())
    recipe.update(dataset_mixture=[episodes], data_pipeline=pipeline, data_cache_dir=cache, output_dir=out)
    recipe.update(max_steps=steps, save_strategy="no", logging_steps=steps, disable_tqdm=True)
    config = Path(out) / "recipe.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(yaml.safe_dump(recipe))
    trainer = build_trainer(*make_parser().parse_args_and_config(["--config", str(config)]))
    trainer.add_callback(Timer())
    trainer.train()
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps({"peak_mib": peak_mib, "first_step_s": first["t"], "total_s": time.time() - START}))


def run(episodes: Path, pipeline: str, steps: int, cache: Path, out: Path) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.data_scale",
        "--worker",
        str(episodes),
        pipeline,
        str(steps),
        str(cache),
        str(out),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{pipeline} on {episodes.name} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1][len("RESULT ") :])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(*sys.argv[2:4], int(sys.argv[4]), *sys.argv[5:7])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs=2, default=[100, 2000], help="small and large N (lazy path)")
    parser.add_argument("--eager-sizes", type=int, nargs="*", default=[100, 400], help="N for the previous path")
    parser.add_argument("--videos", type=int, default=None, help="distinct mp4 files (default: one per record)")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    args = parser.parse_args()
    from benchmarks.common import record

    small, large = args.sizes
    with tempfile.TemporaryDirectory(prefix="data_scale_") as tmp:
        tmp = Path(tmp)
        t0 = time.time()
        args.videos = args.videos or max(small, large, *args.eager_sizes)
        videos = make_videos(tmp, args.videos)
        print(f"wrote {len(videos)} videos of 30 s at 640x360 in {time.time() - t0:.1f} s")
        files = {n: write_episodes(tmp, n, videos) for n in sorted({small, large, *args.eager_sizes})}
        # warm the page cache (imports, videos) so the first configuration does not pay for a cold start
        run(files[small], "lazy", 1, tmp / "cache_warmup", tmp / "out_warmup")
        results = {}
        for name, n, pipeline, cache in [
            ("lazy", small, "lazy", "cache_small"),
            ("lazy", large, "lazy", "cache_large"),
            ("lazy, cached", large, "lazy", "cache_large"),
            *[("eager", n, "eager", "cache_eager") for n in args.eager_sizes],
        ]:
            results[name, n] = r = run(files[n], pipeline, args.steps, tmp / cache, tmp / f"out_{name}_{n}")
            print(
                f"{name:13s} N={n:5d}: peak RSS {r['peak_mib']:7.0f} MiB, first step after {r['first_step_s']:6.1f} s"
            )
    lazy_s, lazy_l = results["lazy", small], results["lazy", large]
    growth = lazy_l["peak_mib"] / lazy_s["peak_mib"] - 1
    time_ratio = lazy_l["first_step_s"] / lazy_s["first_step_s"]
    eager = "; ".join(
        f"eager (previous path) N={n}: peak {results['eager', n]['peak_mib']:.0f} MiB, "
        f"first step {results['eager', n]['first_step_s']:.1f} s"
        for n in args.eager_sizes
    )
    line = (
        f"tiny SFT, {args.steps} steps, 30 s 640x360 1 FPS episodes ({args.videos} distinct mp4 files; "
        f"recipe's processor clamp, 56x56 per frame): lazy N={small}: peak {lazy_s['peak_mib']:.0f} MiB, first "
        f"step {lazy_s['first_step_s']:.1f} s; lazy N={large}: peak {lazy_l['peak_mib']:.0f} MiB "
        f"({growth:+.1%}, goal < +10% {'met' if growth < 0.10 else 'MISSED'}), first step "
        f"{lazy_l['first_step_s']:.1f} s ({time_ratio:.2f}x for {large / small:.0f}x the episodes, sub-linear: "
        f"{time_ratio < large / small}); lazy N={large} from the measurement cache: first step "
        f"{results['lazy, cached', large]['first_step_s']:.1f} s; {eager}. 2 cores, "
        "possibly shared: times are noisy, RSS is not"
    )
    record("data at scale: lazy vs eager SFT data path", line, dry=args.no_record)


if __name__ == "__main__":
    main()
