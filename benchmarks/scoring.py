"""Scoring cost: PRS and PAUC over 10,000 episodes, and judge calls per second.

1. PRS (docs/spec.md §4): `proactive_eval.benchmarks.p3i.metric.score_prs` (all four variants: U/B x redundancy on/off) over random
   count episodes with random predictions, and the raw `proactive_rewards.prs_score(mode="B")` loop it is built on.
2. PAUC (docs/spec.md §5) with the rule judge (token-F1): `score_pauc` with a `RuleJudge` (every cumulative prediction goes
   through the judge prompt and back) and with `pauc_judge_fn(RuleJudge)` (``score_pair`` directly).
3. `OpenAIJudge` against the local fake server (`tests/support/fake_openai.py`, run in a subprocess so that it does not
   share the client's GIL) at concurrency 1, 8, 32: cache off, cache on and empty (every answer written to SQLite),
   cache on and full (a re-run), with an instant server and with a 50 ms server (what concurrency is for).

    .venv/bin/python -m benchmarks.scoring [--episodes 10000] [--prompts 256] [--quick] [--no-record]
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
from proactive_eval.episodes import Episode
from proactive_rewards import Target

SECTION = "Scoring"
ROOT = Path(__file__).resolve().parent.parent
WORDS = "red blue green circle square triangle moves appears left right stops falls the a big small".split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def random_episodes(n: int, kind: str = "prs", seed: int = 0) -> list[Episode]:
    """`n` random episodes of 20-60 s with 1-5 targets: count targets (``kind="prs"``) or PAUC targets with a
    reply span and a related span and a sentence as gold text (``kind="pauc"``)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        duration = float(rng.randint(20, 60))
        times = sorted(rng.sample(range(int(duration) - 5), rng.randint(1, 5)))
        if kind == "prs":
            targets = [Target(float(t), str(k + 1)) for k, t in enumerate(times)]
            task, extra = "atomic", {}
        else:
            targets = [
                Target(
                    float(t),
                    _sentence(rng, rng.randint(3, 8)),
                    window=(float(t), t + 4.0),
                    related=(float(t), t + 5.0),
                )
                for t in times
            ]
            task, extra = "pvqa", {"question": "What happens?"}
        out.append(
            Episode(
                id=f"{kind}{i:05d}", task=task, duration=duration, instruction="Watch.", targets=targets, meta=extra
            )
        )
    return out


