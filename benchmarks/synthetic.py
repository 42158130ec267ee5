"""Synthetic-world costs: generating 1,000 episodes, rendering, mp4 export, decoding.

1. Generation: 1,000 episodes in memory (125 per task kind x 8 kinds), median of `--repeats` runs.
2. Rendering: all frames of 40 episodes (5 per task) with `render_frames`, per frame.
3. Export: the same 40 episodes written as mp4 (`write_video`) and decoded back at 1 FPS (`iter_frames`),
   per frame, with the PSNR floor and mean of the round trip (acceptance 3).
4. MCQA environments: 100 per kind (4 kinds), images included.

    .venv/bin/python -m benchmarks.synthetic [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import record
from proactive_eval.episodes import TASKS, Episode
from proactive_eval.video import iter_frames, write_video
from proactive_rl.synthetic import generate_episodes, make_environments, render_frames
from proactive_rl.synthetic.environments import KINDS

SECTION = "Synthetic world"


def _psnr(a: np.ndarray, b: np.ndarray) -> float:
    mse = np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2)
    return float("inf") if mse == 0 else float(10 * np.log10(255.0**2 / mse))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        episodes = [e for task in TASKS for e in generate_episodes(task, 125, seed=0)]
        times.append(time.perf_counter() - start)
    assert len(episodes) == 1000
    gen = statistics.median(times)
    targets = sum(len(e.targets) for e in episodes)
    record(
        f"{SECTION}: generate 1,000 episodes",
        f"1,000 episodes (125 x 8 task kinds, {targets} targets, in memory, no frames): {gen:.3f} s median of "
        f"{args.repeats} = {1000 * gen / 1000:.2f} ms/episode",
    )

    sample = [e for task in TASKS for e in generate_episodes(task, 5, seed=1)]
    start = time.perf_counter()
    rendered = [render_frames(e) for e in sample]
    render_s = time.perf_counter() - start
    n_frames = sum(len(r) for r in rendered)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        for episode, frames in zip(sample, rendered):
            write_video(Path(tmp) / f"{episode.id}.mp4", (f for _, f in frames), fps=episode.fps)
        write_s = time.perf_counter() - start
        start = time.perf_counter()
        decoded = []
        for episode in sample:
            on_disk = Episode.from_dict({**episode.to_dict(), "video": f"{episode.id}.mp4"}, base_dir=Path(tmp))
            decoded.append(list(iter_frames(on_disk)))
        read_s = time.perf_counter() - start
    scores = [_psnr(a, b) for r, d in zip(rendered, decoded) for (_, a), (_, b) in zip(r, d)]
    aligned = all([t for t, _ in r] == [t for t, _ in d] for r, d in zip(rendered, decoded))
    record(
        f"{SECTION}: render, mp4 export and decode",
        f"{len(sample)} episodes, {n_frames} frames of 64 px: render {1000 * render_s / n_frames:.2f} ms/frame, "
        f"mp4 write {1000 * write_s / n_frames:.2f} ms/frame, decode at 1 FPS {1000 * read_s / n_frames:.2f} "
        f"ms/frame; round-trip PSNR floor {min(scores):.2f} dB, mean {np.mean(scores):.2f} dB; "
        f"timestamps aligned: {aligned}",
    )

    start = time.perf_counter()
    envs = [e for kind in KINDS for e in make_environments(kind, 100, seed=0)]
    env_s = time.perf_counter() - start
    n_images = sum(len(e.images) for e in envs)
    record(
        f"{SECTION}: MCQA environments",
        f"{len(envs)} environments (100 x {len(KINDS)} kinds, {n_images} images of 64 px): {env_s:.2f} s "
        f"= {1000 * env_s / len(envs):.1f} ms/environment",
    )


if __name__ == "__main__":
    main()
