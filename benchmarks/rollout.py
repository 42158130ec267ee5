"""Rollout cost: multi-turn streaming rollouts vs single-turn generation, batched vs one at a time.

The tiny GRPO recipe's setting: accident episodes of 10-14 s, windows of at most 6 steps with a 3 s ground-truth
prefix, G = 8 rollouts, at most 4 tokens per turn, sampling at T = 1 (docs/spec.md §8), on the tiny Qwen2.5-VL.

1. Streaming (`proactive_rl.grpo.streaming.rollout.rollout_window`: prefix prefilled once, forked into G rows, one frame turn
   appended and one assistant turn decoded per step) vs single-turn generation of the *same total number of
   tokens*: the same prompt and frames as one prompt (the rollout's prompt plus all its frame turns), then as many
   decoded tokens per row as the rollout's policy produced. Two single-turn baselines:
   - `model.generate(num_return_sequences=G)`, what TRL's single-turn GRPO runs (the prompt is prefilled per row);
   - the engine's own single turn (prefill once, `fork(G)`, decode): the limit of any multi-turn scheme.
   Goal: streaming ≤ 1.3 x `generate`.
2. Batched sessions (one session forked into G rows) vs G sessions of one row run one after the other.
3. Speculative silence (the window's frames encoded in one call, silent-turn drafts over blocks of frames, checked
   per row) vs appending and decoding every frame turn, per group, for the untrained tiny model (which never says
   ``</Silence>``: every draft is rejected) and for a proactive stand-in (`proactive_stand_in`: silent at most
   frames, as the SFT model the recipe starts from).

The result line ends with a cProfile breakdown of one streaming rollout (where the time goes).

    .venv/bin/python -m benchmarks.rollout [--windows 6] [--generations 8] [--quick] [--no-record]
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import pstats
import time

import torch

from benchmarks.common import record

SECTION = "Rollout"
GOAL = 1.30
# cProfile rows summed into the breakdown of a streaming rollout: label -> (file name, function name)
BREAKDOWN = {
    "model.eval()/train() around every forward": ("modeling_utils.py", "eval"),
    "processor call (one per window)": ("processing_utils.py", "__call__"),
    "token choice (sampling)": ("sampling.py", "choose_tokens"),
}


def model_rows(model) -> dict[str, tuple[str, str, int]]:
    """The breakdown rows of `model`'s own calls (file, function, first line): its vision encoder
    (`get_image_features`) and its language model's `forward`, named by the model's public API."""
    from proactive_rl.models.families import family_of

    core = family_of(model).core
    rows = {}
    for label, fn in (
        ("vision encoder (one call per window)", type(core).get_image_features),
        ("language-model calls", type(core.language_model).forward),
    ):
        code = inspect.unwrap(fn).__code__
        rows[label] = (code.co_filename, code.co_name, code.co_firstlineno)
    return rows


def setup(n_windows: int, seed: int = 0):
    """The tiny model (eval mode), and `n_windows` rollout windows of the tiny GRPO recipe with their frames."""
    from proactive_rl.data.frames import frames_of
    from proactive_rl.grpo.streaming.windows import build_windows
    from proactive_rl.models import build_tiny
    from proactive_rl.synthetic import generate_episodes

    model, processor = build_tiny("qwen2_5_vl", "xs", seed=seed)
    model.eval()
    episodes = generate_episodes("accident", n_windows, 11 + seed, duration=[10, 14])
    windows = build_windows(episodes, lead_s=3.0, tail_s=2.0, max_window_s=6.0, prefix_s=3.0)[:n_windows]
    frames = {w.episode.id: frames_of(w.episode) for w in windows}
    return model, processor, [(w, frames[w.episode.id]) for w in windows]


def params(seed: int, greedy: bool = False, max_turn_tokens: int = 4):
    from proactive_rl.streaming import SamplingParams

    return SamplingParams(max_new_tokens=max_turn_tokens, do_sample=not greedy, temperature=1.0, seed=seed)


def streaming(model, processor, window, frames, generations: int, sampling, speculate: bool = True):
    """G rollouts of one window from one forked session (what the GRPO trainer runs)."""
    from proactive_rl.grpo.streaming.rollout import rollout_window

    return rollout_window(model, processor, window, generations, sampling, frames=frames, speculate=speculate)


def proactive(model, processor):
    """A copy of `model` with a proactive head (silent at most frames; see `proactive_stand_in`)."""
    import copy

    from tests.support.stand_in import proactive_stand_in

    return proactive_stand_in(copy.deepcopy(model), processor)


def one_at_a_time(model, processor, window, frames, generations: int, sampling) -> list:
    """The same G rollouts as G sessions of one row, one after the other (seeds differ per rollout)."""
    from dataclasses import replace

    out = []
    for g in range(generations):
        seed = None if sampling.seed is None else sampling.seed + g
        out += streaming(model, processor, window, frames, 1, replace(sampling, seed=seed))
    return out


def single_turn_inputs(trajectories, processor) -> dict:
    """The single-turn twin of a rollout group: its prompt and every frame turn as one prompt, and the mean number
    of policy tokens per rollout as the length to decode. ``len(input_ids) + new_tokens`` equals a rollout's total
    length (give or take the rounding of the mean)."""
    first = trajectories[0]
    env = [t for t, policy in zip(first.completion_ids, first.env_mask) if not policy]
    vision = processor.image_processor(images=first.images, return_tensors="pt")
    new_tokens = round(sum(sum(t.env_mask) for t in trajectories) / len(trajectories))
    return {
        "input_ids": first.prompt_ids + env,
        "pixel_values": vision["pixel_values"],
        "image_grid_thw": vision["image_grid_thw"],
        "new_tokens": new_tokens,
    }


def engine_single_turn(model, processor, inputs: dict, generations: int, seed: int):
    """Prefill once, fork into G rows, decode ``new_tokens`` per row (no stop token)."""
    from proactive_rl.streaming import SamplingParams, StreamingSession

    session = StreamingSession(model, processor)
    session.append_tokens(inputs["input_ids"], inputs["pixel_values"], inputs["image_grid_thw"])
    session = session.fork(generations)
    # -1 is never sampled, so no row stops early: every row decodes `new_tokens` (the last one is forced)
    sampling = SamplingParams(max_new_tokens=inputs["new_tokens"] - 1, do_sample=True, seed=seed, stop_token_ids=[-1])
    return session.generate(sampling)


@torch.no_grad()
def hf_single_turn(model, processor, inputs: dict, generations: int, seed: int) -> torch.Tensor:
    """`model.generate` with ``num_return_sequences=G`` and exactly ``new_tokens`` new tokens (TRL's single turn)."""
    torch.manual_seed(seed)
    ids = torch.tensor([inputs["input_ids"]])
    n = inputs["new_tokens"]
    return model.generate(
        input_ids=ids,
        attention_mask=torch.ones_like(ids),
        mm_token_type_ids=(ids == model.config.image_token_id).long(),
        pixel_values=inputs["pixel_values"],
        image_grid_thw=inputs["image_grid_thw"],
        do_sample=True,
        num_return_sequences=generations,
        min_new_tokens=n,
        max_new_tokens=n,
        pad_token_id=processor.tokenizer.pad_token_id,
    )


def _clock(fn, *args) -> float:
    """Seconds `fn(*args)` takes."""
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def breakdown(fn, rows: dict) -> str:
    """Share of `fn`'s time spent in each `BREAKDOWN` entry and each of `rows` (cProfile cumulative times)."""
    profiler = cProfile.Profile()
    profiler.enable()
    fn()
    profiler.disable()
    stats = pstats.Stats(profiler).stats
    total = max(ct for (_, _, _), (_, _, _, ct, _) in stats.items())
    parts = []
    for label, (file, func, *line) in {**BREAKDOWN, **rows}.items():
        ct = sum(
            v[3]
            for (f, ln, name), v in stats.items()
            if f.endswith(file) and name == func and (not line or ln == line[0])
        )
        parts.append(f"{label} {100 * ct / total:.0f}%")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=6)
    parser.add_argument("--generations", type=int, default=8, help="G")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the windows (after one warm-up)")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: the CPU is shared)")
    parser.add_argument("--quick", action="store_true", help="make bench sizes")
    parser.add_argument("--no-record", action="store_true", help="print only; do not append to results.jsonl")
    args = parser.parse_args(argv)
    if args.quick:
        args.windows, args.rounds = min(args.windows, 3), 1
    torch.set_num_threads(args.threads)
    G = args.generations

    def emit(section: str, line: str) -> None:
        record(section, line, dry=args.no_record)

    model, processor, windows = setup(args.windows)
    groups = [streaming(model, processor, w, f, G, params(0)) for w, f in windows]  # warm-up, and the shapes
    inputs = [single_turn_inputs(g, processor) for g in groups]
    for x in inputs:
        engine_single_turn(model, processor, x, G, 0), hf_single_turn(model, processor, x, G, 0)
    stand_in = proactive(model, processor)
    for w, f in windows:  # warm-up of the other paths
        (
            streaming(model, processor, w, f, G, params(0), speculate=False),
            streaming(stand_in, processor, w, f, G, params(0)),
        )
    t = {"stream": 0.0, "engine": 0.0, "generate": 0.0, "one_by_one": 0.0, "off": 0.0, "pro_on": 0.0, "pro_off": 0.0}
    for r in range(args.rounds):
        for (w, f), x in zip(windows, inputs):
            t["stream"] += _clock(streaming, model, processor, w, f, G, params(r))
            t["off"] += _clock(streaming, model, processor, w, f, G, params(r), False)
            t["pro_on"] += _clock(streaming, stand_in, processor, w, f, G, params(r))
            t["pro_off"] += _clock(streaming, stand_in, processor, w, f, G, params(r), False)
            t["engine"] += _clock(engine_single_turn, model, processor, x, G, r)
            t["generate"] += _clock(hf_single_turn, model, processor, x, G, r)
            t["one_by_one"] += _clock(one_at_a_time, model, processor, w, f, G, params(r))
    turns = [
        t.strip()
        for w, f in windows
        for traj in streaming(stand_in, processor, w, f, G, params(0))
        for t in traj.texts
    ]
    silent = sum(t == "</Silence>" for t in turns) / len(turns)
    n = args.rounds * len(windows)
    ms = {k: 1e3 * v / n for k, v in t.items()}
    total = sum(len(g[0].prompt_ids) + len(g[0].completion_ids) for g in groups) / len(groups)
    policy = sum(x["new_tokens"] for x in inputs) / len(inputs)
    steps = sum(len(g[0].times) for g in groups) / len(groups)
    ratio = ms["stream"] / ms["generate"]
    w, f = windows[0]
    profile = breakdown(lambda: streaming(model, processor, w, f, G, params(0)), model_rows(model))
    if ratio <= GOAL:
        verdict = f"goal <= {GOAL:.2f}x met; where a streaming rollout spends its time (cProfile): {profile}"
    else:
        verdict = f"MISSES the {GOAL:.2f}x goal by {ratio - GOAL:.2f}x; cProfile of a streaming rollout: {profile}"
    emit(
        f"{SECTION}: streaming G={G} vs single-turn generation of the same tokens",
        f"{len(windows)} windows x {args.rounds} rounds, mean {steps:.1f} steps, {total:.0f} tokens per rollout of "
        f"which {policy:.0f} policy tokens: streaming {ms['stream']:.0f} ms/group vs model.generate(G) "
        f"{ms['generate']:.0f} ms = {ratio:.2f}x (overhead {100 * (ratio - 1):+.0f}%); engine single turn (prefill "
        f"once, fork, decode; the limit) {ms['engine']:.0f} ms = {ms['stream'] / ms['engine']:.2f}x; {verdict}",
    )
    emit(
        f"{SECTION}: speculative silence, G={G}, before and after",
        f"{len(windows)} windows x {args.rounds} rounds, time per group of {G} rollouts, every frame turn appended and "
        f"decoded (before) vs speculative silence over blocks of frames with one vision call per window (after): "
        f"untrained tiny model (every draft rejected) {ms['off']:.0f} -> {ms['stream']:.0f} ms "
        f"({ms['off'] / ms['stream']:.2f}x); proactive stand-in ({100 * silent:.0f}% of its turns "
        f"silent) {ms['pro_off']:.0f} -> {ms['pro_on']:.0f} ms ({ms['pro_off'] / ms['pro_on']:.2f}x)",
    )
    emit(
        f"{SECTION}: batched sessions vs one at a time",
        f"G={G} rollouts of a window: one session forked into {G} rows {ms['stream']:.0f} ms vs {G} one-row sessions "
        f"{ms['one_by_one']:.0f} ms -> batched {ms['one_by_one'] / ms['stream']:.1f}x faster",
    )


if __name__ == "__main__":
    main()
