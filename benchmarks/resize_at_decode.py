"""Encoding one 30 s 640x360 episode with frames resized at decode time vs held at full size (docs/spec.md §2).

Both paths give the same ids and pixel_values (tests/rl/test_resize_at_decode.py, checked again here); this
measures, for three processor pixel ranges, the bytes of the decoded frames an episode holds, the growth of the
resident memory over one encoding in a fresh process (sampled every ms), and the encoding time (median of 5, the
two paths alternated). Torch runs on one thread, as in a DataLoader worker (where the lazy pipeline encodes).

    python -m benchmarks.resize_at_decode               # appends one record to results.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RANGES = {"tiny (3136..3136)": 3136, "capped (3136..100352)": 100352, "default (3136..1003520)": 1003520}


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_growth(fn) -> float:
    """MiB the resident memory grows above its level before `fn` (sampled every ms)."""
    base, peak, done = rss_mib(), [0.0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss_mib() - base)
            time.sleep(0.001)

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        fn()
    finally:
        done.set()
        thread.join()
    return max(peak[0], rss_mib() - base)


def setup(max_pixels: int, episodes: str):
    """The episode, the tiny processor with this pixel range, and the two paths ``{"before", "after"}``."""
    import torch

    from proactive_eval.episodes import load_episodes
    from proactive_rl.chat import build_messages, encode_dialogue
    from proactive_rl.data.frames import frames_of
    from proactive_rl.data.lazy import EpisodeEncoder
    from proactive_rl.models import build_tiny

    torch.set_num_threads(1)  # what torch's DataLoader worker loop sets
    episode = load_episodes(episodes)[0]
    processor = build_tiny("qwen2_5_vl", "xs")[1]
    processor.image_processor.size = {"shortest_edge": 3136, "longest_edge": max_pixels}

    def before():
        messages = build_messages(episode, frames_of(episode))
        return encode_dialogue(processor, messages, None, episode_id=episode.id)

    return episode, processor, {"before": before, "after": lambda: EpisodeEncoder(processor, None)(episode)}


def child(max_pixels: int, episodes: str, path: str) -> None:
    """One fresh process: the resident-memory growth of the first encoding by `path`."""
    _, _, paths = setup(max_pixels, episodes)
    print(json.dumps({"growth": peak_growth(paths[path])}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    parser.add_argument("--child", nargs=3, metavar=("MAX_PIXELS", "EPISODES", "PATH"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(int(args.child[0]), args.child[1], args.child[2])
    import torch

    from benchmarks.common import record
    from benchmarks.data_scale import make_videos, write_episodes
    from proactive_rl.data.frames import frame_resizer, frames_of, processor_frame_size

    folder = Path(tempfile.mkdtemp(prefix="resize_at_decode_"))
    episodes = str(write_episodes(folder, 1, make_videos(folder, 1)))
    parts = []
    for name, max_pixels in RANGES.items():
        growth = {}
        for key in ("before", "after"):
            command = [sys.executable, "-m", "benchmarks.resize_at_decode", "--child", str(max_pixels), episodes, key]
            out = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT).stdout
            growth[key] = json.loads(out.strip().splitlines()[-1])["growth"]
        episode, processor, paths = setup(max_pixels, episodes)
        held = {
            "before": sum(f.nbytes for _, f in frames_of(episode)) / 2**20,
            "after": sum(f.nbytes for _, f in frames_of(episode, frame_resizer(processor))) / 2**20,
        }
        out = {key: fn() for key, fn in paths.items()}  # also the warm-up
        assert torch.equal(out["before"]["input_ids"], out["after"]["input_ids"])
        diff = (out["before"]["pixel_values"] - out["after"]["pixel_values"]).abs().max().item()
        seconds = {"before": [], "after": []}
        for _ in range(5):
            for key, fn in paths.items():
                start = time.perf_counter()
                fn()
                seconds[key].append(time.perf_counter() - start)
        t = {k: statistics.median(v) for k, v in seconds.items()}
        h, w = processor_frame_size(processor, 360, 640)
        parts.append(
            f"{name}, frames {w}x{h}: frames held {held['before']:.1f} -> {held['after']:.1f} MiB, RSS growth over "
            f"one encoding (fresh process) {growth['before']:.1f} -> {growth['after']:.1f} MiB, encode "
            f"{t['before']:.2f} -> {t['after']:.2f} s, max|pixel_values diff| {diff:.1g}"
        )
    line = "one 30 s 640x360 1 FPS episode (30 frames, torch on 1 thread as in a DataLoader worker), full-size frames"
    line += " -> resized at decode: " + "; ".join(parts)
    record("resize at decode", line, dry=args.no_record)


if __name__ == "__main__":
    main()
