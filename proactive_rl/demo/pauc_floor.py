"""Why the final model does not beat the blind schedule on PAUC, said beside the claims table when it does not.

The blind answer of a PAUC task (`proactive_eval.benchmarks.pvqa.blind`) is one text fitted on the training split, said at a
fixed fraction of every reply span. PAUC keeps only the answers inside a reply span and drops a repeated text
(docs/spec.md §5), so it scores what saying that text at every frame would. The paragraph reads the final stage's
``pauc/pauc_turns.jsonl`` and ``pauc_turns_blind.jsonl`` (the same turns, `proactive_rl.demo.comparisons`) and
gives, from them: the two means and the gain's interval, how the rule judge rates the blind text (docs/spec.md §5:
token-F1 level 3 at F1 >= 0.5, level 2 at >= 0.2) and the words it shares with every gold answer, what the model
says (how much of it is the blind answer's own text) and on how many turns it scores below the blind answer because
it was silent, late, or on time with worse words.
"""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path
from typing import Any

from proactive_eval.judges.rules import tokens
from proactive_rl.demo.comparisons import BLIND, _records

FINAL = "grpo_suggestion"
#: the rule judge's levels, in words (`proactive_eval.judges.rules`)
LEVELS = {3: "mostly covered", 2: "partially covered", 1: "incorrect"}


def _turns(eval_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(model, blind)`` turn records of one evaluation folder, paired over the turns both scored."""
    model = {(r["episode_id"], r["turn"]): r for r in _records(eval_dir / "pauc" / "pauc_turns.jsonl")}
    blind = {(r["episode_id"], r["turn"]): r for r in _records(eval_dir / "pauc" / "pauc_turns_blind.jsonl")}
    keys = [k for k in model if k in blind]
    return [model[k] for k in keys], [blind[k] for k in keys]


def floor_note(eval_dirs: list[Path], gains: list[dict[str, Any]]) -> str:
    """The paragraph of the module docstring, or ``""`` when the claim ``checks.PAUC_CLAIM`` holds (the final
    model's PAUC gain over the blind schedule has its lower bound above 0) or has no row or no turns to read.

    Args:
        eval_dirs (`list[Path]`): the final stage's evaluation folder of each seed (``<seed>/eval/grpo_suggestion``).
        gains (`list[dict]`): the comparison rows the claims read (one seed's, or pooled over the seeds).
    """
    row = next((r for r in gains if (r["a"], r["b"], r["metric"], r["task"]) == (FINAL, BLIND, "pauc", "all")), None)
    runs = [_turns(d) for d in eval_dirs]
    runs = [(m, b) for m, b in runs if m]
    if row is None or row["ci_low"] > 0 or not runs:
        return ""
    model = [t for m, _ in runs for t in m]
    blind = [t for _, b in runs for t in b]
    # the table's numbers: each seed's turn-weighted mean, averaged over the seeds
    final_mean = statistics.fmean(statistics.fmean(100 * t["pauc"]["0.5"] for t in m) for m, _ in runs)
    blind_mean = statistics.fmean(statistics.fmean(100 * t["pauc"]["0.5"] for t in b) for _, b in runs)
    head = (
        f"**On PAUC the final model does not beat the blind schedule**{_over(runs)}: {final_mean:.1f} vs "
        f"{blind_mean:.1f}, a gain of {row['diff']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}] over "
        f"{len(model)} held-out turns."
    )
    texts = [_blind_text(b) for _, b in runs]  # each seed's own fit
    if not any(texts):
        why = "The blind answer is silence (25 a turn: no fitted text scored above it on the training split)."
        return f"{head} {why} {_model_sentence(runs, texts)}"
    said = [t for t in blind if t["predictions"]]
    fractions = [(t["predictions"][0]["time"] - t["span"][0]) / max(t["span"][1] - t["span"][0], 1e-9) for t in said]
    common = set.intersection(
        *(set(tokens(p["text"])) & set(tokens(t["gold"])) for t in said for p in t["predictions"])
    )
    shared = (
        f"it shares {', '.join(repr(w) for w in sorted(common))} with every gold answer, so it is never rated "
        f"{LEVELS[1]}"
        if common
        else "it shares no word with every gold answer"
    )
    levels = Counter(t["levels"][0] for t in blind if t["levels"])
    silent = len(blind) - len(said)
    why = (
        f"The blind answer says {' / '.join(repr(t) for t in texts if t)}{_per_seed(runs)} at "
        f"{statistics.median(fractions):.1f} of every reply span"
        + (f" (silent in {silent} of {len(blind)})" if silent else "")
        + ", which PAUC scores as it would the same text said at every frame (answers outside a reply span and "
        f"repeats are not scored), and the rule judge (token-F1) rates it {LEVELS[3]} (F1 >= 0.5) on "
        f"{100 * levels[3] / len(blind):.0f} % of the turns and {LEVELS[2]} (F1 >= 0.2) on "
        f"{100 * levels[2] / len(blind):.0f} % ({shared}): a fixed sentence earns {blind_mean:.0f} of 100 without "
        f"looking. {_model_sentence(runs, texts)}"
    )
    return f"{head} {why}"


def _over(runs: list) -> str:
    return f" over {len(runs)} seeds" if len(runs) > 1 else ""


def _per_seed(runs: list) -> str:
    return " (each seed's, fitted on its training split)" if len(runs) > 1 else ""


def _blind_text(blind: list[dict[str, Any]]) -> str:
    """The text the blind answer of one seed says (``""``: silence)."""
    said = Counter(p["text"] for t in blind for p in t["predictions"][:1])
    return said.most_common(1)[0][0] if said else ""


def _model_sentence(runs: list[tuple[list, list]], texts: list[str]) -> str:
    """What the final model says in the reply spans (its commonest answer per seed, how many of its answers are its
    seed's blind text) and on how many turns it scores below the blind answer because it was silent, late, or on
    time with worse words (`runs`: each seed's paired model and blind turns; `texts`: each seed's blind text)."""
    answers = [[p["text"] for t in m for p in t["predictions"]] for m, _ in runs]
    if not any(answers):
        return "The final model says nothing in any reply span (25 a turn)."
    tops = [Counter(a).most_common(1)[0][0] for a in answers if a]
    own = sum(text == blind for a, blind in zip(answers, texts) for text in a) / sum(map(len, answers))
    distinct = len({text for a in answers for text in a})
    tie = ", so at best it ties the blind answer" if own >= 0.9 else ""
    below = above = silent = late = 0
    pairs = [pair for seed in runs for pair in zip(*seed)]
    for mine, floor in pairs:
        if mine["pauc"]["0.5"] > floor["pauc"]["0.5"] + 1e-9:
            above += 1
        elif mine["pauc"]["0.5"] < floor["pauc"]["0.5"] - 1e-9:
            below += 1
            start = floor["predictions"][0]["time"] if floor["predictions"] else mine["span"][0]
            silent += not mine["predictions"]
            late += bool(mine["predictions"]) and mine["predictions"][0]["time"] > start + 1e-6
    n = len(pairs)
    return (
        f"The final model's commonest answer in the reply spans is {' / '.join(repr(t) for t in tops)}"
        f"{_per_seed(runs) if len(tops) > 1 else ''}, and {100 * own:.0f} % of its answers ({distinct} distinct "
        f"text{'s' if distinct > 1 else ''}) are the blind answer's own text{tie}: turn by turn it scores below the "
        f"blind answer on {below} of {n} turns ({silent} silent, {late} answered later, {below - silent - late} on "
        f"time with worse words), as much on {n - below - above} and more on {above}."
    )
