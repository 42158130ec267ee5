"""What a suggestion-stage model does at each state of the ask-for-help environments: its greedy option per state.

The demo's MCQA cell plays 20 held-out environments; this reads the policy behind it on many more, state by state
(the ``merge`` corruption of ``recipes/tiny/grpo_suggestion.yaml``: all colours merged, two bins, three bins, clean):
how often the model asks (the suggestion option), names the right colour, or names another, per state and per
colour of the answer, and the play accuracy that policy implies. Optionally it first runs the stage's supervised
warm start from the given checkpoint (``--warm-start``: the recipe the demo wrote, ``<demo>/recipes/grpo_suggestion.yaml``,
its environments and streaming replay, with ``--steps`` / ``--lr`` / ``--replay-coef`` overriding it;
benchmarks/RESULTS.md, "the warm start's own replay weight")::

    python -m experiments.suggestion_probe --model demo_out/seed0/runs/grpo_suggestion
    python -m experiments.suggestion_probe --model demo_out/seed1/runs/grpo_streaming --demo demo_out/seed1 \\
        --seed 1 --warm-start --replay-coef 20
"""

from __future__ import annotations

import argparse
import json
import logging
from collections import Counter, defaultdict
from pathlib import Path

from proactive_rl.data.mcqa import letter_token_ids
from proactive_rl.demo.settings import suggestion_environments
from proactive_rl.grpo.suggestion.warm_start import _collate, warm_start_rows
from proactive_rl.synthetic.environments import make_environments


def state_choices(model, processor, envs) -> list[dict]:
    """Per environment and state: ``{"env", "state", "colour", "choice"}`` with choice ``ask`` / ``right`` /
    ``wrong`` (the greedy option among the letters, as ``answer_letters_only`` plays)."""
    import torch

    tokenizer = getattr(processor, "tokenizer", processor)
    out = []
    for env in envs:
        rows = warm_start_rows([env], processor, suggest_rate=0.0, states="all")
        suggestion = list(env.choices).index(next(iter(env.moves)))
        letters = torch.tensor(letter_token_ids(tokenizer, rows[0]["n_options"]))
        batch, targets, _ = _collate(rows, tokenizer.pad_token_id or 0)
        with torch.no_grad():
            picks = model(**batch).logits[:, -1, letters].argmax(-1)
        for state, (pick, target) in enumerate(zip(picks.tolist(), targets.tolist())):
            choice = "ask" if pick == suggestion else "right" if pick == target else "wrong"
            out.append({"env": env.id, "state": state, "colour": env.answer.split()[0], "choice": choice})
    return out


def summary(choices: list[dict]) -> dict:
    """Shares of ask / right / wrong per state, right-at-clean per colour, and the implied play accuracy (ask
    moves to the next state; a colour ends the game; asking at the clean state fails)."""
    by_state = defaultdict(Counter)
    clean_by_colour = defaultdict(Counter)
    per_env = defaultdict(list)
    for c in choices:
        by_state[c["state"]][c["choice"]] += 1
        per_env[c["env"]].append(c)
    for states in per_env.values():
        clean_by_colour[states[-1]["colour"]][states[-1]["choice"]] += 1
    wins = sum(
        next((s["choice"] for s in states if s["choice"] != "ask"), "ask") == "right" for states in per_env.values()
    )
    share = {s: {k: round(100 * v / sum(c.values()), 1) for k, v in c.items()} for s, c in sorted(by_state.items())}
    clean = {k: round(100 * c["right"] / sum(c.values()), 1) for k, c in sorted(clean_by_colour.items())}
    return {
        "n_envs": len(per_env),
        "play_acc": round(100 * wins / len(per_env), 1),
        "per_state": share,
        "clean_right_by_colour": clean,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a checkpoint folder (model and processor)")
    parser.add_argument("--n", type=int, default=200, help="probe environments (another seed than training)")
    parser.add_argument("--seed", type=int, default=0, help="training seed (warm start)")
    parser.add_argument("--warm-start", action="store_true", help="first run the stage's warm start")
    parser.add_argument("--demo", help="a demo folder: the warm start runs its recipes/grpo_suggestion.yaml")
    parser.add_argument("--replay-coef", type=float, help="warm-start replay weight (default: the recipe's)")
    parser.add_argument("--steps", type=int, help="warm-start steps (default: the recipe's)")
    parser.add_argument("--lr", type=float, help="warm-start learning rate (default: the recipe's)")
    parser.add_argument("--out", help="write the summary JSON here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    import torch

    from proactive_rl.models import load_model

    torch.manual_seed(args.seed)
    model, processor = load_model(args.model)
    kinds, knobs = suggestion_environments()
    result = {"model": args.model}
    if args.warm_start:  # the stage's own warm start, from the recipe the demo wrote (`recipe_warm_start`)
        from proactive_rl.grpo.suggestion.main import make_parser, recipe_replay, recipe_warm_start

        if not args.demo:
            raise SystemExit("--warm-start: needs --demo (its recipes/grpo_suggestion.yaml and replayed episodes)")
        recipe_argv = ["--config", str(Path(args.demo) / "recipes" / "grpo_suggestion.yaml")]
        for flag, value in (("warm_start_steps", args.steps), ("warm_start_lr", args.lr)):
            if value is not None:
                recipe_argv += [f"--{flag}", str(value)]
        script_args, _, _ = make_parser().parse_args_and_config(recipe_argv)
        if args.replay_coef is not None:
            script_args.warm_start_replay_coef = args.replay_coef
        replay = recipe_replay(model, processor, script_args, args.seed)
        losses = recipe_warm_start(model, processor, script_args, args.seed, replay)
        result.update(
            warm_start={
                "steps": script_args.warm_start_steps,
                "lr": script_args.warm_start_lr,
                "replay_coef": script_args.warm_start_replay_coef,
                "loss_first": round(losses[0], 3),
                "loss_last_50": round(sum(losses[-50:]) / len(losses[-50:]), 3),
            }
        )
    model.eval()
    probe = [e for k in kinds for e in make_environments(k, args.n, 12345, **knobs)]
    result.update(summary(state_choices(model, processor, probe)))
    print(json.dumps(result, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
