"""Qwen2.5-VL-3B on one GPU: SFT tokens/s and model FLOPs utilisation, per-frame streaming latency.

Made to run in a 10-minute window on a machine without network: everything that needs no GPU (config, processor,
synthetic dialogues, frames, the padded batch) is prepared first; then the model is built *on the GPU* in bf16 from
the Qwen2.5-VL-3B-Instruct configuration with random weights (``--model PATH`` loads a local checkpoint instead),
and two measurements run:

1. SFT: the `ProactiveSFTTrainer` loss path (forward with ``logits_to_keep`` on the supervised positions, the docs/spec.md §3
   focal loss, backward, fused AdamW; vision tower frozen, merger and language model trained, as in P³I) on a batch
   of synthetic state-token dialogues. Tokens/s counts every input token (text and vision) of the batch. MFU uses
   the usual training-FLOPs estimate (PaLM appendix B), causal attention::

       language model  6·N_lm·T + 6·L·d·Σ_rows T_row²  + 6·V·d·K   (N_lm without embeddings, K supervised positions)
       vision tower    2·N_vision·P (forward only: frozen)          (P patches; windowed attention left out)

   divided by the step time and the GPU's dense bf16 peak (``--peak-tflops``; known for H100/H200/A100).
2. Streaming (docs/spec.md §9), with the output head made proactive (`proactive_stand_in` fit to the stream's all-silent
   dialogue, ``--respond`` of its turn starts answered: random weights never say ``</Silence>``): live, the latency of
   a frame (append + assistant turn of at most ``--turn-tokens`` tokens) frame by frame and with speculative silence
   (K = 1; same tokens, checked); recorded, the engine's time over the whole stream (frame by frame, K = 1, K = 16 with
   one vision call per block) over one full forward pass of the final sequence (image processing included).
3. Batched streaming (`proactive_rl.streaming.batch`): ``--streams`` recorded streams of ``--batched-frames``
   frames played one at a time, then all in lockstep (one vision call and one packed language-model call per round;
   same tokens, checked), against the limit: full forwards over the final sequences, right-padded, as many rows per
   forward as ``--limit-tokens`` allow; with the peak KV-cache memory of the batch and the GPU's peak allocation.

Prints one JSON object (and writes it to ``$OUT/qwen2_5_vl_3b.json`` when ``$OUT`` is set). ``--dry-run`` runs the
same code on the CPU with the tiny model and tiny sizes (a test does this)::

    python -m benchmarks.gpu.qwen2_5_vl_3b [--model PATH] [--batch 2] [--seconds 60] [--frames 128] [--dry-run]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]

# Qwen2.5-VL-3B-Instruct's config.json (vocabulary and special-token ids are taken from the processor in use).
TEXT_3B = dict(
    hidden_size=2048,
    intermediate_size=11008,
    num_hidden_layers=36,
    num_attention_heads=16,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=128000,
    rms_norm_eps=1e-6,
    rope_parameters={"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]},
)
VISION_3B = dict(
    depth=32,
    hidden_act="silu",
    hidden_size=1280,
    intermediate_size=3420,
    num_heads=16,
    out_hidden_size=2048,
    patch_size=14,
    spatial_merge_size=2,
    temporal_patch_size=2,
    window_size=112,
    fullatt_block_indexes=[7, 15, 23, 31],
    tokens_per_second=2,
)
# dense bf16 peak, TFLOP/s (no sparsity)
PEAK_TFLOPS = {"H200": 989.4, "H100": 989.4, "A100": 312.0, "L40S": 362.0, "A10": 125.0}


# ------------------------------------------------------------------------------------------------ preparation (CPU)
def prepare_processor(model_path: str | None, frame_side: int):
    """The processor: the checkpoint's, or the embedded tiny tokenizer with a Qwen2.5-VL image processor resized to
    ``frame_side x frame_side`` patches per frame (``frame_side² / 4`` vision tokens)."""
    if model_path:
        from transformers import AutoProcessor

        processor = AutoProcessor.from_pretrained(model_path)
    else:
        from proactive_rl.models import build_tiny

        _, processor = build_tiny("qwen2_5_vl", "xs")
    pixels = (frame_side * 14) ** 2
    processor.image_processor.size = {"shortest_edge": pixels, "longest_edge": pixels}
    return processor


def config_3b(processor, tiny: bool = False):
    """The Qwen2.5-VL-3B config with the processor's special-token ids (``tiny``: the xs tiny model's config)."""
    from transformers import Qwen2_5_VLConfig

    tok = processor.tokenizer
    ids = {
        t: tok.convert_tokens_to_ids(t)
        for t in ("<|image_pad|>", "<|video_pad|>", "<|vision_start|>", "<|vision_end|>")
    }
    if tiny:
        from proactive_rl.models import build_tiny

        model, _ = build_tiny("qwen2_5_vl", "xs")
        return model.config
    text = {**TEXT_3B, "vocab_size": max(TEXT_3B["vocab_size"], -(-len(tok) // 64) * 64)}
    text.update(pad_token_id=tok.pad_token_id, eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
    return Qwen2_5_VLConfig(
        text_config=text,
        vision_config=VISION_3B,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        tie_word_embeddings=True,
    )


def prepare_batch(processor, batch: int, seconds: int, seed: int = 0) -> dict:
    """A padded SFT batch of `batch` synthetic state-token dialogues of `seconds` frames each (1 FPS)."""
    from proactive_rl.chat import build_messages, encode_dialogue
    from proactive_rl.data import EpisodeCollator
    from proactive_rl.synthetic import generate_episodes, render_frames

    episodes = generate_episodes("atomic", batch, seed, duration=[seconds, seconds])
    examples = [encode_dialogue(processor, build_messages(e, render_frames(e))) for e in episodes]
    return EpisodeCollator(examples, processor.tokenizer.pad_token_id)([{"index": i} for i in range(batch)])


def prepare_stream(processor, frames: int, seed: int = 1) -> list[tuple[str, np.ndarray]]:
    """The streaming session's chunks: system + first user turn, then one user turn per frame (texts via the
    processor's chat template, as the GRPO rollouts render them)."""
    from proactive_rl.grpo.streaming.rollout import dialogue_text
    from proactive_rl.synthetic import generate_episodes, render_frames

    episode = generate_episodes("atomic", 1, seed, duration=[max(frames, 10), max(frames, 10)])[0]
    texts = dialogue_text(processor)
    chunks = []
    for k, (t, frame) in enumerate(render_frames(episode)[:frames]):
        head = texts.system() if k == 0 else texts.after_stop
        chunks.append((head + texts.user(t, 1, episode.instruction if k == 0 else None, "") + texts.header, frame))
    return chunks


