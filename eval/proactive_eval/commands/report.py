"""Reports: results JSON, markdown tables per benchmark and task, and plots (docs/spec.md §4, §5).

Everything is written atomically (a temp file renamed into place), so a report folder never holds half a
file. Plots use matplotlib's Agg backend, imported only when a plot is drawn:

- ``pauc_curves.png``: the judged-score step curve of each turn (ProactiveVideoQA Fig. 3): the curve starts
  at 0.5, steps to ``level - 1`` at each kept prediction and holds to the end of the reply span; the shaded
  area over ``(v - u) · 2`` is the turn's PAUC at ω = 0, the dashed curve is the ω = 0.5 view;
- ``timelines.png``: per episode, responses (dots) against target times (lines) and windows (bands);
- ``responses_per_target.png``: how many responses each target received.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from proactive_eval.benchmarks.p3i.metric import PRSReport
from proactive_eval.benchmarks.pvqa.metric import PAUCResult, parse_judge_level
from proactive_eval.commands.blind import fit_label
from proactive_eval.common.malformed import malformed_warning
from proactive_eval.common.speed import add_speed, speed_cells
from proactive_eval.episodes import episode_group
from proactive_eval.file_modes import default_file_mode
from proactive_eval.predictions import atomic_write_text
from proactive_rewards import as_response

#: Bars of the responses-per-target histogram (the last one: that many or more).
HISTOGRAM_BINS = 20


def build_results(
    pauc: PAUCResult | None = None,
    prs: PRSReport | None = None,
    meta: dict[str, Any] | None = None,
    failures: list[dict[str, str]] | None = None,
    episodes: Sequence | None = None,
    predictions: dict[str, Sequence] | None = None,
    step_seconds: dict[str, Sequence[float]] | None = None,
) -> dict[str, Any]:
    """The results JSON: ``{"meta", "pauc", "prs", "failures"}`` (numbers × 100 as in the papers).

    `failures` are the episodes that could not be played, ``{"id", "group", "reason"}`` each (see
    :func:`failure_rows`); every summary row (overall and per group) then says ``failed_episodes`` and
    ``coverage`` = scored / (scored + failed), so no number is read without knowing what it covers.

    With the scored `episodes` and their `predictions`, every row also gets the speed keys of
    `proactive_eval.common.speed.speed_row` (frames/s and per-frame latency from `step_seconds`, episode id → the
    seconds of each frame's policy step, `None` without a model run; the event → response time).
    """
    out: dict[str, Any] = {"meta": dict(meta or {})}
    failures = list(failures or [])
    if pauc is not None:
        out["pauc"] = _with_coverage(pauc.summary(), "num_videos", [f for f in failures if _is_pvqa(f)])
    if prs is not None:
        out["prs"] = _with_coverage(prs.summary(), "num_episodes", [f for f in failures if not _is_pvqa(f)])
    out["failures"] = failures
    if episodes is not None and predictions is not None:
        for key, summary in (("pauc", pauc), ("prs", prs)):
            if summary is not None:
                played = [e for e in episodes if (e.task == "pvqa") == (key == "pauc")]
                add_speed(out[key], played, predictions, step_seconds, episode_group)
    return out


def failure_rows(failed: dict[str, str], episodes: Sequence) -> list[dict[str, str]]:
    """``{"id", "group", "reason"}`` per failed episode, in episode order."""
    return [{"id": e.id, "group": episode_group(e), "reason": failed[e.id]} for e in episodes if e.id in failed]


def _is_pvqa(failure: dict[str, str]) -> bool:
    return failure["group"].split(":")[0] == "pvqa"


def _with_coverage(summary: dict[str, Any], count_key: str, failures: list[dict[str, str]]) -> dict[str, Any]:
    def add(row: dict[str, Any], failed: int) -> None:
        row["failed_episodes"] = failed
        row["coverage"] = f"{row[count_key]}/{row[count_key] + failed}"

    add(summary["overall"], len(failures))
    groups = summary["groups"]
    for f in failures:
        if f["group"] not in groups:  # every episode of the group failed
            groups[f["group"]] = {count_key: 0}
    for name, row in groups.items():
        add(row, sum(f["group"] == name for f in failures))
    return summary


def _fmt(value, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def pauc_table(summary: dict[str, Any]) -> str:
    """Markdown PAUC table: one row per task/subset and an overall row (turn-weighted, official; × 100)."""
    omegas = [k.split("=", 1)[1] for k in summary["overall"] if k.startswith("omega=")]
    header = ["group", "coverage", "videos", "turns", "answered"] + [f"PAUC ω={o}" for o in omegas]
    header += ["video-avg ω=0.5" if "0.5" in omegas else f"video-avg ω={omegas[0]}", "unparseable", "malformed"]
    header += SPEED_HEADER
    video_key = "video_omega=0.5" if "0.5" in omegas else f"video_omega={omegas[0]}"
    rows = []
    for name, s in list(summary["groups"].items()) + [("**overall**", summary["overall"])]:
        for label, r in [(name, s)] + [(f"↳ {lab}", r) for lab, r in _looks(summary, name)]:
            row = [label, r.get("coverage"), r.get("num_videos"), r.get("num_turns"), r.get("answered_turns")]
            rows.append(
                row
                + [r.get(f"omega={o}") for o in omegas]
                + [r.get(video_key), r.get("unparseable"), r.get("malformed_outputs")]
                + _speed(summary, r, r is s)
            )
    return _table(header, rows)


def prs_table(summary: dict[str, Any]) -> str:
    """Markdown PRS table: one row per task and an overall row (× 100; latency in seconds)."""
    header = ["task", "coverage", "targets", "PRS-U", "PRS-B", "PRS-U no-pen.", "PRS-B no-pen.", "PRS-B timing"]
    header += ["resp/target (U)", "resp/target (B)", "missed (B)", "repeated (B)", "median latency B (s)"]
    header += ["malformed", "content scorer"] + SPEED_HEADER
    keys = ["num_targets", "prs_u", "prs_b", "prs_u_nopenalty", "prs_b_nopenalty", "prs_b_timing", "resp_per_target_u"]
    keys += ["resp_per_target_b", "missed_targets", "repeated_targets", "median_latency_b", "malformed_outputs"]
    keys += ["content_scorer"]
    rows = []
    for name, s in list(summary["groups"].items()) + [("**overall**", summary["overall"])]:
        rows.append([name, s.get("coverage", s["num_episodes"])] + [s.get(k) for k in keys] + _speed(summary, s))
        rows += [
            [f"↳ {label}", row.get("num_episodes")] + [row.get(k) for k in keys] + _speed(summary, row, False)
            for label, row in _looks(summary, name)
        ]
    return _table(header, rows)


SPEED_HEADER = ["frames/s", "latency median (s)", "latency p95 (s)", "event→response median (s)"]


def _speed(summary: dict[str, Any], row: dict[str, Any], own: bool = True) -> list[Any]:
    """A row's speed cells (docs/evaluation.md): the model's own rows show its timings, or ``n/a (no model
    run)`` for scored predictions; blind and counterfactual rows show their event → response time only."""
    if not own:
        return [None, None, None, row.get("event_to_response_median_s")]
    return speed_cells(row, bool(summary.get("timed")))


def _looks(summary: dict[str, Any], name: str) -> list[tuple[str, dict[str, Any]]]:
    """The blind-schedule and counterfactual rows under the row `name` (docs/spec.md §14), when the summary has
    them: ``(label, row)``, the row holding the metric keys it was scored on."""
    group = "overall" if name == "**overall**" else name
    out = []
    blind = summary.get("blind")
    if blind:
        row = blind["overall"] if group == "overall" else blind["groups"].get(group)
        if row is not None:
            out.append(("blind schedule", row))
    for kind, entry in (summary.get("counterfactual") or {}).items():
        row = entry["overall"] if group == "overall" else entry["groups"].get(group)
        if row is not None:
            out.append((f"frames {'swapped' if kind == 'swap' else 'frozen'} ({kind})", row))
    return out


def _row(summary: dict[str, Any] | None, group: str) -> dict[str, Any]:
    """The ``overall`` row or one group's row of a summary (``{}`` when absent)."""
    if not summary:
        return {}
    return summary["overall"] if group == "overall" else summary["groups"].get(group, {})


def looks_table(summary: dict[str, Any], keys: tuple[str, ...]) -> str:
    """Does the model look? Per group: each metric, its blind-schedule value, its value with swapped frames and
    the vision gain (metric - metric_swap); empty when the summary has neither (docs/spec.md §14)."""
    blind = summary.get("blind")
    swap = (summary.get("counterfactual") or {}).get("swap")
    if not blind and not swap:
        return ""
    header = ["group"]
    for k in keys:
        header += [k, f"blind {k}"] + ([f"{k} swap", f"vision gain {k}"] if swap else [])
    rows = []
    for group in [*summary["groups"], "overall"]:
        row = ["**overall**" if group == "overall" else group]
        for k in keys:
            row += [_row(summary, group).get(k), _row(blind, group).get(k)]
            if swap:
                row += [_row(swap, group).get(k), _row(swap["vision_gain"], group).get(k)]
        rows.append(row)
    return _table(header, rows)


def markdown_report(results: dict[str, Any]) -> str:
    """The tables of a results dict as one markdown document."""
    parts = ["# proactive-eval report", ""]
    meta = results.get("meta", {})
    for key in ("episodes", "predictions", "judge", "created"):
        if key in meta:
            parts.append(f"- {key}: `{meta[key]}`")
    if "responses_outside_video" in meta:  # what the predictions held that was not scored (docs/evaluation.md)
        parts.append(
            f"- not scored from the predictions: {meta.get('prediction_ids_matching_no_episode', 0)} ids matching no "
            f"episode, {meta.get('prediction_duplicates_ignored', 0)} records repeating an id (the first is scored); "
            f"{meta['responses_outside_video']} responses outside their video's [0, duration], scored as malformed"
        )
    # the ids matching no episode of the whole run (each metric's summary sees only its own episodes' ids)
    unknown = meta.get(
        "prediction_ids_matching_no_episode",
        sum(results[k].get("unknown_prediction_ids", 0) for k in ("pauc", "prs") if k in results),
    )
    if "pauc" in results:
        p = results["pauc"]
        parts += ["", "## PAUC (ProactiveVideoQA, docs/spec.md §5), × 100, turn-weighted", "", pauc_table(p)]
        parts.append(f"\njudge prompts: {p['judge_calls']}; prediction ids matching no episode: {unknown}")
        parts += _warnings(p)
        looks = looks_table(p, tuple(k for k in p["overall"] if k.startswith("omega=")))
        if looks:
            parts += ["", "### Does the model look? (docs/spec.md §14)", "", looks, "", _blind_note(p)]
    if "prs" in results:
        p = results["prs"]
        parts += ["", "## PRS (P³I, docs/spec.md §4), × 100", "", prs_table(p)]
        parts.append(f"\nepisodes without targets (not scored): {p['episodes_without_targets']}")
        if "pauc" not in results:
            parts.append(f"prediction ids matching no episode: {unknown}")
        parts += _warnings(p)
        looks = looks_table(p, ("prs_u", "prs_b"))
        if looks:
            parts += ["", "### Does the model look? (docs/spec.md §14)", "", looks, "", _blind_note(p)]
    failures = results.get("failures") or []
    if failures:
        parts += ["", f"## Episodes not played ({len(failures)}; not scored, see coverage)", ""]
        parts += [f"- `{f['id']}` ({f['group']}): {f['reason']}" for f in failures]
    return "\n".join(parts) + "\n"


def _warnings(summary: dict[str, Any]) -> list[str]:
    """The malformed-output warning of a metric's summary (`proactive_eval.common.malformed`), as report lines."""
    warning = malformed_warning(summary["overall"])
    return ["", f"**{warning}**"] if warning else []


def _blind_note(summary: dict[str, Any]) -> str:
    """Which blind schedules the row used and how they were fitted."""
    blind = summary.get("blind")
    if not blind:
        return "blind schedule: not fitted"
    lines = []
    for task, schedules in blind.get("schedules", {}).items():
        how = blind.get("fit", {}).get(task, "")
        fitted = fit_label(how)
        described = "; ".join(f"{metric}: {s['described']}" for metric, s in schedules.items())
        lines.append(f"- blind schedule of {task} ({fitted}): {described}")
    return "\n".join(lines)


def write_report(
    out_dir: str | Path,
    results: dict[str, Any],
    pauc: PAUCResult | None = None,
    prs: PRSReport | None = None,
    episodes: Sequence | None = None,
    predictions: dict[str, Sequence] | None = None,
    plots: bool = True,
    max_panels: int = 12,
) -> dict[str, Path]:
    """Write ``results.json``, ``report.md``, per-turn / per-episode details and the plots into `out_dir`.

    Returns:
        `dict[str, Path]`: what was written, by name.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {"results": out / "results.json", "report": out / "report.md"}
    atomic_write_text(written["results"], json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    atomic_write_text(written["report"], markdown_report(results))
    if pauc is not None:
        written["pauc_turns"] = out / "pauc_turns.jsonl"
        lines = (json.dumps(t.to_dict(), ensure_ascii=False) + "\n" for t in pauc.turns)
        atomic_write_text(written["pauc_turns"], "".join(lines))
    if prs is not None:
        written["prs_episodes"] = out / "prs_episodes.jsonl"
        lines = (json.dumps(e.to_dict(), ensure_ascii=False) + "\n" for e in prs.episodes)
        atomic_write_text(written["prs_episodes"], "".join(lines))
    if plots:
        if pauc is not None and pauc.turns:
            written["pauc_curves"] = plot_pauc_curves(pauc, out / "pauc_curves.png", max_panels)
        if episodes and predictions is not None:
            written["timelines"] = plot_timelines(episodes, predictions, out / "timelines.png", max_panels)
        counts = _responses_per_target(pauc, prs)
        if counts:
            written["responses_per_target"] = plot_responses_histogram(counts, out / "responses_per_target.png")
    return written


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend (matplotlib is the optional ``plots`` extra)."""
    # deferred: optional extra
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_figure(fig, path: Path) -> Path:
    """Write `fig` to the PNG `path` atomically (a temporary file, then renamed) and close it; returns `path`."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".png")
    os.close(fd)
    try:
        os.chmod(tmp, default_file_mode())  # mkstemp's 0o600 would hide the figure from the group (umask applies)
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
        fig.clf()
        # deferred: optional extra
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path


def _short(text: str, n: int = 28) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _step_xy(span, points, omega: float) -> tuple[list[float], list[float]]:
    u, v = span
    xs, ys = [u], [0.5]
    for t, y in sorted(points):
        xs.append(u + (1 - omega) * (t - u))
        ys.append(y)
    xs.append(v)
    ys.append(ys[-1])
    return xs, ys


def plot_pauc_curves(pauc: PAUCResult, path: str | Path, max_panels: int = 12) -> Path:
    """Judged-score step curves of up to `max_panels` turns, answered turns first (ProactiveVideoQA Fig. 3)."""
    plt = pyplot()
    turns = sorted(pauc.turns, key=lambda t: not t.kept)[:max_panels]
    cols = min(3, len(turns))
    rows = (len(turns) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.3 * rows), squeeze=False, layout="constrained")
    for ax in axes.flat[len(turns) :]:
        ax.axis("off")
    for ax, turn in zip(axes.flat, turns):
        u, v = turn.span
        xs, ys = _step_xy(turn.span, turn.points, 0.0)
        ax.fill_between(xs, ys, step="post", alpha=0.25, color="tab:blue", label="area (ω=0)")
        ax.step(xs, ys, where="post", color="tab:blue", lw=2)
        if 0.5 in pauc.omegas or 0 not in pauc.omegas:
            hx, hy = _step_xy(turn.span, turn.points, 0.5)
            ax.step(hx, hy, where="post", color="tab:orange", lw=1.5, ls="--", label="ω=0.5")
        kept_points = set(turn.points)
        for r, level in zip(turn.kept, turn.levels):
            level = parse_judge_level(level)
            if level is None:
                ax.plot(r.time, 0.5, "x", color="grey", ms=8)  # unparseable: no point
            elif (r.time, level - 1) in kept_points:
                ax.plot(r.time, level - 1, "o", color="tab:blue", ms=6)
            else:
                ax.plot(r.time, level - 1, "o", mfc="none", color="tab:red", ms=7)  # dropped (related rule)
        if turn.related is not None:
            ax.axvline(turn.related[1], color="tab:green", ls=":", lw=1.2, label="related end")
        ax.set_xlim(u, v)
        ax.set_ylim(-0.1, 2.15)
        ax.set_yticks([0, 0.5, 1, 2], ["0 (wrong)", "0.5", "1 (partial)", "2 (covered)"], fontsize=8)
        ax.set_xlabel("time (s)", fontsize=9)
        scores = "  ".join(f"ω={o}: {100 * s:.0f}" for o, s in turn.pauc.items())
        ax.set_title(f"{_short(turn.episode_id, 24)} · turn {turn.turn}\n{scores}", fontsize=9)
        ax.grid(alpha=0.3)
    # one key below the panels (markers added as empty series so every kind is listed)
    ax0 = axes.flat[0]
    ax0.plot([], [], "o", color="tab:blue", label="judged point")
    ax0.plot([], [], "o", mfc="none", color="tab:red", label="dropped (related rule)")
    ax0.plot([], [], "x", color="grey", label="unparseable judge answer")
    handles, labels = ax0.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8, frameon=False)
    fig.suptitle("PAUC: judged score of the cumulative answer over each reply span", fontsize=11)
    return save_figure(fig, path)


def plot_timelines(
    episodes: Sequence, predictions: dict[str, Sequence], path: str | Path, max_panels: int = 12
) -> Path:
    """One row per episode (up to `max_panels`): responses (dots, labelled) against targets and windows."""
    plt = pyplot()
    shown = list(episodes)[:max_panels]
    fig, axes = plt.subplots(len(shown), 1, figsize=(11, 1.5 * len(shown) + 0.8), squeeze=False, layout="constrained")
    for ax, episode in zip(axes[:, 0], shown):
        for target in episode.targets:
            if target.window is not None:
                ax.axvspan(*target.window, color="tab:green", alpha=0.15, lw=0)
            ax.axvline(target.time, color="tab:green", lw=1.5)
            ax.text(target.time, 0.92, _short(target.text, 18), fontsize=7, color="darkgreen", va="top")
        responses = [as_response(r) for r in predictions.get(episode.id, [])]
        ax.plot([r.time for r in responses], [0.35] * len(responses), "o", color="tab:blue", ms=5)
        for k, r in enumerate(responses[:40]):
            ax.text(r.time, 0.12 if k % 2 else 0.5, _short(r.text, 14), fontsize=6.5, color="navy", ha="center")
        ax.set_xlim(0, episode.duration)
        ax.set_ylim(0, 1)
        ax.set_yticks([])
        ax.set_ylabel(_short(episode.id, 16), rotation=0, ha="right", va="center", fontsize=8)
    axes[-1, 0].set_xlabel("time (s) — green: targets (bands: windows); blue: responses")
    fig.suptitle("Responses against targets", fontsize=11)
    return save_figure(fig, path)


def plot_responses_histogram(counts: dict[str, list[int]], path: str | Path) -> Path:
    """Histogram of responses per target, one bar series per source (e.g. PRS-B matching, PAUC span)."""
    # deferred: optional extra
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6.5, 3.8), layout="constrained")
    top = max(max(c) for c in counts.values() if c) if any(counts.values()) else 0
    top = min(top, HISTOGRAM_BINS)  # the last bar counts every target with more (a flood of responses stays 1 bar)
    width = 0.8 / max(1, len(counts))
    for k, (label, values) in enumerate(counts.items()):
        hist = np.bincount(np.minimum(np.asarray(values, dtype=int), top), minlength=top + 1)
        ax.bar([n + (k - (len(counts) - 1) / 2) * width for n in range(top + 1)], hist, width=width, label=label)
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    labels = [str(n) for n in range(top)] + [f"{top}+" if top == HISTOGRAM_BINS else str(top)]
    ax.set_xticks(range(top + 1), labels)
    ax.set_xlabel("responses per target")
    ax.set_ylabel("targets")
    ax.legend(fontsize=8)
    ax.set_title("0 = missed target; > 1 = redundant responses", fontsize=10)
    return save_figure(fig, path)


def _responses_per_target(pauc: PAUCResult | None, prs: PRSReport | None) -> dict[str, list[int]]:
    counts = {}
    if prs is not None and prs.episodes:
        counts["PRS-B matching"] = prs.responses_per_target("B")
        counts["PRS-U matching"] = prs.responses_per_target("U")
    if pauc is not None and pauc.turns:
        counts["PAUC reply span (kept)"] = [len(t.kept) for t in pauc.turns]
    return counts
