"""Every gain the demo's report shows, with its 95 % bootstrap interval (docs/spec.md §15): ``comparisons.json``.

The per-item scores come from the evaluators' files under ``<out>/eval/<stage>/``: ``prs/prs_episodes.jsonl`` /
``prs_episodes_swap.jsonl`` (PRS-U / PRS-B per episode, per task and over all tasks, own and swapped frames),
``prs_episodes_blind.jsonl`` (the blind schedule's, the same for every stage), ``pauc/pauc_turns.jsonl`` (PAUC at
ω = 0.5 per turn, the table's turn-weighted mean), ``pauc_turns_blind.jsonl`` (the blind answer's, the same turns)
and ``mcqa/outcomes.jsonl`` / ``outcomes_swap.jsonl`` (MCQA accuracy per environment, own and swapped images).
Compared: each evaluated stage with the previous stage that has the same metric and task, PRS and MCQA accuracy on
own vs swapped frames, and PRS and PAUC against the blind schedule. PAUC's swapped frames and MCQA's image-blind
policy save no per-item scores, so they have no interval here.

A row is ``{"a", "b", "metric", "task", "diff", "ci_low", "ci_high", "n"}``: ``diff`` = mean(a − b) over the items
both rows scored (× 100, as the table), paired over those items; pooled over seeds (`pooled_comparisons`) the mean of
the seeds' differences with the items resampled within each seed, and ``seeds``. `task_means`: each stage's PRS
mean per task with its own interval (how sure one seed's number is).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proactive_eval.intervals import paired_interval, stratified_interval

SWAPPED = "swapped frames"
BLIND = "blind schedule"
Key = tuple[str, str, str, str]  # (a, b, metric, task)
Scores = dict[tuple[str, str], dict[str, float]]  # (metric, task) -> item id -> score


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.is_file() else []


def stage_scores(eval_dir: Path) -> tuple[Scores, Scores, Scores]:
    """``(own, swapped, blind)`` per-item scores of one stage's evaluation folder (module docstring), × 100."""
    own: Scores = {}
    swapped: Scores = {}
    blind: Scores = {}
    prs = (("prs_episodes.jsonl", own), ("prs_episodes_swap.jsonl", swapped), ("prs_episodes_blind.jsonl", blind))
    for name, scores in prs:
        for r in _records(eval_dir / "prs" / name):
            for metric in ("prs_u", "prs_b"):
                for task in (r["group"], "all"):
                    scores.setdefault((metric, task), {})[r["episode_id"]] = 100 * r[metric]
    for name, scores in (("pauc_turns.jsonl", own), ("pauc_turns_blind.jsonl", blind)):
        for r in _records(eval_dir / "pauc" / name):
            scores.setdefault(("pauc", "all"), {})[f"{r['episode_id']}#{r['turn']}"] = 100 * r["pauc"]["0.5"]
    for name, scores in (("outcomes.jsonl", own), ("outcomes_swap.jsonl", swapped)):
        for r in _records(eval_dir / "mcqa" / name):
            scores.setdefault(("acc", "all"), {})[r["id"]] = 100.0 * bool(r["success"])
    return own, swapped, blind


def _pair(a: dict[str, float], b: dict[str, float]) -> tuple[list[float], list[float]]:
    ids = [i for i in a if i in b]
    return [a[i] for i in ids], [b[i] for i in ids]


def paired_scores(out: Path, stages: list[dict[str, Any]]) -> dict[Key, tuple[list[float], list[float]]]:
    """(a, b, metric, task) -> the two rows' scores of the items both scored, for every comparison (module
    docstring); stages by key, in the report's order, only those evaluated in this run."""
    pairs: dict[Key, tuple[list[float], list[float]]] = {}
    latest: dict[tuple[str, str], tuple[str, dict[str, float]]] = {}  # (metric, task) -> the last stage's scores
    for stage in stages:
        if stage.get("metrics") is None:
            continue
        own, swapped, blind = stage_scores(out / "eval" / stage["key"])
        for (metric, task), scores in own.items():
            if (metric, task) in latest:
                before, previous = latest[(metric, task)]
                pairs[(stage["key"], before, metric, task)] = _pair(scores, previous)
            latest[(metric, task)] = (stage["key"], scores)
            if (metric, task) in swapped:
                pairs[(stage["key"], f"{stage['key']} {SWAPPED}", metric, task)] = _pair(
                    scores, swapped[(metric, task)]
                )
            if (metric, task) in blind:
                pairs[(stage["key"], BLIND, metric, task)] = _pair(scores, blind[(metric, task)])
    return {key: pair for key, pair in pairs.items() if pair[0]}


