"""Streaming engine vs naive re-prefill vs one full forward pass, each engine mechanism on and off (docs/spec.md §9).

For T frames, a tiny Qwen-VL model watches a recorded stream through `HFStreamingPolicy` under
`proactive_eval.streaming.run_episode` (one user turn with one frame per step, one greedy assistant turn of at most
`--new-tokens` tokens after each). A random model never says ``</Silence>``; the model here has a proactive head
(`tests/support/stand_in.py: proactive_stand_in`, fit to this stream's all-silent dialogue, with ``--respond``
of its turn starts moved to ``</Response>``): silent at most frames, as a trained proactive model is, and
responding at some (a response runs to the token cap). Costs:

- engine: the whole streaming run (tokenising, image processing, vision encoding, language-model calls), in five
  configurations: everything off (frame by frame: a chunk call and a decoding call per token, one vision call
  per frame), each mechanism alone (speculative silence K = 1 = live mode; vision encoded per block of 16 frames),
  speculation over 16-frame blocks, and all on (the default for recorded video). All five give the same tokens
  (checked here);
- full forward: image processing of all T frames and one forward pass over the final sequence -- the least any
  method that sees the same tokens can do;
- naive: at every decoding step, a full forward pass over the dialogue so far (every frame re-encoded). This is
  O(T^2); above `--naive-max-frames` it is *estimated*: the decoding steps of `--naive-samples` evenly spaced
  turns are timed and the per-turn cost is interpolated linearly over all T turns.

Goals at T = 256: the engine (all on) <= 1.2x the full forward, and >= 100x faster than naive.

Batched (``--episodes N``, `proactive_rl.streaming.batch`): N different recorded streams of T frames played three
ways, in interleaved repetitions (ABCABC..., the median of each reported): (a) one at a time (the engine above, all
on, episode after episode); (b) batched: all N in lockstep (`Batcher.map`, ``--batch-size``, default N; look-ahead
`BATCHED_LOOKAHEAD` = 4 frames per call, as the evaluators play a batch), the same tokens (checked); (c) the limit: image processing of all N x T frames and full forwards over the N final sequences,
right-padded into as few forwards as ``--limit-tokens`` padded tokens per forward allow (no attention mask: pads
after a sequence change none of its logits under causal attention, and no (S x S) mask is built). Reported: (b)
over (a) and over (c), and the peak KV-cache memory of (b) per row and token (linear in B and T: every row holds its
own tokens, no padding, no re-prefill). Goals for the tiny s model, N = 32: batched >= 4x faster than one at a time
at T = 16 and 64, <= 1.3x the limit at T = 64 and 256.

GRPO step (``--grpo``): one streaming GRPO step (4 windows x G = 8 rollouts of the tiny recipe's setting, the
proactive stand-in policy, learning rate 0 so every repetition rolls out the same policy) with rollouts one group
after another (``rollout_batch_size: 1``) and batched (``8``), interleaved repetitions, medians. Goal >= 2x.

    python -m benchmarks.streaming --frames 16 64 256
    python -m benchmarks.streaming --frames 16 64 256 --episodes 32 --skip-single --grpo
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from benchmarks.common import record
from proactive_eval.episodes import Episode
from proactive_eval.streaming import run_episode
from proactive_rl.chat import build_messages, encode_dialogue, generation_prompt_ids
from proactive_rl.evaluation.policy import BATCHED_LOOKAHEAD
from proactive_rl.models import build_tiny
from proactive_rl.models.families import family_of, mm_token_types
from proactive_rl.streaming import HFStreamingPolicy, SamplingParams
from proactive_rl.streaming.batch import Batcher
from tests.support.stand_in import proactive_stand_in

INSTRUCTION = "Count the red circles. Answer with the count."
GOAL_FULL, GOAL_NAIVE = 1.2, 100.0
GOAL_BATCHED_SPEEDUP, GOAL_BATCHED_LIMIT, GOAL_GRPO = 4.0, 1.3, 2.0
# name -> HFStreamingPolicy switches
CONFIGS = {
    "frame by frame": dict(speculate=False, lookahead=1),
    "speculative silence, K=1": dict(speculate=True, lookahead=1),
    "batched vision alone": dict(speculate=False, lookahead=16, encode_ahead=True),
    "speculation, K=16, per-frame vision": dict(speculate=True, lookahead=16, encode_ahead=False),
    "all on (K=16)": dict(speculate=True, lookahead=16, encode_ahead=True),
}
ENGINE = "all on (K=16)"


class PhaseTimer:
    """Wall time and call counts of the model's language-model forwards (forward hooks on its decoder) and vision
    encodings (its `get_image_features`, wrapped on the instance), the two calls the session makes of it."""

    def __init__(self, model):
        self.core = family_of(model).core
        self.seconds = {"language": 0.0, "vision": 0.0}
        self.calls = {"language": 0, "vision": 0}

    def _add(self, phase: str, start: float) -> None:
        self.seconds[phase] += time.perf_counter() - start
        self.calls[phase] += 1

    def __enter__(self):
        encode, starts = self.core.get_image_features, []

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return encode(*args, **kwargs)
            finally:
                self._add("vision", start)

        self.core.get_image_features = timed
        decoder = self.core.language_model
        self.hooks = [
            decoder.register_forward_pre_hook(lambda *_: starts.append(time.perf_counter())),
            decoder.register_forward_hook(lambda *_: self._add("language", starts.pop())),
        ]
        return self

    def __exit__(self, *exc):
        del self.core.get_image_features  # the class's method again
        for hook in self.hooks:
            hook.remove()


def stream(frames: list[np.ndarray]) -> tuple[Episode, list[tuple[float, np.ndarray]]]:
    """The recorded stream: one frame per second, the instruction in the first turn."""
    return Episode(id="bench", task="atomic", duration=float(len(frames)), instruction=INSTRUCTION), [
        (float(k), f) for k, f in enumerate(frames)
    ]


def proactive_model(arch: str, size: str, frames: list[np.ndarray], respond: float, more: list | None = None):
    """The tiny model with a proactive head fit to this stream's all-silent dialogue (and to those of the `more`
    streams: the `respond` share then holds over all of them; see the module docstring)."""
    model, processor = build_tiny(arch, size, seed=0)
    dialogues = []
    for stream_frames in [frames, *(more or [])]:
        episode, timed = stream(stream_frames)
        silent = ["</Silence>"] * len(stream_frames)
        dialogues.append(encode_dialogue(processor, build_messages(episode, timed, responses=silent)))
    return proactive_stand_in(model, processor, respond=respond, dialogues=dialogues), processor


def run_engine(model, processor, frames, new_tokens: int, **switches):
    """The streaming run; returns (seconds, final token ids, the session)."""
    policy = HFStreamingPolicy(
        model, processor, SamplingParams(max_new_tokens=new_tokens, defer_capped_stop=True), **switches
    )
    episode, timed = stream(frames)
    start = time.perf_counter()
    run_episode(policy, episode, frame_source=lambda e: timed)
    return time.perf_counter() - start, policy.session.token_ids(), policy.session


def turns_of(processor, ids: list[int]) -> list[tuple[int, int]]:
    """(prompt end, turn end) of every assistant turn in `ids`: after each assistant header, through its stop."""
    header, stop = generation_prompt_ids(processor), processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    turns, i = [], 0
    while True:
        i = next((k + len(header) for k in range(i, len(ids)) if ids[k : k + len(header)] == header), None)
        if i is None:
            return turns
        end = ids.index(stop, i) + 1
        turns.append((i, end))
        i = end


def forward(model, ids, pixel_values, grids):
    t = torch.tensor([ids])
    types = mm_token_types(t, model.config.image_token_id, model.config.video_token_id)
    with torch.no_grad():
        model(input_ids=t, pixel_values=pixel_values, image_grid_thw=grids, mm_token_type_ids=types, logits_to_keep=1)


def run_full(model, processor, frames, ids, repeats=3):
    """Best of `repeats` (the machine is shared: the minimum is the least disturbed run)."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        enc = processor.image_processor(images=frames, return_tensors="pt")
        forward(model, ids, enc["pixel_values"], enc["image_grid_thw"])
        best = min(best, time.perf_counter() - start)
    return best


