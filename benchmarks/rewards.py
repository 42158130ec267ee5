"""Throughput of the reward library: PRS-B on 1,000 random trajectories of 50 turns.

Two measurements in one run: `prs_score(mode="B")` on already-parsed responses, and the end-to-end TRL count
reward (`get_reward("count")`) that also parses each 50-turn state-token completion. Usage:

    .venv/bin/python -m benchmarks.rewards [--trajectories 1000] [--turns 50] [--repeats 3] [--no-record]
"""

from __future__ import annotations

import argparse
import random
import time

from benchmarks.common import record
from proactive_rewards import get_reward, prs_score


def make_trajectories(n: int, turns: int, seed: int = 0) -> list[dict]:
    """Random count trajectories: one decision per second, ~20% non-silent turns, 1-5 targets."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        times = [float(k) for k in range(turns)]
        targets = sorted(rng.sample(range(turns), rng.randint(1, 5)))
        targets = [{"time": float(t), "text": str(k + 1), "window": None} for k, t in enumerate(targets)]
        texts = [f"</Response> {rng.randint(1, 5)}" if rng.random() < 0.2 else "</Silence>" for _ in times]
        completion = "".join(f"<t={t:.1f}s>{x}" for t, x in zip(times, texts))
        responses = [(t, x.split(" ", 1)[1]) for t, x in zip(times, texts) if x.startswith("</Response>")]
        out.append({"completion": completion, "responses": responses, "targets": targets})
    return out


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trajectories", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    args = parser.parse_args()

    data = make_trajectories(args.trajectories, args.turns)
    count = get_reward("count")
    completions = [d["completion"] for d in data]
    targets = [d["targets"] for d in data]

    prs_s = best_of(lambda: [prs_score(d["responses"], d["targets"], mode="B") for d in data], args.repeats)
    trl_s = best_of(lambda: count(completions, targets=targets), args.repeats)
    n = args.trajectories
    line = (
        f"PRS-B: {n / prs_s:,.0f} trajectories/s ({n} trajectories x {args.turns} turns in {prs_s:.3f} s, best of "
        f"{args.repeats}); end-to-end TRL count reward incl. parsing: {n / trl_s:,.0f} trajectories/s "
        f"({trl_s:.3f} s, {trl_s / prs_s:.2f}x the PRS-B time)"
    )
    values = {"prs_b_trajectories_per_s": round(n / prs_s), "trl_count_reward_over_prs_b": round(trl_s / prs_s, 2)}
    record("rewards: PRS-B throughput", line, dry=args.no_record, values=values)


if __name__ == "__main__":
    main()
