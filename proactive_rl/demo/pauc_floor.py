"""Why the final model does not beat the blind schedule on PAUC, said beside the claims table when it does not.

The blind answer of a PAUC task (`proactive_eval.baseline_pauc`) is one text fitted on the training split, said at a
fixed fraction of every reply span. PAUC keeps only the answers inside a reply span and drops a repeated text
(docs/spec.md §5), so it scores what saying that text at every frame would. The paragraph reads the final stage's
``pauc/pauc_turns.jsonl`` and ``pauc_turns_blind.jsonl`` (the same turns, `proactive_rl.demo.comparisons`) and
gives, from them: the two means and the gain's interval, how the rule judge rates the blind text (docs/spec.md §5:
token-F1 level 3 at F1 >= 0.5, level 2 at >= 0.2) and the words it shares with every gold answer, and how the model
answers the same turns (silent spans, latency and level of its first answer).
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


def _share(counts: Counter, n: int, level: int) -> float:
    return 100 * counts.get(level, 0) / max(n, 1)


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
    said = Counter(p["text"] for t in blind for p in t["predictions"][:1])
    silent_blind = sum(not t["predictions"] for t in blind)
    blind_levels = Counter(t["levels"][0] for t in blind if t["levels"])
    answered = [t for t in model if t["predictions"]]
    model_levels = Counter(t["levels"][0] for t in answered if t["levels"])
    n = len(model)
    seeds = f" over {len(runs)} seeds" if len(runs) > 1 else ""
    head = (
        f"**On PAUC the final model does not beat the blind schedule**{seeds}: {final_mean:.1f} vs {blind_mean:.1f}, "
        f"a gain of {row['diff']:+.1f} [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}] over {n} held-out turns."
    )
    if not said:
        why = (
            "The blind answer is silence (25 a turn: no fitted text scored above it on the training split); "
            f"the model scores below it where it answers wrongly: {_share(model_levels, len(answered), 1):.0f} % "
            "of its first answers are rated incorrect (0 from then on)."
        )
        return f"{head} {why}"
    text, _ = said.most_common(1)[0]
    fractions = [(t["predictions"][0]["time"] - t["span"][0]) / max(t["span"][1] - t["span"][0], 1e-9) for t in blind
                 if t["predictions"]]  # fmt: skip
    common = set(tokens(text)).intersection(*(set(tokens(t["gold"])) for t in blind))
    shared = (
        f"it shares {', '.join(repr(w) for w in sorted(common))} with every gold answer, so it is never rated "
        f"{LEVELS[1]}"
        if common
        else "it shares no word with every gold answer"
    )
    latency = [t["predictions"][0]["time"] - t["span"][0] for t in answered]
    why = (
        f"The blind answer says {text!r} at {statistics.median(fractions):.1f} of every reply span"
        + (f" (silent in {silent_blind} of {len(blind)})" if silent_blind else "")
        + ", which PAUC scores as it would the same text said at every frame (answers outside a reply span and "
        f"repeats are not scored), and the rule judge (token-F1) rates it {LEVELS[3]} (F1 >= 0.5) on "
        f"{_share(blind_levels, len(blind), 3):.0f} % of the turns and {LEVELS[2]} (F1 >= 0.2) on "
        f"{_share(blind_levels, len(blind), 2):.0f} % ({shared}): a fixed sentence earns {blind_mean:.0f} of 100 "
        "without looking. "
        f"The final model is silent in {100 * (n - len(answered)) / max(n, 1):.0f} % of the reply spans (25 each)"
        + (
            f"; its first answer comes a median {statistics.median(latency):.1f} s after the span opens and is rated "
            f"{LEVELS[3]} on {_share(model_levels, len(answered), 3):.0f} % of the turns it answers, "
            f"{LEVELS[2]} on {_share(model_levels, len(answered), 2):.0f} % and {LEVELS[1]} on "
            f"{_share(model_levels, len(answered), 1):.0f} %."
            if answered
            else "."
        )
    )
    return f"{head} {why}"
