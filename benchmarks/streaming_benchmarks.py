"""OVO-Bench forward probes: the streaming-native protocol against the official one, wall time, one run.

The tiny Qwen-VL model answers synthetic OVO-style forward records (REC / SSR / CRR from
`proactive_rl.synthetic.streaming_benchmarks`) whose probes are spaced ``--probe-every`` seconds apart over
``--duration``-second videos, as the official forward records probe densely: (a) official: every probe a fresh
offline call on the clip ``[0, probe)``, every frame encoded again; (b) streaming: one KV-cache pass per video,
forked at each probe. The two are interleaved (ABAB..., ``--repeats``), the median of each reported, and the answers
of both compared (they must be equal: the streaming prefix is the offline prompt's). Goal: streaming >= 5x faster.

    python -m benchmarks.streaming_benchmarks --videos 1 --duration 180 --probe-every 10 [--no-record]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import record
from proactive_eval.benchmarks.ovo_bench.format import load_ovo_bench
from proactive_eval.benchmarks.ovo_bench.run import ovo_video_groups, run_ovo_group
from proactive_rl.evaluation.stream_bench import ClipPrompter
from proactive_rl.models import build_tiny
from proactive_rl.synthetic.streaming_benchmarks import export_streaming_benchmarks


def dense_records(path: str, duration: float, every: float) -> None:
    """Re-probe every forward record of `path` every `every` seconds (types / counts kept consistent)."""
    records = json.loads(Path(path).read_text())
    for r in records:
        times = [every * k for k in range(1, int(duration / every) + 1)]
        if r["task"] == "REC":
            r["test_info"] = [{"realtime": t, "count": sum(s <= t for s in r["start_times"])} for t in times]
        elif r["task"] == "SSR":
            spans = list(zip(r["start_time"], r["end_time"]))
            r["test_info"] = [{"realtime": t, "step": r["all_steps"][0], "type": int(spans[0][0] <= t <= spans[0][1])}
                              for t in times]  # fmt: skip
        else:
            r["test_info"] = [{"realtime": t, "type": int(t >= r["clue_time"])} for t in times]
    Path(path).write_text(json.dumps(records))


def run(
    videos: int, duration: int, every: float, repeats: int, size: str, new_tokens: int, side: int, patches: int
) -> dict:
    torch.manual_seed(0)
    model, processor = build_tiny("qwen2_5_vl", size, seed=0)
    # frames of (patches / 2)^2 vision tokens, a real model's order (the tiny processor's default is 4 or 16)
    pixels = (patches * 14) ** 2
    processor.image_processor.size = {"shortest_edge": pixels, "longest_edge": pixels}
    with tempfile.TemporaryDirectory() as tmp:
        n = max(1, videos // 3 + (videos % 3 > 0))
        files = export_streaming_benchmarks(tmp, n=n, seed=0, duration=(duration, duration), size=side)
        dense_records(files["ovo_bench"], duration, every)
        bench = load_ovo_bench(files["ovo_bench"], video_root=Path(tmp) / "ovo_bench" / "src_videos")
        groups = ovo_video_groups(bench)[:videos]
        walls = {"official": [], "streaming": []}
        answers, speeds = {}, {}
        for _ in range(repeats):
            for protocol in ("official", "streaming"):
                prompter = ClipPrompter(model, processor, new_tokens)
                start = time.perf_counter()
                for group in groups:
                    run_ovo_group(prompter, group, protocol)
                prompter.speed.wall_s = time.perf_counter() - start
                walls[protocol].append(prompter.speed.wall_s)
                answers[protocol] = [[t.token_ids for t in prompter.turns]]
                speeds[protocol] = prompter.speed.summary()
    official, streaming = statistics.median(walls["official"]), statistics.median(walls["streaming"])
    return {
        "benchmark": "streaming_benchmarks",
        "videos": len(groups),
        "probes": sum(len(r["test_info"]) for g in groups for r in g["records"]),
        "duration_s": duration,
        "frame_side": side,
        "vision_tokens_per_frame": (patches // 2) ** 2,
        "official_wall_s": official,
        "streaming_wall_s": streaming,
        "ratio": official / streaming,
        "same_answers": answers["official"] == answers["streaming"],
        "speed": speeds,
        "model": f"tiny qwen2_5_vl {size}",
        "torch_threads": torch.get_num_threads(),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--videos", type=int, default=2, help="videos (forward records) played (default: 2)")
    parser.add_argument("--duration", type=int, default=30, help="video length in seconds (default: 30)")
    parser.add_argument("--probe-every", type=float, default=1.0, help="seconds between probes (default: 1)")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved repetitions, medians (default: 1)")
    parser.add_argument("--size", default="xs", help="tiny model size (default: xs)")
    parser.add_argument("--side", type=int, default=224, help="video frame side in pixels (default: 224)")
    parser.add_argument("--patches", type=int, default=16, help="frame side in patches (default: 16, 64 tokens)")
    parser.add_argument("--new-tokens", type=int, default=4, help="longest answer (default: 4)")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    args = parser.parse_args(argv)
    result = run(
        args.videos, args.duration, args.probe_every, args.repeats, args.size, args.new_tokens, args.side, args.patches
    )
    speed = result["speed"]
    line = (
        f"{result['videos']} video(s) of {result['duration_s']} s, {result['probes']} forward probes, "
        f"{result['vision_tokens_per_frame']} vision tokens per frame: official protocol {result['official_wall_s']:.1f} s "
        f"vs streaming-native {result['streaming_wall_s']:.1f} s = {result['ratio']:.1f}x faster; same answers: "
        f"{result['same_answers']}; frames/s {speed['official']['frames_per_s']:.2f} vs "
        f"{speed['streaming']['frames_per_s']:.2f}"
    )
    values = {k: result[k] for k in ("official_wall_s", "streaming_wall_s", "ratio", "same_answers", "probes")}
    record("OVO-Bench forward probes: streaming-native vs official protocol", line, dry=args.no_record, values=values)
    return 0 if result["same_answers"] else 1


if __name__ == "__main__":
    sys.exit(main())