def random_predictions(episodes: list[Episode], seed: int = 0) -> dict[str, list[tuple[float, str]]]:
    """About one response every 5 s per episode, at random times; count answers or sentences (model output: any
    text, including wrong answers, duplicates and empty strings)."""
    rng = random.Random(seed)
    preds = {}
    for e in episodes:
        times = sorted(rng.uniform(0, e.duration) for _ in range(rng.randint(0, int(e.duration) // 5)))
        if e.task == "pvqa":
            preds[e.id] = [(t, _sentence(rng, rng.randint(0, 8))) for t in times]
        else:
            preds[e.id] = [(t, str(rng.randint(1, 5))) for t in times]
    return preds


def _timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def bench_prs(n: int) -> dict:
    """`score_prs` (4 variants) and a bare `prs_score` mode-B loop over the same `n` episodes."""
    from proactive_eval.benchmarks.p3i.metric import score_prs
    from proactive_rewards import prs_score

    episodes = random_episodes(n, "prs")
    preds = random_predictions(episodes)
    report, t_eval = _timed(lambda: score_prs(episodes, preds))
    scores, t_loop = _timed(lambda: [prs_score(preds[e.id], e.targets, mode="B").score for e in episodes])
    prs_b = report.summary()["overall"]["prs_b"]
    return {"n": n, "eval_s": t_eval, "loop_s": t_loop, "prs_b": prs_b, "loop_prs_b": 100 * sum(scores) / len(scores)}


def bench_pauc(n: int) -> dict:
    """`score_pauc` with the rule judge, through the prompt and through ``score_pair``."""
    from proactive_eval.benchmarks.pvqa.metric import score_pauc
    from proactive_eval.judges import RuleJudge, pauc_judge_fn

    episodes = random_episodes(n, "pauc")
    preds = random_predictions(episodes)
    via_prompt, t_prompt = _timed(lambda: score_pauc(episodes, preds, RuleJudge("token_f1"), progress=False))
    direct, t_direct = _timed(
        lambda: score_pauc(episodes, preds, pauc_judge_fn(RuleJudge("token_f1")), progress=False)
    )
    return {
        "n": n,
        "turns": len(via_prompt.turns),
        "calls": via_prompt.judge_calls,
        "prompt_s": t_prompt,
        "direct_s": t_direct,
        "pauc": via_prompt.summary()["overall"]["omega=0.5"],
        "pauc_direct": direct.summary()["overall"]["omega=0.5"],
    }


_SERVER = """
import sys, time
from http.server import ThreadingHTTPServer
# the stdlib default listen backlog (5) refuses bursts of connections: c=32 would measure SYN retries
ThreadingHTTPServer.request_queue_size = 128
from tests.support.fake_openai import FakeOpenAI
latency = float(sys.argv[1])
fault = (lambda prompt, attempt: "timeout") if latency > 0 else None
with FakeOpenAI(answer=lambda messages: "3", fault=fault, sleep=latency) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()
"""


class FakeServer:
    """`tests.support.fake_openai.FakeOpenAI` in a child process; every answer is ``"3"`` after `latency` seconds."""

    def __init__(self, latency: float = 0.0):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER, str(latency)],
            cwd=ROOT,  # `-c` imports from its cwd: tests.support
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            self.close()
            raise RuntimeError("the fake OpenAI server did not start")

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=10)

    def __enter__(self) -> FakeServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def judge_rates(base_url: str, prompts: list[str], concurrency: int, cache_dir: str) -> dict:
    """Prompts per second: cache off, cache on (empty: every answer written), cache on (full: every answer read)."""
    from proactive_eval.judges import OpenAIJudge

    def run(cache_path):
        judge = OpenAIJudge(base_url, "fake", api_key="x", concurrency=concurrency, cache_path=cache_path)
        scores, seconds = _timed(lambda: judge.score_many(prompts, progress=False))
        if judge.cache is not None:
            judge.cache.close()
        if any(s != 3 for s in scores):
            raise RuntimeError(f"unexpected judge scores {set(scores)}")
        return len(prompts) / seconds, judge.stats.calls

    # warm-up on other prompts: imports, the first connections and the event loop are not what is measured
    OpenAIJudge(base_url, "fake", api_key="x", concurrency=concurrency).score_many(
        [f"warm-up {i}" for i in range(concurrency)], progress=False
    )
    cache = str(Path(cache_dir) / f"judge_c{concurrency}_{time.monotonic_ns()}.sqlite")
    off, calls_off = run(None)
    cold, calls_cold = run(cache)
    warm, calls_warm = run(cache)
    return {"off": off, "cold": cold, "warm": warm, "calls": (calls_off, calls_cold, calls_warm)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=10_000)
    parser.add_argument("--prompts", type=int, default=256, help="distinct judge prompts per measurement")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the slow fake server waits per call")
    parser.add_argument("--quick", action="store_true", help="make bench sizes: 10,000 episodes, 96 prompts")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    args = parser.parse_args(argv)
    if args.quick:
        args.prompts = min(args.prompts, 96)

    def emit(section: str, line: str) -> None:
        record(section, line, dry=args.no_record)

    r = bench_prs(args.episodes)
    emit(
        f"{SECTION}: PRS over {r['n']:,} episodes",
        f"score_prs (4 variants: U/B x penalty on/off) {r['n'] / r['eval_s']:,.0f} episodes/s ({r['eval_s']:.2f} s); "
        f"bare prs_score mode B loop {r['n'] / r['loop_s']:,.0f} episodes/s ({r['loop_s']:.2f} s); "
        f"PRS-B {r['prs_b']:.2f} (loop {r['loop_prs_b']:.2f})",
    )
    r = bench_pauc(args.episodes)
    emit(
        f"{SECTION}: PAUC over {r['n']:,} episodes, rule judge",
        f"score_pauc with RuleJudge(token_f1): {r['n'] / r['prompt_s']:,.0f} episodes/s ({r['prompt_s']:.2f} s, "
        f"{r['turns']:,} turns, {r['calls']:,} judge prompts = {r['calls'] / r['prompt_s']:,.0f} prompts/s); "
        f"via pauc_judge_fn (score_pair, no prompt round trip): {r['direct_s']:.2f} s "
        f"(speed-up {r['prompt_s'] / r['direct_s']:.2f}x: the prompt round trip costs little); "
        f"PAUC(w=0.5) {r['pauc']:.2f} = {r['pauc_direct']:.2f}",
    )
    prompts = [f"Question: q\nGround Truth Answer: gold {i}\nPredicted Answer: pred {i}" for i in range(args.prompts)]
    with tempfile.TemporaryDirectory() as tmp:
        for latency in (0.0, args.latency):
            with FakeServer(latency) as server:
                parts = []
                for c in args.concurrency:
                    r = judge_rates(server.base_url, prompts, c, tmp)
                    parts.append(
                        f"c={c}: {r['off']:,.0f} off / {r['cold']:,.0f} cache-empty / {r['warm']:,.0f} cache-full"
                    )
            ideal = (
                f", ideal c/latency = {' / '.join(f'{c / latency:,.0f}' for c in args.concurrency)}" if latency else ""
            )
            emit(
                f"{SECTION}: OpenAIJudge calls/s against the fake server ({1000 * latency:.0f} ms per call)",
                f"{args.prompts} distinct prompts, prompts/s at " + "; ".join(parts) + ideal,
            )


if __name__ == "__main__":
    main()
