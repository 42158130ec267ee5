"""The demo's report: the before/after table (markdown), a metric-by-stage bar chart, and episode timelines
showing what each stage's model said and when, against the targets."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

# After the per-task PRS columns: (column header, metric key); PRS and PAUC are × 100 (docs/spec.md §4, §5), acc × 100 and
# ps in turns (docs/spec.md §6).
OVERALL = [
    ("PRS-U", "prs_u"),
    ("PRS-B", "prs_b"),
    ("PAUC ω=.5 (rule)", "pauc"),
    ("MCQA acc", "acc"),
    ("MCQA ps", "ps"),
]


def columns(stages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """PRS-U / PRS-B of each task found in the stages' metrics (in order of appearance), then `OVERALL`."""
    tasks: list[str] = []
    for stage in stages:
        for key in stage.get("metrics") or {}:
            if key.endswith("/prs_b") and key.split("/")[0] not in tasks:
                tasks.append(key.split("/")[0])
    return [(f"{t} PRS-{m}", f"{t}/prs_{m.lower()}") for t in tasks for m in ("U", "B")] + OVERALL


BLIND_ROW = "blind schedule (fitted on train)"


def blind_stage(stages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The frame-blind row: the best schedule (MCQA: answer policy) that never looks at the frames, fitted on the
    training split and scored on the held-out one (docs/spec.md §14). It does not depend on the model, so it is read
    from the first evaluated stage; `None` when no stage reported it."""
    for stage in stages:
        metrics = stage.get("metrics") or {}
        if metrics.get("blind_prs_b") is not None:
            row = {k.replace("blind_", ""): v for k, v in metrics.items() if "blind_" in k}
            return {"key": "blind", "name": BLIND_ROW, "status": "ok", "metrics": row}
    return None


def with_blind(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stages, after the blind row when there is one (what the tables show)."""
    blind = blind_stage(stages)
    return ([blind] if blind else []) + list(stages)


def looks_table(stages: list[dict[str, Any]]) -> str:
    """Markdown: per stage and task, PRS-B on the episodes' own frames, with the frames swapped for another episode's,
    and the difference (``vision_gain``); the same for PAUC and MCQA accuracy. Empty when nothing was swapped."""
    tasks = [k.split("/")[0] for _, k in columns(stages) if k.endswith("/prs_b")]
    groups = [(f"{t} PRS-B", f"{t}/prs_b") for t in tasks] + [("PAUC", "pauc"), ("MCQA acc", "acc")]
    ran = [s for s in stages if s.get("metrics")]
    groups = [g for g in groups if any(s["metrics"].get(f"{g[1]}_swap") is not None for s in ran)]
    if not groups:
        return ""
    header = ["stage"] + [f"{name} {what}" for name, _ in groups for what in ("own", "swap", "gain")]
    rows = []
    for stage in ran:
        m, cells = stage["metrics"], []
        for _, key in groups:
            own, swap = m.get(key), m.get(f"{key}_swap")
            gain = own - swap if own is not None and swap is not None else None
            cells += [_cell(own), _cell(swap), _cell(gain)]
        rows.append([stage["name"], *cells])
    return _markdown(header, rows)


def timing_table(stages: list[dict[str, Any]]) -> str:
    """Markdown: per stage and task, PRS-B, the timing-only PRS-B (every response's words counted right,
    ``prs_b_timing``, docs/spec.md §4) and their difference, what wrong words cost. Empty without timing scores."""
    tasks, ran = _tasks_with(stages, "prs_b_timing")
    if not tasks:
        return ""
    header = ["stage"] + [f"{t} PRS-B{what}" for t in tasks for what in ("", " timing", " words cost")]
    rows = []
    for stage in ran:
        m, cells = stage["metrics"], []
        for t in tasks:
            scored, timing = m.get(f"{t}/prs_b"), m.get(f"{t}/prs_b_timing")
            cost = timing - scored if scored is not None and timing is not None else None
            cells += [_cell(scored), _cell(timing), _cell(cost)]
        rows.append([stage["name"], *cells])
    return _markdown(header, rows)


def answers_table(stages: list[dict[str, Any]]) -> str:
    """Markdown: per stage and task, how the held-out targets were answered under PRS-B matching (docs/spec.md §4,
    §12): missed (no output matched to it), repeated (more than one: the target's score is divided among them), the
    malformed outputs of all its outputs (docs/spec.md §13: matched like any response and credited 0, so a model
    whose outputs are all malformed misses no target yet scores 0, as a silent one) and the median latency of each
    target's best response (negative: early). What a stage fixes or breaks, where PRS-B only says by how much. Empty
    without these counts."""
    tasks, ran = _tasks_with(stages, "num_targets")
    if not tasks:
        return ""
    targets = {t: next(n for s in ran if (n := s["metrics"].get(f"{t}/num_targets")) is not None) for t in tasks}
    header = ["stage"] + [
        f"{t} ({targets[t]} targets) {what}"
        for t in tasks
        for what in ("missed", "repeated", "malformed", "latency s")
    ]

    def cells(m: dict[str, Any], t: str) -> list[str]:
        bad, outputs = m.get(f"{t}/malformed_outputs"), m.get(f"{t}/outputs")
        malformed = "–" if bad is None or outputs is None else f"{bad} of {outputs}"
        return [_cell(m.get(f"{t}/missed_targets")), _cell(m.get(f"{t}/repeated_targets")), malformed,
                _cell(m.get(f"{t}/median_latency_b"))]  # fmt: skip

    rows = [[s["name"], *(c for t in tasks for c in cells(s["metrics"], t))] for s in ran]
    return _markdown(header, rows)


def _tasks_with(stages: list[dict[str, Any]], key: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The PRS tasks (table order) for which some evaluated stage reports ``<task>/<key>``, and the evaluated stages."""
    ran = [s for s in stages if s.get("metrics")]
    tasks = [k.split("/")[0] for _, k in columns(stages) if k.endswith("/prs_b")]
    return [t for t in tasks if any(s["metrics"].get(f"{t}/{key}") is not None for s in ran)], ran


def _cell(value) -> str:
    return "–" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def table_rows(stages: list[dict[str, Any]]) -> list[list[str]]:
    """One row per stage: its name, then the metrics, or a single ``not run: <reason>`` cell."""
    cols = columns(stages)
    rows = []
    for stage in stages:
        if stage.get("metrics") is None:
            rows.append([stage["name"], f"**{stage['status']}**"] + [""] * (len(cols) - 1))
        else:
            rows.append([stage["name"]] + [_cell(stage["metrics"].get(key)) for _, key in cols])
    return rows


def markdown_table(stages: list[dict[str, Any]]) -> str:
    return _markdown(["stage"] + [name for name, _ in columns(stages)], table_rows(with_blind(stages)))


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def console_table(stages: list[dict[str, Any]]) -> str:
    """A fixed-width table for the terminal (a failed or skipped stage shows its reason across the row)."""
    stages = with_blind(stages)
    header = ["stage"] + [name for name, _ in columns(stages)]
    widths = [max(len(header[0]), *(len(s["name"]) for s in stages))] + [max(len(h), 6) for h in header[1:]]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in enumerate(zip(header, widths)))]
    for stage, row in zip(stages, table_rows(stages)):
        if stage.get("metrics") is None:
            lines.append(row[0].ljust(widths[0]) + "  " + stage["status"])
        else:
            lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))))
    return "\n".join(lines)


def _pyplot():
    # deferred: optional extra
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


#: the blind row's bars (grey, hatched) and the stages' (distinct colours, none of them grey)
BLIND_COLOR = "#9e9e9e"
STAGE_COLORS = ("#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def plot_stages(stages: list[dict[str, Any]], path: Path) -> Path:
    """Grouped bars: one group per metric (PRS-B per task, PRS-U/B overall, PAUC, acc), one bar per stage (the blind
    row grey and hatched, each stage its own colour); a stage with no score in a group has no bar there, "n/a"."""
    plt = _pyplot()
    keys = [(n, k) for n, k in columns(stages) if k != "ps" and not k.endswith("/prs_u")]
    ran = [s for s in stages if s.get("metrics") is not None]
    fig, ax = plt.subplots(figsize=(12, 4.6))
    width = 0.8 / max(1, len(ran))
    colors = iter(STAGE_COLORS * (1 + len(ran) // len(STAGE_COLORS)))
    for i, stage in enumerate(ran):
        blind = stage.get("key") == "blind"
        style = {"color": BLIND_COLOR, "hatch": "//", "edgecolor": "white"} if blind else {"color": next(colors)}
        values = [stage["metrics"].get(k) for _, k in keys]
        xs = [j + (i - (len(ran) - 1) / 2) * width for j in range(len(keys))]
        scored = [(x, v) for x, v in zip(xs, values) if v is not None]  # no bar where the stage has no score
        bars = ax.bar([x for x, _ in scored], [v for _, v in scored], width, label=stage["name"], **style)
        for bar, (_, value) in zip(bars, scored):
            ax.annotate(
                f"{value:.0f}",
                (bar.get_x() + bar.get_width() / 2, value),
                ha="center",
                va="bottom",
                fontsize=7,
                xytext=(0, 1),
                textcoords="offset points",
            )
        for x, value in zip(xs, values):
            if value is None:
                ax.annotate("n/a", (x, 0), ha="center", va="bottom", fontsize=6, color="grey", rotation=90)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([n.replace(" (rule)", "\n(rule)").replace(" PRS", "\nPRS") for n, _ in keys], fontsize=9)
    ax.set_ylabel("score (× 100)")
    ax.set_ylim(0, max(105, *(b.get_height() + 8 for b in ax.patches)) if ax.patches else 105)
    ax.set_title("Held-out metrics after each stage of the demo")
    ax.legend(loc="upper left", fontsize=9, ncol=len(ran))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_timeline(episode, stages: list[dict[str, Any]], path: Path) -> Path:
    """One episode: a row per stage with the model's responses (markers, labelled with their text) at their times,
    the targets as vertical lines (labelled) and windows as bands."""
    plt = _pyplot()
    ran = [s for s in stages if s.get("metrics") is not None]
    fig, ax = plt.subplots(figsize=(11, 1.5 + 0.75 * len(ran)))
    for target in episode.targets:
        if target.window is not None:
            ax.axvspan(*target.window, color="#ffd54f", alpha=0.35, lw=0)
        ax.axvline(target.time, color="#e65100", lw=1.5)
        ax.annotate(
            f"target: {target.text}",
            (target.time, len(ran) - 0.45),
            fontsize=8,
            color="#e65100",
            xytext=(3, 0),
            textcoords="offset points",
            ha="left",
        )
    for row, stage in enumerate(reversed(ran)):
        responses = stage.get("predictions", {}).get(episode.id, [])
        ax.axhline(row, color="#e0e0e0", lw=0.8, zorder=0)
        if responses:
            ax.scatter([t for t, _ in responses], [row] * len(responses), s=28, color="#1f77b4", zorder=3)
        for t, text in responses[:12]:
            label = text if len(text) <= 14 else text[:13] + "…"
            ax.annotate(label, (t, row), fontsize=7, xytext=(0, 6), textcoords="offset points", ha="center")
        if not responses:
            ax.annotate(
                "(silent throughout)", (0, row), fontsize=7, color="#757575", xytext=(2, 4), textcoords="offset points"
            )
    ax.set_yticks(range(len(ran)))
    ax.set_yticklabels([s["name"] for s in reversed(ran)], fontsize=9)
    ax.set_ylim(-0.6, len(ran) - 0.1)
    ax.set_xlim(-0.5, episode.duration + 0.5)
    ax.set_xlabel("time (s) — one decision per frame; dots: what the model said; orange: targets")
    title = textwrap.fill(f"{episode.id} ({episode.task}): {episode.instruction}", 130)
    ax.set_title(title, fontsize=9, loc="left")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(
    out: Path,
    stages: list[dict[str, Any]],
    timeline_episodes: list,
    meta: dict[str, Any],
    checks: str = "",
    gains: list[dict[str, Any]] | None = None,
) -> dict[str, Path]:
    """``<out>/report/``: ``README.md`` (table, timings, what each stage ran), ``metrics_by_stage.png``,
    ``timeline_<id>.png``, ``comparisons.json`` (every gain with its interval, `proactive_rl.demo.comparisons`;
    `gains` when already computed); the per-stage evaluation reports stay in ``<out>/eval/<stage>/``."""
    # deferred: the interval module imports scipy
    from proactive_rl.demo.comparisons import (
        comparisons,
        comparisons_table,
        half_width,
        means_table,
        task_means,
        write_comparisons,
    )

    report = out / "report"
    report.mkdir(parents=True, exist_ok=True)
    files = {"stages_plot": plot_stages(with_blind(stages), report / "metrics_by_stage.png")}
    for episode in timeline_episodes:
        files[f"timeline_{episode.id}"] = plot_timeline(episode, stages, report / f"timeline_{episode.id}.png")
    looks, timing, answers = looks_table(stages), timing_table(stages), answers_table(stages)
    gains = comparisons(out, stages) if gains is None else gains
    files["comparisons"] = write_comparisons(report / "comparisons.json", gains)
    means = task_means(out, stages)
    widest = max(means, key=half_width) if means else None
    lines = [
        "# proactive-rl demo report",
        "",
        f"Run {meta['date']} on {meta['machine']}; total wall time {meta['wall_s']:.0f} s. Command: `{meta['command']}`",
        "",
        "Held-out scores (test split of the synthetic world) after each stage. PRS-U / PRS-B (docs/spec.md §4) per task and "
        "overall, × 100; PAUC at ω = 0.5 with the rule judge (token-F1, docs/spec.md §5), × 100; MCQA accuracy (× 100) and "
        "proactive suggestions per episode `ps` on the held-out ask-for-help environments (docs/spec.md §6).",
        "",
        markdown_table(stages),
        "",
        *(
            [
                "How sure each task mean is: PRS-U / PRS-B per task with its 95 % interval, bootstrap over the "
                f"held-out episodes (docs/spec.md §15); the widest is ±{half_width(widest):.1f} ({widest['stage']}, "
                f"{widest['task']} {widest['metric']}):",
                "",
                means_table(means),
                "",
            ]
            if widest
            else []
        ),
        *(
            [
                f'The "{BLIND_ROW}" row never looks at the frames: per task, the fixed list of (time or fraction of '
                "the episode, text) responses that scores best on the training split, scored on the held-out "
                "episodes (MCQA: the fixed answer policy that scores best; docs/spec.md §14). A score at or below it "
                "is a timing prior, not seeing.",
                "",
            ]
            if blind_stage(stages)
            else []
        ),
        *(
            [
                "Does the model look? Each stage's score on the held-out episodes' own frames, with each episode's "
                "frames swapped for another held-out episode's of the same task (instruction, targets and times "
                "unchanged), and the difference (vision gain):",
                "",
                looks,
                "",
            ]
            if looks
            else []
        ),
        *(
            [
                "When versus what: each stage's PRS-B, the same with every response's words counted right (timing "
                "only: when the model spoke, whatever it said; docs/spec.md §4), and the difference, what wrong words "
                "cost (e.g. a warning on time in another task's words):",
                "",
                timing,
                "",
            ]
            if timing
            else []
        ),
        *(
            [
                "How each stage answers the held-out targets (PRS-B matching, docs/spec.md §4): targets missed (no "
                "output matched to them), repeated (more than one: PRS-B divides the target's score among them), the "
                "malformed outputs of all the stage's outputs (docs/spec.md §13: a malformed output is matched like a "
                "response and credited 0, so a model whose outputs are all malformed misses no target, repeats "
                "them all and scores 0, as a silent model does) and the median latency of each target's best "
                "response in seconds (negative: early):",
                "",
                answers,
                "",
            ]
            if answers
            else []
        ),
        *(
            [
                "Each gain with its 95 % interval, paired bootstrap over the held-out items both rows scored "
                "(docs/spec.md §15; also in `comparisons.json`): a stage against the previous stage, PRS and MCQA "
                "accuracy on own against swapped frames:",
                "",
                comparisons_table(gains),
                "",
            ]
            if gains
            else []
        ),
        *(["What the demo should show (`proactive_rl/demo/checks.py`):", "", checks, ""] if checks else []),
        "| stage | what ran | train s | eval s |",
        "|---|---|---|---|",
    ]
    for stage in stages:
        lines.append(
            f"| {stage['name']} | {stage.get('what', '')} | {_cell(stage.get('train_s'))} | {_cell(stage.get('eval_s'))} |"
        )
    lines += ["", "![metrics by stage](metrics_by_stage.png)", ""]
    for episode in timeline_episodes:
        lines += [f"![timeline {episode.id}](timeline_{episode.id}.png)", ""]
    lines += [
        "Per-stage evaluation reports (tables, timelines, PAUC curves): "
        + ", ".join(f"[{s['name']}](../eval/{s['key']}/)" for s in stages if s.get("metrics") is not None),
        "",
    ]
    (report / "README.md").write_text("\n".join(lines))
    files["markdown"] = report / "README.md"
    return files