# ------------------------------------------------------------------------------------------------------ the model
def build_model(config, model_path: str | None, device: torch.device, dtype: torch.dtype):
    """Random weights from `config` built directly on `device` (no CPU copy), or a local checkpoint."""
    from transformers import Qwen2_5_VLForConditionalGeneration

    if model_path:
        model = Qwen2_5_VLForConditionalGeneration.from_pretrained(model_path, dtype=dtype, attn_implementation="sdpa")
        model = model.to(device)
    else:
        config._attn_implementation = "sdpa"
        with torch.device(device):
            model = Qwen2_5_VLForConditionalGeneration._from_config(config, dtype=dtype)
    return model


def count_params(model) -> dict[str, int]:
    core = model.model
    lm = core.language_model
    return {
        "total": sum(p.numel() for p in model.parameters()),
        "lm_no_embed": sum(p.numel() for n, p in lm.named_parameters() if "embed_tokens" not in n),
        "vision": sum(p.numel() for p in core.visual.parameters()),
    }


def train_flops(model, batch: dict, kept: int) -> float:
    """Training FLOPs of one step (see the module docstring)."""
    cfg = model.config.text_config
    n = count_params(model)
    lengths = batch["attention_mask"].sum(-1).double()
    tokens = float(lengths.sum())
    patches = float(batch["image_grid_thw"].prod(-1).sum())
    lm = 6 * n["lm_no_embed"] * tokens + 6 * cfg.num_hidden_layers * cfg.hidden_size * float((lengths**2).sum())
    head = 6 * cfg.vocab_size * cfg.hidden_size * kept
    vision = 2 * n["vision"] * patches
    return lm + head + vision


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def bench_sft(model, processor, batch: dict, device, steps: int, warmup: int) -> dict:
    from proactive_rl.sft.loss import focal_state_loss, state_token_counts
    from proactive_rl.sft.main import state_token_ids
    from proactive_rl.training import freeze_vision_tower

    freeze_vision_tower(model)
    model.train()
    ids = state_token_ids(processor)
    batch = {k: v.to(device) for k, v in batch.items()}
    shift = batch.pop("labels")[:, 1:]
    keep = (shift != -100).any(0).nonzero().squeeze(-1)
    target = shift[:, keep]
    counts = state_token_counts(target, ids)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5, fused=device.type == "cuda")
    times = []
    for k in range(warmup + steps):
        sync(device)
        start = time.perf_counter()
        logits = model(**batch, use_cache=False, logits_to_keep=keep).logits
        loss = focal_state_loss(logits, target, ids, counts=counts).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        sync(device)
        if k >= warmup:
            times.append(time.perf_counter() - start)
    del optimizer
    step_s = statistics.median(times)
    tokens = int(batch["attention_mask"].sum())
    flops = train_flops(model, {**batch, "attention_mask": batch["attention_mask"].cpu()}, int(target.numel()))
    return {
        "step_s": step_s,
        "tokens_per_step": tokens,
        "tokens_per_s": tokens / step_s,
        "samples_per_s": batch["input_ids"].shape[0] / step_s,
        "tflops_per_s": flops / step_s / 1e12,
        "loss": loss.item(),
        "peak_mem_gib": torch.cuda.max_memory_allocated(device) / 2**30 if device.type == "cuda" else None,
    }