def naive_turn(model, ids, pixel_values, grids, turn, k, patches_per_frame):
    """Time the re-prefill decoding of turn k: one full forward per decoding step (frames 0..k re-encoded)."""
    prompt_end, turn_end = turn
    pv = pixel_values[: (k + 1) * patches_per_frame]
    start = time.perf_counter()
    for end in range(prompt_end, turn_end):  # each decoded token needs the logits after ids[:end]
        forward(model, ids[:end], pv, grids[: k + 1])
    return time.perf_counter() - start


def run_naive(model, processor, frames, ids, turns, samples=None):
    """Total naive time, measured over every turn, or estimated from `samples` evenly spaced turns."""
    enc = processor.image_processor(images=frames, return_tensors="pt")
    pixel_values, grids = enc["pixel_values"], enc["image_grid_thw"]
    per_frame = int(grids[0].prod())
    measure = range(len(turns)) if samples is None else np.unique(np.linspace(0, len(turns) - 1, samples).round())
    measured = {int(k): naive_turn(model, ids, pixel_values, grids, turns[int(k)], int(k), per_frame) for k in measure}
    xs = sorted(measured)
    return float(np.interp(np.arange(len(turns)), xs, [measured[x] for x in xs]).sum())


def play_streams(model, processor, streams, new_tokens: int, batcher: Batcher | None = None, batch_size: int = 1):
    """Every stream through `HFStreamingPolicy` (all on): one after another, or in lockstep on `batcher`; returns
    (seconds, the final token ids of each)."""
    params = SamplingParams(max_new_tokens=new_tokens, defer_capped_stop=True)

    def one(k):
        if batcher is None:
            policy = HFStreamingPolicy(model, processor, params)
        else:  # as the evaluators play a batch
            policy = HFStreamingPolicy(model, processor, params, batcher=batcher, lookahead=BATCHED_LOOKAHEAD)
        episode, timed = stream(streams[k])
        episode.id = f"bench-{k}"
        run_episode(policy, episode, frame_source=lambda e: timed)
        return policy.session.token_ids()

    start = time.perf_counter()
    if batcher is None:
        ids = [one(k) for k in range(len(streams))]
    else:
        ids = batcher.map(range(len(streams)), one, batch_size)
    return time.perf_counter() - start, ids