def _row(key: Key, interval) -> dict[str, Any]:
    a, b, metric, task = key
    return {"a": a, "b": b, "metric": metric, "task": task, "diff": interval.diff, "ci_low": interval.low,
            "ci_high": interval.high, "n": interval.n}  # fmt: skip


def comparisons(out: Path, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One run's rows (module docstring), paired over items."""
    return [_row(key, paired_interval(a, b)) for key, (a, b) in paired_scores(out, stages).items()]


def pooled_comparisons(runs: dict[Path, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows pooled over seeds (`runs`: each seed's demo folder -> its stages): every comparison that some seed makes,
    stratified over the seeds that make it (``seeds``: how many)."""
    per_seed: dict[Key, list[tuple[list[float], list[float]]]] = {}
    for out, stages in runs.items():
        for key, pair in paired_scores(out, stages).items():
            per_seed.setdefault(key, []).append(pair)
    return [{**_row(key, stratified_interval(pairs)), "seeds": len(pairs)} for key, pairs in per_seed.items()]


def task_means(out: Path, stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """How sure each task mean is: every evaluated stage's (and the blind schedule's) PRS-U / PRS-B mean per task,
    with its 95 % bootstrap interval over the held-out episodes, as ``{"stage", "metric", "task", "mean", "ci_low",
    "ci_high", "n"}`` (× 100)."""
    rows: list[dict[str, Any]] = []
    seen_blind = False
    for stage in stages:
        if stage.get("metrics") is None:
            continue
        own, _, blind = stage_scores(out / "eval" / stage["key"])
        blind = {k: v for k, v in blind.items() if k[0] in ("prs_u", "prs_b")}  # PAUC's: no task means
        named = [(stage["key"], own)] + ([(BLIND, blind)] if blind and not seen_blind else [])
        seen_blind = seen_blind or bool(blind)
        for name, scores in named:
            for (metric, task), items in scores.items():
                if metric in ("prs_u", "prs_b") and task != "all":
                    i = paired_interval(list(items.values()), [0.0] * len(items))
                    rows.append({"stage": name, "metric": metric, "task": task, "mean": i.diff, "ci_low": i.low,
                                 "ci_high": i.high, "n": i.n})  # fmt: skip
    return rows


def half_width(row: dict[str, Any]) -> float:
    """Half the width of a row's interval (the ``±`` of a task mean)."""
    return (row["ci_high"] - row["ci_low"]) / 2


def means_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: a row per stage, a column per (task, metric), ``mean [ci_low, ci_high]``."""
    cols = list(dict.fromkeys((r["task"], r["metric"]) for r in rows))
    cells = {
        (r["stage"], r["task"], r["metric"]): f"{r['mean']:.1f} [{r['ci_low']:.1f}, {r['ci_high']:.1f}]" for r in rows
    }
    names = {"prs_u": "PRS-U", "prs_b": "PRS-B"}
    lines = ["| stage | " + " | ".join(f"{t} {names[m]}" for t, m in cols) + " | n |", "|---" * (len(cols) + 2) + "|"]
    for stage in dict.fromkeys(r["stage"] for r in rows):
        n = max(r["n"] for r in rows if r["stage"] == stage)
        lines.append(f"| {stage} | " + " | ".join(cells.get((stage, t, m), "–") for t, m in cols) + f" | {n} |")
    return "\n".join(lines)


def write_comparisons(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(rows, indent=1) + "\n")
    return path


def comparisons_table(rows: list[dict[str, Any]]) -> str:
    """Markdown: one row per comparison, ``diff [ci_low, ci_high]`` and the items (and seeds when pooled)."""
    seeds = any("seeds" in r for r in rows)
    header = "| a | b | metric | task | a − b [95 % CI] | n |" + (" seeds |" if seeds else "")
    lines = [header, "|---|---|---|---|---|---|" + ("---|" if seeds else "")]
    for r in rows:
        cells = [r["a"], r["b"], r["metric"], r["task"], f"{r['diff']:+.2f} [{r['ci_low']:+.2f}, {r['ci_high']:+.2f}]"]
        cells += [str(r["n"])] + ([str(r["seeds"])] if seeds else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
