"""``proactive-rl demo --seeds N`` (``make demo SEEDS=N``): the demo for seeds 0..N-1 and a mean ± sd table.

Each seed is a whole demo run (its own tiny-model init, synthetic world and training seeds) in ``<out>/seed<k>``
(reused on a second run like any demo folder); ``<out>/report/seeds.md`` holds the mean ± sample sd of every cell
of the table over the seeds, which of the demo's directions (`proactive_rl.demo.checks`) hold in which seed, and
every gain pooled over the seeds with its 95 % interval (stratified bootstrap, `proactive_rl.demo.comparisons`; also
in ``<out>/report/comparisons.json``).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from proactive_rl.demo.checks import MARK, claims, directions
from proactive_rl.demo.report import columns, with_blind


def mean_sd(values: list[float]) -> str:
    """``"m ± sd"`` (sample sd; ``± 0.00`` for one value)."""
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.fmean(values):.2f} ± {sd:.2f}"


def seeds_table(runs: dict[int, list[dict[str, Any]]]) -> str:
    """Markdown: one row per stage, each cell the mean ± sd over the seeds where that stage ran."""
    first = with_blind(next(iter(runs.values())))
    runs = {seed: with_blind(stages) for seed, stages in runs.items()}
    cols = columns(first)
    lines = ["| stage | " + " | ".join(n for n, _ in cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for i, stage in enumerate(first):
        cells = []
        for _, key in cols:
            values = [
                r[i]["metrics"][key]
                for r in runs.values()
                if r[i].get("metrics") and r[i]["metrics"].get(key) is not None
            ]
            cells.append(mean_sd(values) if values else "–")
        lines.append(f"| {stage['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def directions_table(
    runs: dict[int, list[dict[str, Any]]],
    trained_tasks: tuple[str, ...],
    gains: dict[int, list[dict[str, Any]]] | None = None,
    pooled: list[dict[str, Any]] | None = None,
) -> str:
    """Markdown: one row per direction, one column per seed (yes / **no** / not run); the claims read each seed's
    comparison rows (`gains`: seed -> rows) and, in a last column, the rows pooled over the seeds (`pooled`)."""
    gains = gains or {}
    per_seed = {
        seed: directions(stages, trained_tasks) + claims(stages, gains.get(seed, [])) for seed, stages in runs.items()
    }
    seeds = list(per_seed)
    pooled_claims = {}
    if pooled is not None:
        first = runs[seeds[0]]
        pooled_claims = {name: (ok, detail) for name, ok, detail in claims(first, pooled, points=False)}
    header = [f"seed {s}" for s in seeds] + (["pooled (95 % CI)"] if pooled is not None else [])
    lines = ["| direction | " + " | ".join(header) + " |", "|" + "---|" * (len(header) + 1)]
    for j, (name, _, _) in enumerate(per_seed[seeds[0]]):
        cells = [f"{MARK[per_seed[s][j][1]]} ({per_seed[s][j][2]})" for s in seeds]
        if pooled is not None:
            ok, detail = pooled_claims.get(name, (None, "–"))
            cells.append(f"{MARK[ok]} ({detail})" if name in pooled_claims else "–")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def write_seeds_report(out: Path, runs: dict[int, list[dict[str, Any]]], trained_tasks, meta: dict[str, Any]) -> Path:
    """``<out>/report/seeds.md``: the mean ± sd table, the directions per seed and the pooled gains (module
    docstring); the seeds' demo folders are ``<out>/seed<k>``."""
    # deferred: the interval module imports scipy
    from proactive_rl.demo.comparisons import (
        comparisons,
        comparisons_table,
        half_width,
        pooled_comparisons,
        task_means,
        write_comparisons,
    )
    from proactive_rl.demo.pauc_floor import FINAL, floor_note

    path = out / "report" / "seeds.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    gains = pooled_comparisons({out / f"seed{seed}": stages for seed, stages in runs.items()})
    write_comparisons(out / "report" / "comparisons.json", gains)
    per_seed = {seed: comparisons(out / f"seed{seed}", stages) for seed, stages in runs.items()}
    seeds = ", ".join(str(s) for s in runs)
    note = floor_note([out / f"seed{seed}" / "eval" / FINAL for seed in runs], gains)  # pooled PAUC claim fails: why
    means = [(seed, r) for seed, stages in runs.items() for r in task_means(out / f"seed{seed}", stages)]
    sure = []
    if means:
        seed, widest = max(means, key=lambda m: half_width(m[1]))
        sure = [
            f"How sure one seed's task mean is: the widest 95 % interval of a stage's PRS-U / PRS-B on one task in one "
            f"seed is ±{half_width(widest):.1f} (seed {seed}, {widest['stage']}, {widest['task']} {widest['metric']}, "
            f"{widest['n']} held-out episodes; every one in `seed<k>/report/README.md`).",
            "",
        ]
    text = "\n".join(
        [
            f"# proactive-rl demo over seeds {seeds}",
            "",
            f"Run {meta['date']} on {meta['machine']}; total wall time {meta['wall_s']:.0f} s. Command: `{meta['command']}`",
            "",
            f"Held-out scores after each stage, mean ± sd over {len(runs)} seeds (each seed: its own model init, "
            "synthetic world and training; per-seed reports in `seed<k>/report/`).",
            "",
            seeds_table(runs),
            "",
            *sure,
            "Which directions and claims hold in which seed, and pooled over the seeds (values: this stage vs the one "
            "compared; a claim: the gain [95 % CI], which holds when the interval's lower bound is above 0):",
            "",
            directions_table(runs, trained_tasks, per_seed, gains),
            "",
            *([note, ""] if note else []),
            *(
                [
                    "Each gain pooled over the seeds (the mean of the seeds' differences) with its 95 % interval: "
                    "stratified bootstrap, each seed's held-out items resampled within that seed (docs/spec.md §15; "
                    "also in `comparisons.json`):",
                    "",
                    comparisons_table(gains),
                    "",
                ]
                if gains
                else []
            ),
        ]
    )
    path.write_text(text)
    return path
