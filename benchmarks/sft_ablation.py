"""SFT ablation on the tiny recipe: untrained vs plain CE vs focal + balanced (docs/spec.md §3), on held-out synthetic episodes.

    python -m benchmarks.sft_ablation [--steps N] [--episodes 10] [--config recipes/tiny/sft.yaml]

Trains the tiny model twice with the same data, steps and seed — the recipe as is (γ = 2, balanced) and with
``--focal_gamma 0 --state_balance false`` (plain token-mean CE) — for the recipe's ``max_steps`` unless ``--steps``
says otherwise, then scores held-out episodes of the recipe's tasks (accident, crime, object, compositional; other
generator seeds). Reported:

- teacher-forced, at every frame step of the gold dialogue the greedy state token is the decision: state-token
  accuracy, silence accuracy, response recall / precision, and a teacher-forced PRS-B (docs/spec.md §4) — a response at each
  step whose greedy state token is ``</Response>``, its text the target's when every content token is predicted
  right (teacher-forced), otherwise a wrong answer. It isolates the decision the loss trains;
- free-running PRS-B (docs/spec.md §4, exact-match content): greedy generation through the KV-cache streaming engine
  (`proactive_rl.streaming.HFStreamingPolicy`, `proactive_eval.streaming.run_streaming`, frames from
  `proactive_rl.synthetic.render_frames`), scored by `proactive_eval.benchmarks.p3i.metric.score_prs` — how the model is used.

Training and evaluation run single-threaded (a shared CPU box; reproducible numbers).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
# The tasks of the tiny recipe, fresh generator seeds (the recipe trains on seeds 1-4).
HELD_OUT = [("accident", 101), ("crime", 102), ("object", 103), ("compositional", 104)]


def train(out: Path, config: str, steps: int, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "proactive_rl.sft.main", "--config", config, "--output_dir", str(out)]
    cmd += ["--max_steps", str(steps), "--save_strategy", "no", "--disable_tqdm", "true", *extra]
    # One thread: the benchmark must behave on a shared CPU box, and single-threaded runs are reproducible.
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, env=env)


@torch.no_grad()
def free_running_prs(model, processor, episodes, path: Path) -> float:
    """PRS-B (× 100, docs/spec.md §4) of greedy free-running generation through the KV-cache streaming engine."""
    from proactive_eval.benchmarks.p3i.metric import score_prs
    from proactive_eval.streaming import run_streaming
    from proactive_rl.streaming import HFStreamingPolicy, SamplingParams
    from proactive_rl.synthetic import render_frames

    model.eval()
    # Contents are one word here; 8 tokens bound a runaway turn without cutting a right answer.
    policy = HFStreamingPolicy(model, processor, SamplingParams(max_new_tokens=8))
    predictions = run_streaming(policy, episodes, path, frame_source=render_frames, progress=False)
    return score_prs(episodes, predictions).summary()["overall"]["prs_b"]


@torch.no_grad()
def evaluate(model, processor, episodes) -> dict[str, float]:
    from proactive_rewards import Response, prs_score
    from proactive_rl.chat import build_messages, encode_dialogue
    from proactive_rl.sft.main import state_token_ids
    from proactive_rl.synthetic import render_frames

    sil, resp = state_token_ids(processor)
    eot = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    counts = dict(n=0, hit=0, sil_n=0, sil_hit=0, resp_n=0, resp_hit=0, resp_pred=0)
    prs = []
    model.eval()
    for ep in episodes:
        frames = render_frames(ep)
        enc = encode_dialogue(processor, build_messages(ep, frames), None, episode_id=ep.id)
        ids = enc["input_ids"]
        inputs = {
            k: (v.unsqueeze(0) if k in ("input_ids", "attention_mask", "mm_token_type_ids") else v)
            for k, v in enc.items()
        }
        inputs.pop("labels")
        pred = model(**inputs).logits[0].argmax(-1)  # pred[i] predicts ids[i + 1]
        labels = enc["labels"]
        steps = [i for i in range(1, len(ids)) if int(labels[i]) in (sil, resp)]
        responses = []
        for k, i in enumerate(steps):
            gold, guess = int(labels[i]), int(pred[i - 1])
            counts["n"] += 1
            counts["hit"] += gold == guess
            key = "resp" if gold == resp else "sil"
            counts[f"{key}_n"] += 1
            counts[f"{key}_hit"] += gold == guess
            counts["resp_pred"] += guess == resp
            if guess == resp:
                text = "<wrong>"
                if gold == resp:
                    j = i + 1
                    while j < len(ids) and int(ids[j]) != eot:
                        j += 1
                    if all(int(pred[m - 1]) == int(ids[m]) for m in range(i + 1, j)):
                        text = processor.tokenizer.decode(ids[i + 1 : j]).strip()
                time = frames[k][0]
                responses.append(Response(time, text))
        prs.append(prs_score(responses, ep.targets, mode="B").score)
    return {
        "state_acc": counts["hit"] / counts["n"],
        "silence_acc": counts["sil_hit"] / max(counts["sil_n"], 1),
        "response_recall": counts["resp_hit"] / max(counts["resp_n"], 1),
        "response_precision": counts["resp_hit"] / max(counts["resp_pred"], 1),
        "prs_b": 100 * statistics.mean(prs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", default="recipes/tiny/sft.yaml", help="the SFT recipe both runs start from")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps (default: the recipe's max_steps)")
    parser.add_argument("--episodes", type=int, default=10, help="held-out episodes per task")
    parser.add_argument("--no-free-running", action="store_true", help="skip the streaming-engine PRS-B")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    import yaml

    recipe = yaml.safe_load((ROOT / args.config).read_text())
    if args.steps is None:
        args.steps = int(recipe["max_steps"])
    # The untrained baseline is the recipe's own tiny model at its initialisation (build_tiny, the recipe's seed).
    kind, arch, size = str(recipe["model_name_or_path"]).split(":")
    if kind != "tiny":
        raise SystemExit(f"{args.config}: model_name_or_path: the ablation needs a tiny:<arch>:<size> model")

    from proactive_rl.models import build_tiny, load_model
    from proactive_rl.synthetic import generate_episodes

    held_out = [e for task, seed in HELD_OUT for e in generate_episodes(task, args.episodes, seed, duration=(10, 14))]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:

        def score(name: str, model, processor) -> None:
            rows[name] = evaluate(model, processor, held_out)
            if not args.no_free_running:
                path = Path(tmp) / f"{name.split()[0]}.jsonl"
                rows[name]["prs_b_free"] = free_running_prs(model, processor, held_out, path)
            print(name, rows[name], flush=True)

        model, processor = build_tiny(arch, size, seed=int(recipe.get("seed", 0)))
        score("untrained", model, processor)
        for name, extra in [
            ("plain CE (γ=0, no balance)", ["--focal_gamma", "0", "--state_balance", "false"]),
            ("focal + balanced (γ=2)", []),
        ]:
            out = Path(tmp) / name.split()[0]
            train(out, args.config, args.steps, extra)
            model, processor = load_model(out, dtype="float32")
            score(name, model, processor)
    free = not args.no_free_running
    header = "| model | state acc | silence acc | response recall | response precision | PRS-B (teacher-forced) |"
    header += " PRS-B (free-running) |" if free else ""
    lines = [header, "|---|---|---|---|---|---|" + ("---|" if free else "")]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['state_acc']:.3f} | {r['silence_acc']:.3f} | {r['response_recall']:.3f} | "
            f"{r['response_precision']:.3f} | {r['prs_b']:.1f} |" + (f" {r['prs_b_free']:.1f} |" if free else "")
        )
    table = "\n".join(lines)
    print(table)
    command = f"python -m benchmarks.sft_ablation --steps {args.steps} --episodes {args.episodes}"
    command += f" --config {args.config}" if args.config != "recipes/tiny/sft.yaml" else ""
    command += " --no-free-running" if not free else ""
    if not args.no_record:
        from benchmarks.common import record

        def cell(r: dict) -> str:
            out = f"state acc {r['state_acc']:.3f}, recall {r['response_recall']:.3f}, PRS-B {r['prs_b']:.1f}"
            return out + (f" (free-running {r['prs_b_free']:.1f})" if free else "")

        summary = "; ".join(f"{n}: {cell(r)}" for n, r in rows.items())
        tasks = "/".join(t for t, _ in HELD_OUT)
        record(
            "SFT ablation (tiny recipe, held-out synthetic)",
            f"{args.steps} steps, {len(held_out)} held-out {tasks} episodes: {summary}",
            command,
        )


if __name__ == "__main__":
    main()