def run_full_batched(model, processor, streams, ids, token_budget: int) -> tuple[float, int]:
    """The limit (c): image processing and full forwards over the final sequences, right-padded, as many rows per
    forward as `token_budget` padded tokens allow; returns (seconds, rows per forward)."""
    width = max(len(x) for x in ids)
    rows = max(1, min(len(ids), token_budget // width))
    start = time.perf_counter()
    for k in range(0, len(ids), rows):
        part, frames = ids[k : k + rows], [f for s in streams[k : k + rows] for f in s]
        enc = processor.image_processor(images=frames, return_tensors="pt")
        longest = max(len(x) for x in part)
        t = torch.tensor([x + [processor.tokenizer.pad_token_id] * (longest - len(x)) for x in part])
        types = mm_token_types(t, model.config.image_token_id, model.config.video_token_id)
        with torch.no_grad():
            model(
                input_ids=t,
                pixel_values=enc["pixel_values"],
                image_grid_thw=enc["image_grid_thw"],
                mm_token_type_ids=types,
                logits_to_keep=1,
            )
    return time.perf_counter() - start, rows


def batched_benchmark(args) -> None:
    """Batched evaluation of ``--episodes`` streams vs one at a time vs the full-forward limit (module docstring)."""
    for T in args.frames:
        rng = np.random.default_rng(T)
        streams = [
            [rng.integers(0, 255, size=(64, 64, 3), dtype=np.uint8) for _ in range(T)] for _ in range(args.episodes)
        ]
        model, processor = proactive_model(args.arch, args.size, streams[0], args.respond, streams[1:8])
        batch_size = args.batch_size or args.episodes
        play_streams(model, processor, [s[:4] for s in streams[:2]], args.new_tokens)  # warm-up
        play_streams(model, processor, [s[:4] for s in streams[:2]], args.new_tokens, Batcher(model, processor), 2)
        times = {"one at a time": [], "batched": [], "limit": []}
        reps = args.repeats if T <= 64 else max(1, args.repeats // 3)
        for _ in range(reps):  # interleaved: a machine load change hits all three alike
            seconds, ids = play_streams(model, processor, streams, args.new_tokens)
            times["one at a time"].append(seconds)
            batcher = Batcher(model, processor)
            seconds, batched_ids = play_streams(model, processor, streams, args.new_tokens, batcher, batch_size)
            times["batched"].append(seconds)
            if batched_ids != ids:
                raise RuntimeError("batched and one-at-a-time streaming decoded different tokens")
            seconds, rows = run_full_batched(model, processor, streams, ids, args.limit_tokens)
            times["limit"].append(seconds)
        med = {k: statistics.median(v) for k, v in times.items()}
        speedup, over_limit = med["one at a time"] / med["batched"], med["batched"] / med["limit"]
        goals = []
        if T in (16, 64):
            goals.append(
                f"goal >= {GOAL_BATCHED_SPEEDUP}x " + ("met" if speedup >= GOAL_BATCHED_SPEEDUP else "MISSED")
            )
        if T in (64, 256):
            goals.append(f"goal <= {GOAL_BATCHED_LIMIT}x " + ("met" if over_limit <= GOAL_BATCHED_LIMIT else "MISSED"))
        stats = batcher.stats
        tokens = sum(len(x) for x in ids)
        text = model.config.get_text_config(decoder=True)
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
        per_token = 2 * text.num_hidden_layers * text.num_key_value_heads * head_dim * 4
        silence = processor.tokenizer.convert_tokens_to_ids("</Silence>")
        responding = sum(x[a] != silence for x in ids for a, _ in turns_of(processor, x))
        line = (
            f"{args.arch}-{args.size}, N={args.episodes} streams x T={T} frames ({tokens} tokens in all, "
            f"{len(ids[0])} in the first; {responding} of {args.episodes * T} turns respond, proactive stand-in fit to "
            f"{min(8, args.episodes)} of the streams, --respond {args.respond}), batch {batch_size}, median of {reps} interleaved repetitions: one at a "
            f"time {med['one at a time']:.2f}s, batched {med['batched']:.2f}s = {speedup:.2f}x faster"
            f"{' (' + goals[0] + ')' if T in (16, 64) else ''}; limit (image processing + full forwards, {rows} "
            f"rows per forward at --limit-tokens {args.limit_tokens}) {med['limit']:.2f}s: batched = "
            f"{over_limit:.2f}x the limit{' (' + goals[-1] + ')' if T in (64, 256) else ''}, one at a time = "
            f"{med['one at a time'] / med['limit']:.2f}x. Batched: {stats.language_calls} language-model calls "
            f"({statistics.mean(stats.rows_per_call):.1f} rows each on average, {stats.language_s:.2f}s), "
            f"{stats.vision_calls} vision calls ({stats.vision_s:.2f}s), {stats.tokens} tokens fed (rejected drafts' "
            f"frames are fed again: {stats.tokens / tokens:.2f}x the final tokens); "
            f"peak KV cache {stats.peak_cache_used / 2**20:.1f} MiB in use ({stats.peak_cache_bytes / 2**20:.1f} MiB "
            f"allocated) = {stats.peak_cache_used / per_token:.0f} tokens held at once at {per_token} B/token (2 x "
            f"layers x KV heads x head dim x 4 B; the {args.episodes} final sequences hold {tokens}): linear in B and "
            f"T, no re-prefill. "
            f"Runs: " + "; ".join(f"{k} " + ", ".join(f"{x:.2f}" for x in v) + "s" for k, v in times.items())
        )
        record("batched streaming (docs/spec.md §9)", line, dry=args.no_record)


def grpo_benchmark(args) -> None:
    """A streaming GRPO step, rollouts one group after another vs batched (module docstring)."""
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer
    from proactive_rl.grpo.streaming.windows import build_windows
    from proactive_rl.synthetic import generate_episodes

    episodes = generate_episodes("accident", 4, 11, duration=[10, 14])
    windows = build_windows(episodes, lead_s=3.0, tail_s=2.0, max_window_s=6.0, prefix_s=3.0)[:4]
    model, processor = build_tiny(args.arch, args.size, seed=0)
    model = proactive_stand_in(model, processor, respond=0.2)
    trainers, rollout_s = {}, {}
    for name, batch_size in (("one group after another", 1), ("batched", 8)):
        config = StreamingGRPOConfig(
            output_dir=f"/tmp/bench-grpo-{batch_size}",
            per_device_train_batch_size=4 * 8,
            num_generations=8,
            max_steps=1,
            max_turn_tokens=4,
            temperature=0.8,
            learning_rate=0.0,
            report_to="none",
            use_cpu=True,
            save_strategy="no",
            logging_steps=1,
            seed=0,
            bf16=False,
            rollout_batch_size=batch_size,
        )
        trainer = StreamingGRPOTrainer(model=model, args=config, windows=windows, processing_class=processor)
        rollout_s[name] = []

        def timed(prompts, t, _f=trainer.rollout_func, _name=name):
            start = time.perf_counter()
            try:
                return _f(prompts, t)
            finally:
                rollout_s[_name].append(time.perf_counter() - start)

        trainer.rollout_func = timed
        trainers[name] = trainer
    step_s = {name: [] for name in trainers}
    for trainer in trainers.values():  # warm-up
        trainer.train()
    for name in rollout_s:
        rollout_s[name].clear()
    for _ in range(args.repeats):
        for name, trainer in trainers.items():
            start = time.perf_counter()
            trainer.train()
            step_s[name].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in step_s.items()}
    roll = {k: statistics.median(v) for k, v in rollout_s.items()}
    a, b = "one group after another", "batched"
    speedup = med[a] / med[b]
    line = (
        f"{args.arch}-{args.size}, 4 windows x G=8 (accident, windows <= 6 s with a 3 s prefix, <= 4 tokens a turn, "
        f"proactive stand-in policy), median of {args.repeats} interleaved steps: rollouts {a} {med[a]:.2f}s/step "
        f"(rollout {roll[a]:.2f}s), batched (rollout_batch_size 8) {med[b]:.2f}s/step (rollout {roll[b]:.2f}s) = "
        f"{speedup:.2f}x faster (goal >= {GOAL_GRPO}x " + ("met" if speedup >= GOAL_GRPO else "MISSED") + "); "
        f"rollouts alone {roll[a] / roll[b]:.2f}x. Steps: "
        + "; ".join(f"{k} " + ", ".join(f"{x:.2f}" for x in v) + "s" for k, v in step_s.items())
    )
    record("batched streaming: GRPO step (docs/spec.md §8, §9)", line, dry=args.no_record)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--arch", default="qwen2_5_vl", choices=["qwen2_5_vl", "qwen3_vl"])
    parser.add_argument("--size", default="s", choices=["xs", "s"])
    parser.add_argument("--new-tokens", type=int, default=8, help="cap on a turn's content tokens (+1 end-of-turn)")
    parser.add_argument("--respond", type=float, default=0.05, help="share of turn starts the stand-in answers")
    parser.add_argument("--naive-max-frames", type=int, default=64, help="measure naive fully up to this T")
    parser.add_argument("--naive-samples", type=int, default=8, help="turns timed to estimate naive above it")
    # one thread: the benchmark machines are shared, and oversubscribed intra-op threads make timings erratic
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    parser.add_argument("--episodes", type=int, default=0, help="N: also benchmark batched evaluation of N streams")
    parser.add_argument("--batch-size", type=int, default=0, help="episodes in lockstep (default: N)")
    parser.add_argument("--limit-tokens", type=int, default=65536, help="padded tokens per full forward of the limit")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repetitions (batched, GRPO; T=256: 1/3)")
    parser.add_argument("--grpo", action="store_true", help="also benchmark a GRPO step, rollouts batched vs not")
    parser.add_argument("--skip-single", action="store_true", help="skip the one-episode configurations")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.episodes:
        batched_benchmark(args)
    if args.grpo:
        grpo_benchmark(args)
    if args.skip_single:
        return

    rng = np.random.default_rng(0)
    all_frames = [rng.integers(0, 255, size=(64, 64, 3), dtype=np.uint8) for _ in range(max(args.frames))]
    for T in args.frames:
        frames = all_frames[:T]
        model, processor = proactive_model(args.arch, args.size, frames, args.respond)
        for switches in CONFIGS.values():  # warm-up (allocator, lazy imports)
            run_engine(model, processor, frames[:4], args.new_tokens, **switches)
        runs = {}
        for name, switches in CONFIGS.items():
            best = None
            for _ in range(2 if T <= 64 else 1):  # cheap enough to repeat: keep the less disturbed run
                with PhaseTimer(model) as phases:
                    seconds, ids, session = run_engine(model, processor, frames, args.new_tokens, **switches)
                if best is None or seconds < best[0]:
                    best = (seconds, ids, session, phases)
            runs[name] = best
        ids = runs[ENGINE][1]
        if any(run[1] != ids for run in runs.values()):
            raise RuntimeError("the engine configurations decoded different tokens; speculation must be exact")
        turns = turns_of(processor, ids)
        silence = processor.tokenizer.convert_tokens_to_ids("</Silence>")
        responding = sum(ids[start] != silence for start, _ in turns)
        full = run_full(model, processor, frames, ids)
        estimated = T > args.naive_max_frames
        naive = run_naive(model, processor, frames, ids, turns, args.naive_samples if estimated else None)
        kind = f"ESTIMATED from {args.naive_samples} timed turns" if estimated else "measured"

        engine, _, session, phases = runs[ENGINE]
        ratio = engine / full
        goal = f"goal <= {GOAL_FULL}x " + ("met" if ratio <= GOAL_FULL else f"MISSED by {ratio / GOAL_FULL - 1:.0%}")
        naive_goal = ""
        if T == 256:
            naive_goal = f" (goal >= {GOAL_NAIVE:.0f}x " + ("met)" if naive / engine >= GOAL_NAIVE else "MISSED)")
        parts = []
        for name, (seconds, *_, ph) in runs.items():
            parts.append(
                f"{name} {seconds:.2f}s = {seconds / full:.2f}x ({ph.calls['language']} LM + {ph.calls['vision']} "
                f"vision calls)"
            )
        lm_s, vis_s = phases.seconds["language"], phases.seconds["vision"]
        line = (
            f"{args.arch}-{args.size}, T={T} frames, {len(ids)} tokens, {responding} of {T} turns respond (proactive "
            f"stand-in, --respond {args.respond}, cap {args.new_tokens} tokens): engine {engine:.2f}s = {ratio:.2f}x one "
            f"full forward ({full:.2f}s), {goal}; naive re-prefill {naive:.1f}s ({kind}) = {naive / engine:.1f}x the "
            f"engine{naive_goal}. Per configuration (same tokens in all): {'; '.join(parts)}. Engine split: language "
            f"model (decoder) {lm_s:.2f}s, vision {vis_s:.2f}s, rest (tokenising, image processing, embedding and head, checking "
            f"drafts) "
            f"{engine - lm_s - vis_s:.2f}s; {session.n_drafts_kept} of {session.n_drafts} drafted frames kept"
        )
        values = {
            "frames": T,
            "engine_over_full_forward": round(ratio, 3),
            "naive_over_engine": round(naive / engine, 1),
        }
        record("streaming engine (docs/spec.md §9)", line, dry=args.no_record, values=values)


if __name__ == "__main__":
    main()
