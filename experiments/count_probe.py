"""How sure is a model of its counts? The probability it gives each number at each count target, teacher-forced.

Plays every held-out count episode of a demo folder (``<demo>/data/test/episodes.<task>.json``) as one dialogue with
the ground-truth responses (`build_messages`: the history a streaming model sees when it counted right so far), one
full forward each, and reads the model's next-token distribution where each target's number is due: the k-th target
needs ``str(k)``, and the printout gives p("1") ... p("4") there, then the mean probability of the right number and
how often it is the most likely one, by k::

    python -m experiments.count_probe --model demo_out/seed1/runs/sft --data demo_out/seed1/data

A model that counts from its history gives the right number most of its mass at every k; one that guesses from the
time into the episode spreads it over neighbouring numbers (benchmarks/RESULTS.md, "what the count head knows").
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

NUMBERS = ("1", "2", "3", "4")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a saved checkpoint (e.g. <demo>/runs/sft)")
    parser.add_argument("--data", required=True, help="a demo data folder (<demo>/data)")
    parser.add_argument("--task", default="atomic", help="a count task of the demo's data (default: atomic)")
    parser.add_argument("--episodes", type=int, default=20, help="held-out episodes (default: 20, the demo's)")
    parser.add_argument("--json", help="also write the per-target probabilities to this file")
    args = parser.parse_args(argv)
    # deferred: keeps --help light
    import torch

    from proactive_eval.episodes import load_episodes
    from proactive_rl.chat.encode import encode_dialogue
    from proactive_rl.chat.messages import build_messages
    from proactive_rl.demo.stages import task_file
    from proactive_rl.models import load_model
    from proactive_rl.synthetic.generate import render_frames

    episodes = load_episodes(task_file(Path(args.data), "test", args.task))[: args.episodes]
    model, processor = load_model(args.model)
    model.eval()
    ids = _number_ids(processor.tokenizer)
    records, by_k = [], defaultdict(list)
    for episode in episodes:
        encoded = encode_dialogue(processor, build_messages(episode, render_frames(episode)))
        labels = encoded.pop("labels")
        inputs = {k: v if k in ("pixel_values", "image_grid_thw") else v.unsqueeze(0) for k, v in encoded.items()}
        with torch.no_grad():
            logits = model(**inputs).logits[0]
        k, line = 0, []
        for pos in range(1, len(labels)):
            if int(labels[pos]) not in ids.values():
                continue
            k += 1
            probs = torch.softmax(logits[pos - 1].float(), -1)
            p = {n: round(probs[i].item(), 4) for n, i in ids.items()}
            records.append({"episode": episode.id, "k": k, "p": p})
            by_k[k].append(p)
            line.append(f"k={k}:" + "/".join(f"{v:.2f}" for v in p.values()))
        print(episode.id, *line)
    print(f"p({'/'.join(NUMBERS)}) at the k-th target; by k: mean p(right number), right number most likely")
    for k in sorted(by_k):
        right = [p[str(k)] for p in by_k[k]]
        top = sum(max(p, key=p.get) == str(k) for p in by_k[k])
        print(f"k={k}: {len(right)} targets, mean p(right) {sum(right) / len(right):.2f}, most likely {top}")
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1) + "\n")
    return 0


def _number_ids(tokenizer) -> dict[str, int]:
    """Token id of each number as a response says it (after ``</Response>``: a space, then the digit)."""
    ids = {}
    for n in NUMBERS:
        pieces = tokenizer.encode(" " + n, add_special_tokens=False)
        if len(pieces) != 1:
            raise SystemExit(f"the tokenizer splits {' ' + n!r} into {len(pieces)} tokens; this probe reads one")
        ids[n] = pieces[0]
    return ids


if __name__ == "__main__":
    raise SystemExit(main())