def stream_dialogue(chunks, draft: list[int], image_token_id: int) -> dict:
    """The stream's all-silent dialogue (each chunk followed by the silent turn), as `encode_dialogue` outputs: the
    examples the stand-in head is fit to."""
    ids = torch.tensor([t for c in chunks for t in [*c.input_ids, *draft]])
    labels = torch.tensor([t for c in chunks for t in [-100] * len(c.input_ids) + draft])
    return {
        "input_ids": ids,
        "labels": labels,
        "mm_token_type_ids": (ids == image_token_id).long(),
        "pixel_values": torch.cat([c.pixel_values for c in chunks]),
        "image_grid_thw": torch.cat([c.image_grid_thw for c in chunks]),
    }


def fresh(chunks):
    """New `Chunk`s for the stream (vision features are cached in a chunk: each configuration encodes its own)."""
    from proactive_rl.streaming.chunks import Chunk

    return [Chunk(c.input_ids, c.pixel_values, c.image_grid_thw) for c in chunks]


def bench_stream(model, processor, chunks, device, turn_tokens: int, respond: float) -> dict:
    """Per-frame latency of live streaming (frame by frame vs speculative silence, K = 1) and the engine/full-forward
    ratio on the recorded stream (frame by frame, K = 1, K = 16 with one vision call per block), for the model with
    a proactive head (`proactive_stand_in`, fit to the stream's all-silent dialogue, ``respond`` of its turn starts
    answered)."""
    from proactive_rl.streaming import SamplingParams, StreamingSession
    from proactive_rl.streaming.speculation import Lookahead, silent_draft
    from tests.support.stand_in import proactive_stand_in

    model.eval()
    draft = silent_draft(processor)
    base = StreamingSession(model, processor).chunks([t for t, _ in chunks], [[f] for _, f in chunks])
    dialogue = stream_dialogue(base, draft, model.config.image_token_id)
    proactive_stand_in(model, processor, respond=respond, dialogues=[dialogue])
    params = SamplingParams(max_new_tokens=turn_tokens, defer_capped_stop=True)

    def live(speculate: bool) -> tuple[list[float], StreamingSession]:
        session, ms = StreamingSession(model, processor), []
        for chunk in fresh(base):
            sync(device)
            start = time.perf_counter()
            session.step([chunk], params, draft if speculate else None)
            sync(device)
            ms.append(1e3 * (time.perf_counter() - start))
        return ms, session

    def recorded(k: int | None) -> tuple[float, StreamingSession]:
        session, todo = StreamingSession(model, processor), fresh(base)
        sync(device)
        start = time.perf_counter()
        if k is None:
            for chunk in todo:
                session.step([chunk], params)
        else:
            size, done = Lookahead(k), 0
            while done < len(todo):
                session.encode(todo[done : done + k])  # the frames known in advance: one vision call
                block, kept = todo[done : done + size.size], session.n_drafts_kept
                done += len(session.step(block, params, draft))
                size.update(len(block), session.n_drafts_kept - kept == len(block))
        sync(device)
        return time.perf_counter() - start, session

    live(True)  # warm-up (kernels, allocator)
    frame_ms, plain = live(False)
    spec_ms, spec = live(True)
    ids = plain.token_ids(0)
    if spec.token_ids(0) != ids:
        raise RuntimeError("speculative and frame-by-frame streaming decoded different tokens")
    engine = {name: recorded(k) for name, k in {"frame_by_frame": None, "K=1": 1, "K=16": 16}.items()}
    full = []
    for _ in range(3):
        sync(device)
        start = time.perf_counter()
        vision = processor.image_processor(images=[f for _, f in chunks], return_tensors="pt")
        t = torch.tensor([ids], device=device)
        with torch.no_grad():
            model(
                input_ids=t,
                mm_token_type_ids=(t == model.config.image_token_id).long(),
                pixel_values=vision["pixel_values"].to(device, model.dtype),
                image_grid_thw=vision["image_grid_thw"].to(device),
                logits_to_keep=1,
            )
        sync(device)
        full.append(time.perf_counter() - start)
    full_s = min(full)
    steady = slice(len(frame_ms) // 4, None)  # the first frames include warm-up (kernels, allocator)
    return {
        "frames": len(chunks),
        "context_tokens": len(ids),
        "responding_turns": len(chunks) - spec.n_drafts_kept,
        "frame_ms_median": statistics.median(frame_ms[steady]),
        "frame_ms_p90": float(np.percentile(frame_ms[steady], 90)),
        "frame_ms_last": frame_ms[-1],
        "speculative_frame_ms_median": statistics.median(spec_ms[steady]),
        "speculative_frame_ms_p90": float(np.percentile(spec_ms[steady], 90)),
        "full_forward_s": full_s,
        "engine_s": {name: s for name, (s, _) in engine.items()},
        "engine_over_full": {name: s / full_s for name, (s, _) in engine.items()},
        "lm_calls": {name: sess.n_forward_calls for name, (_, sess) in engine.items()},
        "vision_calls": {name: sess.n_vision_calls for name, (_, sess) in engine.items()},
    }


def bench_batched(model, processor, device, n_streams: int, frames: int, turn_tokens: int, limit_tokens: int) -> dict:
    """Batched evaluation of `n_streams` recorded streams: one at a time vs in lockstep vs the full-forward limit
    (the model already has its proactive head, `bench_stream`)."""
    from proactive_eval.episodes import Episode
    from proactive_eval.streaming import run_episode
    from proactive_rl.streaming import HFStreamingPolicy, SamplingParams
    from proactive_rl.streaming.batch import Batcher
    from proactive_rl.synthetic import generate_episodes, render_frames

    seconds = [max(frames, 10)] * 2
    streams = [
        [f for _, f in render_frames(e)[:frames]] for e in generate_episodes("atomic", n_streams, 2, duration=seconds)
    ]
    params = SamplingParams(max_new_tokens=turn_tokens, defer_capped_stop=True)

    def play(batcher=None):
        def one(k):
            policy = HFStreamingPolicy(model, processor, params, batcher=batcher)
            episode = Episode(
                id=f"stream-{k}", task="atomic", duration=float(frames), instruction="Count the circles."
            )
            run_episode(policy, episode, frame_source=lambda e: [(float(t), f) for t, f in enumerate(streams[k])])
            return policy.session.token_ids()

        sync(device)
        start = time.perf_counter()
        ids = [one(k) for k in range(n_streams)] if batcher is None else batcher.map(range(n_streams), one, n_streams)
        sync(device)
        return time.perf_counter() - start, ids

    one_s, ids = play()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    batcher = Batcher(model, processor)
    batched_s, batched_ids = play(batcher)
    if batched_ids != ids:
        raise RuntimeError("batched and one-at-a-time streaming decoded different tokens")
    peak_gpu = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    rows = max(1, min(n_streams, limit_tokens // max(len(x) for x in ids)))
    sync(device)
    start = time.perf_counter()
    for k in range(0, n_streams, rows):
        part = ids[k : k + rows]
        vision = processor.image_processor(images=[f for s in streams[k : k + rows] for f in s], return_tensors="pt")
        longest = max(len(x) for x in part)
        t = torch.tensor([x + [processor.tokenizer.pad_token_id] * (longest - len(x)) for x in part], device=device)
        with torch.no_grad():
            model(
                input_ids=t,
                mm_token_type_ids=(t == model.config.image_token_id).long(),
                pixel_values=vision["pixel_values"].to(device, model.dtype),
                image_grid_thw=vision["image_grid_thw"].to(device),
                logits_to_keep=1,
            )
    sync(device)
    limit_s = time.perf_counter() - start
    return {
        "streams": n_streams,
        "frames": frames,
        "tokens": sum(len(x) for x in ids),
        "one_at_a_time_s": one_s,
        "batched_s": batched_s,
        "limit_s": limit_s,
        "limit_rows_per_forward": rows,
        "speedup": one_s / batched_s,
        "batched_over_limit": batched_s / limit_s,
        "language_calls": batcher.stats.language_calls,
        "vision_calls": batcher.stats.vision_calls,
        "peak_kv_cache_bytes": batcher.stats.peak_cache_bytes,
        "peak_kv_cache_used_bytes": batcher.stats.peak_cache_used,
        "peak_gpu_bytes": peak_gpu,
    }


def peak_tflops(device: torch.device, override: float | None) -> float | None:
    if override:
        return override
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_TFLOPS.items() if k in name), None)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a local Qwen2.5-VL-3B checkpoint (default: random weights)")
    parser.add_argument("--batch", type=int, default=2, help="dialogues per SFT step")
    parser.add_argument("--seconds", type=int, default=60, help="frames (1 FPS) per SFT dialogue, >= 10")
    parser.add_argument("--frame-side", type=int, default=16, help="patches per frame side (16: 64 vision tokens)")
    parser.add_argument("--steps", type=int, default=10, help="timed SFT steps (after --warmup)")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--frames", type=int, default=128, help="frames fed to the streaming session")
    parser.add_argument("--turn-tokens", type=int, default=8, help="max decoded tokens per assistant turn")
    parser.add_argument("--respond", type=float, default=0.05, help="share of turn starts the stand-in head answers")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the GPU's dense bf16 peak (for MFU)")
    parser.add_argument("--streams", type=int, default=8, help="recorded streams of the batched measurement")
    parser.add_argument("--batched-frames", type=int, default=32, help="frames per stream, batched measurement")
    parser.add_argument("--limit-tokens", type=int, default=32768, help="padded tokens per full forward (limit)")
    parser.add_argument("--dry-run", action="store_true", help="CPU, tiny model, tiny sizes: check the preparation")
    args = parser.parse_args(argv)
    if args.dry_run:
        args.batch, args.seconds, args.frame_side, args.steps, args.warmup, args.frames = 1, 10, 4, 1, 1, 3
        args.turn_tokens, args.streams, args.batched_frames = 2, 2, 3
    started = time.perf_counter()

    # 1. everything that needs no GPU
    processor = prepare_processor(args.model, args.frame_side)
    config = None if args.model else config_3b(processor, tiny=args.dry_run)
    batch = prepare_batch(processor, args.batch, args.seconds)
    chunks = prepare_stream(processor, args.frames)
    if args.dry_run:
        # the real config must build too: on the meta device (shapes only, no memory)
        meta = build_model(config_3b(processor), None, torch.device("meta"), torch.bfloat16)
        params_3b = count_params(meta)
        del meta
    prepared_s = time.perf_counter() - started

    # 2. the GPU
    device = torch.device("cpu" if args.dry_run or not torch.cuda.is_available() else "cuda")
    dtype = torch.float32 if device.type == "cpu" else torch.bfloat16
    start = time.perf_counter()
    model = build_model(config, args.model, device, dtype)
    built_s = time.perf_counter() - start
    sft = bench_sft(model, processor, batch, device, args.steps, args.warmup)
    stream = bench_stream(model, processor, chunks, device, args.turn_tokens, args.respond)
    batched = bench_batched(
        model, processor, device, args.streams, args.batched_frames, args.turn_tokens, args.limit_tokens
    )
    peak = peak_tflops(device, args.peak_tflops)
    mfu = sft["tflops_per_s"] / peak if peak else None
    result = {
        "device": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        "model": args.model or ("tiny xs (dry run)" if args.dry_run else "Qwen2.5-VL-3B config, random weights"),
        "dtype": str(dtype),
        "params": count_params(model),
        **({"params_3b_config": params_3b} if args.dry_run else {}),
        "settings": {k: v for k, v in vars(args).items() if k != "model"},
        "prepare_s": prepared_s,
        "build_s": built_s,
        "sft": sft,
        "mfu": mfu,
        "peak_tflops": peak,
        "stream": stream,
        "batched": batched,
        "total_s": time.perf_counter() - started,
    }
    mfu_text = f"MFU {100 * mfu:.1f}% of {peak:.0f} TFLOP/s" if mfu else "MFU n/a (unknown peak)"
    result["line"] = (
        f"{result['model']} on {result['device']} ({result['dtype']}): SFT {sft['tokens_per_s']:,.0f} tokens/s "
        f"(batch {args.batch} x {args.seconds} frames, {sft['tokens_per_step']:,} tokens/step, {sft['step_s']:.3f} "
        f"s/step), {sft['tflops_per_s']:.0f} TFLOP/s, {mfu_text}; streaming {stream['frames']} frames "
        f"({stream['context_tokens']:,} tokens, proactive stand-in head, {stream['responding_turns']} turns respond): "
        f"live {stream['frame_ms_median']:.1f} ms/frame median frame by frame (p90 {stream['frame_ms_p90']:.1f}), "
        f"{stream['speculative_frame_ms_median']:.1f} with speculative silence (p90 "
        f"{stream['speculative_frame_ms_p90']:.1f}); recorded, engine / one full forward ({stream['full_forward_s']:.2f}"
        f" s): "
        + ", ".join(f"{k} {v:.2f}x" for k, v in stream["engine_over_full"].items())
        + f"; batched streaming, {batched['streams']} streams x {batched['frames']} frames: one at a time "
        f"{batched['one_at_a_time_s']:.2f} s, batched {batched['batched_s']:.2f} s = {batched['speedup']:.2f}x faster, "
        f"{batched['batched_over_limit']:.2f}x the full-forward limit ({batched['limit_s']:.2f} s, "
        f"{batched['limit_rows_per_forward']} rows per forward)"
    )
    text = json.dumps(result, indent=2, default=str)
    print(text)
    if os.environ.get("OUT"):
        Path(os.environ["OUT"], "qwen2_5_vl_3b.json").write_text(text)
    return result


if __name__ == "__main__":
    main()
