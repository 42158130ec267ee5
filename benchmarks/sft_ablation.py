"""SFT ablation on the tiny recipe: untrained vs plain CE vs focal + balanced (SPEC §3), on held-out synthetic episodes.

    python benchmarks/sft_ablation.py [--steps 60]

Trains the tiny model twice with the same data, steps and seed — `recipes/tiny/sft.yaml` as is (γ = 2, balanced)
and with ``--focal_gamma 0 --state_balance false`` (plain token-mean CE) — then scores held-out episodes
(different generator seeds) teacher-forced: at every frame step the greedy state token is the decision. Reported:
state-token accuracy, per-class accuracy, response recall / precision, and a *teacher-forced* PRS-B (SPEC §4):
a response is emitted at each step whose greedy state token is ``</Response>``; its text is the target text when
every content token is predicted right (teacher-forced), otherwise a wrong answer. This is not free-running
streaming generation (the streaming engine evaluates that); it isolates the decision the loss trains.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
HELD_OUT = [("atomic", 101), ("accident", 102), ("compositional", 103)]


def train(out: Path, steps: int, extra: list[str]) -> None:
    cmd = [sys.executable, "-m", "proactive_rl.train", "--config", "recipes/tiny/sft.yaml", "--output_dir", str(out)]
    cmd += ["--max_steps", str(steps), "--save_strategy", "no", "--disable_tqdm", "true", *extra]
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)


@torch.no_grad()
def evaluate(model, processor, episodes) -> dict[str, float]:
    from proactive_rewards import Response, prs_score
    from proactive_rl.chat import build_messages, encode_dialogue
    from proactive_rl.synthetic import render_frames
    from proactive_rl.train import state_token_ids

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
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--episodes", type=int, default=8, help="held-out episodes per task")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()

    from proactive_rl.models import build_tiny, load_model
    from proactive_rl.synthetic import generate_episodes

    held_out = [e for task, seed in HELD_OUT for e in generate_episodes(task, args.episodes, seed, duration=(10, 14))]
    rows = {}
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    rows["untrained"] = evaluate(model, processor, held_out)
    with tempfile.TemporaryDirectory() as tmp:
        for name, extra in [
            ("plain CE (γ=0, no balance)", ["--focal_gamma", "0", "--state_balance", "false"]),
            ("focal + balanced (γ=2)", []),
        ]:
            out = Path(tmp) / name.split()[0]
            train(out, args.steps, extra)
            model, processor = load_model(out, dtype="float32")
            rows[name] = evaluate(model, processor, held_out)
    header = "| model | state acc | silence acc | response recall | response precision | PRS-B (teacher-forced) |"
    lines = [header, "|---|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(
            f"| {name} | {r['state_acc']:.3f} | {r['silence_acc']:.3f} | {r['response_recall']:.3f} | "
            f"{r['response_precision']:.3f} | {r['prs_b']:.1f} |"
        )
    table = "\n".join(lines)
    print(table)
    if not args.no_record:
        from common import record

        summary = "; ".join(f"{n}: recall {r['response_recall']:.3f}, PRS-B {r['prs_b']:.1f}" for n, r in rows.items())
        record(
            "SFT ablation (tiny recipe, held-out synthetic)",
            f"{args.steps} steps, {len(held_out)} held-out episodes: {summary}",
            f"python benchmarks/sft_ablation.py --steps {args.steps}",
        )


if __name__ == "__main__":
    main()
