"""Tiny-model costs: one training step on 8 frames, and dialogue encoding.

For each architecture and size: the median wall time of one optimizer step (forward, backward, AdamW) on
an 8-frame state-token dialogue, as a fraction of the one-second budget the issue sets. Then the rendering
cost that every SFT step and rollout pays: `proactive_rl.chat.encode_dialogue` vs the processor's own
full path (`apply_chat_template` + `processor(...)`) on a 60-frame episode, as a ratio.

    .venv/bin/python -m benchmarks.tiny_model [--steps 20] [--threads 1]

One torch thread by default: on a shared CPU, several OpenMP threads spin against other processes and
tiny kernels get many times slower (measured: 2 threads under load ~0.4 s/step vs ~0.05 s with 1).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from benchmarks.common import record
from proactive_eval.episodes import Episode
from proactive_rewards import Target
from proactive_rl import chat
from proactive_rl.models import build_tiny


def _episode(n_frames: int):
    rng = np.random.default_rng(0)
    frames = [(float(k), rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)) for k in range(n_frames)]
    targets = [Target(float(t), str(i + 1)) for i, t in enumerate(range(2, n_frames, 5))]
    episode = Episode(
        id="bench", task="atomic", duration=float(n_frames), instruction="Count the red circles.", targets=targets
    )
    return episode, frames


def _median_time(fn, steps: int, warmup: int = 3) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def train_step(arch: str, size: str, steps: int) -> None:
    model, processor = build_tiny(arch, size=size)
    model.train()
    episode, frames = _episode(8)
    enc = chat.encode_dialogue(processor, chat.build_messages(episode, frames))
    batch = {k: v if k in ("pixel_values", "image_grid_thw") else v.unsqueeze(0) for k, v in enc.items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

    def step():
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    seconds = _median_time(step, steps)
    n_params = sum(p.numel() for p in model.parameters())
    record(
        "Tiny model: one training step on 8 frames",
        f"{arch} {size} ({n_params / 1e6:.2f} M params, {batch['input_ids'].shape[1]} tokens, "
        f"{int(enc['image_grid_thw'].prod(-1).sum()) // 4} vision tokens): {seconds * 1e3:.1f} ms median of {steps} "
        f"steps (fwd+bwd+AdamW, torch threads {torch.get_num_threads()}) = {seconds:.3f} of the 1 s budget",
    )


def encode(arch: str, steps: int) -> None:
    _, processor = build_tiny(arch)
    episode, frames = _episode(60)
    messages = chat.build_messages(episode, frames)
    images = [f for _, f in frames]

    def reference():
        text = processor.apply_chat_template(messages, tokenize=False)
        return processor(text=[text], images=images, return_tensors="pt")

    fast = _median_time(lambda: chat.encode_dialogue(processor, messages), steps)
    slow = _median_time(reference, steps)
    record(
        "Dialogue encoding (60 frames, labels included)",
        f"{arch}: chat.encode_dialogue {fast * 1e3:.1f} ms vs processor full path {slow * 1e3:.1f} ms "
        f"(no labels) -> {slow / fast:.1f}x faster",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for arch in ("qwen2_5_vl", "qwen3_vl"):
        for size in ("xs", "s"):
            train_step(arch, size, args.steps)
    for arch in ("qwen2_5_vl", "qwen3_vl"):
        encode(arch, args.steps)


if __name__ == "__main__":
    main()
