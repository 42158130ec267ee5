"""What the demo should show, checked on its own table: the direction of each stage's effect on held-out scores.

- SFT above the untrained model on PRS-B of every streaming task it trains (docs/spec.md §4) and on PAUC (§5);
- streaming GRPO at or above SFT on overall PRS-B, with PRS-U at most `PRS_U_SLACK` points below SFT (§7);
- suggestion GRPO above SFT on MCQA accuracy (§6);
- the final model (after suggestion GRPO) keeping PRS-B >= `KEEP` x the streaming-GRPO row on every task, and
  PAUC >= `KEEP` x the streaming-GRPO row.

`claims` checks what the demo claims, each a gain whose 95 % interval (`proactive_rl.demo.comparisons`, docs/spec.md
§15) must lie above 0 -- the bounds decide, not the point: SFT and the final model above the blind schedule fitted
on the training split (docs/spec.md §14) on every streaming task and on PAUC (where the final model's does not hold,
the reports say why: `proactive_rl.demo.pauc_floor`), swapped frames lowering the final model's PRS-B on every task
and its MCQA accuracy, streaming GRPO above SFT on the PRS-B of the streaming tasks. Two point checks stay, where no
per-item scores exist: the blind schedule at most `BLIND_MAX` PRS-B (so that seeing has room to show), and the final
MCQA accuracy `MCQA_OVER_BLIND` points above the image-blind policy.

A smoke run (``--quick``) trains a few steps on a few episodes: its scores say nothing about these directions, so
it checks only what it can show (`smoke_checks`): every stage ran and was evaluated, and its scores are in range.

Each check is ``(name, holds, detail)``; a check whose stages did not run holds ``None`` (not evaluated).
"""

from __future__ import annotations

from typing import Any

from proactive_rl.demo.comparisons import BLIND, SWAPPED

PRS_U_SLACK = 5.0
KEEP = 0.9
BLIND_MAX = 65.0
MCQA_OVER_BLIND = 15.0
#: the claim whose failure the reports explain beside the table (`proactive_rl.demo.pauc_floor`)
PAUC_CLAIM = "final > blind schedule on PAUC"
SMOKE_NOTE = (
    "SMOKE RUN (--quick): a few steps on a few episodes per stage; the scores are not meaningful, and only that every "
    "stage ran and was evaluated is checked"
)
# how a check's outcome is written in the report tables
MARK = {True: "yes", False: "**no**", None: "not run"}


def _metrics(stages: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["key"]: s["metrics"] for s in stages if s.get("metrics") is not None}


def directions(stages: list[dict[str, Any]], trained_tasks: tuple[str, ...]) -> list[tuple[str, bool | None, str]]:
    """The checks of the module docstring on one run's stages (`trained_tasks`: the tasks SFT trains)."""
    m = _metrics(stages)
    un, sft, grpo, sug = (m.get(k) for k in ("untrained", "sft", "grpo_streaming", "grpo_suggestion"))
    tasks = [k.split("/")[0] for k in (sft or {}) if k.endswith("/prs_b")]
    checks: list[tuple[str, bool | None, str]] = []

    def add(name: str, ok: bool | None, detail: str) -> None:
        checks.append((name, ok, detail))

    def v(row, key):
        return (row or {}).get(key) or 0.0

    both = un is not None and sft is not None
    for task in [t for t in tasks if t in trained_tasks]:
        a, b = v(un, f"{task}/prs_b"), v(sft, f"{task}/prs_b")
        add(f"SFT > untrained on {task} PRS-B", (b > a) if both else None, f"{b:.1f} vs {a:.1f}")
    a, b = v(un, "pauc"), v(sft, "pauc")
    add("SFT > untrained on PAUC", (b > a) if both else None, f"{b:.1f} vs {a:.1f}")
    both = sft is not None and grpo is not None
    a, b = v(sft, "prs_b"), v(grpo, "prs_b")
    add("streaming GRPO >= SFT on PRS-B", (b >= a) if both else None, f"{b:.1f} vs {a:.1f}")
    a, b = v(sft, "prs_u"), v(grpo, "prs_u")
    add(
        f"streaming GRPO PRS-U >= SFT - {PRS_U_SLACK:g}",
        (b >= a - PRS_U_SLACK) if both else None,
        f"{b:.1f} vs {a:.1f}",
    )
    both = sft is not None and sug is not None
    a, b = v(sft, "acc"), v(sug, "acc")
    add("suggestion GRPO > SFT on MCQA acc", (b > a) if both else None, f"{b:.1f} vs {a:.1f}")
    both = grpo is not None and sug is not None
    for task in tasks:
        a, b = v(grpo, f"{task}/prs_b"), v(sug, f"{task}/prs_b")
        add(
            f"final keeps {task} PRS-B >= {KEEP:g} x streaming GRPO",
            (b >= KEEP * a) if both else None,
            f"{b:.1f} vs {a:.1f}",
        )
    a, b = v(grpo, "pauc"), v(sug, "pauc")
    add(f"final keeps PAUC >= {KEEP:g} x streaming GRPO", (b >= KEEP * a) if both else None, f"{b:.1f} vs {a:.1f}")
    return checks


def claims(
    stages: list[dict[str, Any]], gains: list[dict[str, Any]], points: bool = True
) -> list[tuple[str, bool | None, str]]:
    """The claims of the module docstring on one run's stages and its comparison rows (`gains`: one seed's paired
    rows or the seeds' pooled ones); empty when the evaluation reported no blind row. A claim holds when its row's
    ``ci_low`` is above 0; without its row (a stage that did not run) it is not evaluated. ``points=False`` leaves
    out the two point checks (pooled rows say nothing about one seed's points)."""
    m = _metrics(stages)
    blind = next((row for row in m.values() if row.get("blind_prs_b") is not None), None)
    if blind is None:
        return []
    tasks = [k.split("/")[0] for k in blind if k.endswith("/blind_prs_b")]
    rows = {(r["a"], r["b"], r["metric"], r["task"]): r for r in gains}
    checks: list[tuple[str, bool | None, str]] = []

    def gain(name: str, a: str, b: str, metric: str, task: str) -> None:
        r = rows.get((a, b, metric, task))
        detail = "–" if r is None else f"{r['diff']:+.1f} [{r['ci_low']:+.1f}, {r['ci_high']:+.1f}]"
        checks.append((name, None if r is None else r["ci_low"] > 0, detail))

    for task in tasks if points else []:
        b = blind[f"{task}/blind_prs_b"]
        checks.append((f"blind schedule <= {BLIND_MAX:g} on {task} PRS-B", b <= BLIND_MAX, f"{b:.1f}"))
    for task in tasks:
        gain(f"SFT > blind schedule on {task} PRS-B", "sft", BLIND, "prs_b", task)
    for task in tasks:
        gain(f"final > blind schedule on {task} PRS-B", "grpo_suggestion", BLIND, "prs_b", task)
    gain("SFT > blind schedule on PAUC", "sft", BLIND, "pauc", "all")
    gain(PAUC_CLAIM, "grpo_suggestion", BLIND, "pauc", "all")
    for task in tasks:
        gain(
            f"swapped frames lower the final {task} PRS-B",
            "grpo_suggestion",
            f"grpo_suggestion {SWAPPED}",
            "prs_b",
            task,
        )
    gain("streaming GRPO > SFT on PRS-B (streaming tasks)", "grpo_streaming", "sft", "prs_b", "all")
    if points:
        a, b = (m.get("grpo_suggestion") or {}).get("acc"), blind.get("blind_acc")
        ok = None if a is None or b is None else a >= b + MCQA_OVER_BLIND
        checks.append(
            (f"final MCQA acc >= image-blind + {MCQA_OVER_BLIND:g}", ok, "–" if ok is None else f"{a:.1f} vs {b:.1f}")
        )
    gain("swapped images lower the final MCQA acc", "grpo_suggestion", f"grpo_suggestion {SWAPPED}", "acc", "all")
    return checks


def smoke_checks(stages: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """What a smoke run shows: each stage ran and was evaluated (``None``: not selected), and every evaluated score
    that is a percentage (PRS-U / PRS-B, PAUC, MCQA acc; not the vision gains, differences) lies in 0-100."""
    checks: list[tuple[str, bool | None, str]] = []
    for stage in stages:
        status = stage.get("status", "")
        ran = None if status.startswith("not run: not selected") else status == "ok"
        checks.append((f"{stage['name']} ran and was evaluated", ran, status))
    scores = [
        (stage["name"], key, value)
        for stage in stages
        for key, value in (stage.get("metrics") or {}).items()
        if key.split("/")[-1].endswith(("prs_u", "prs_b", "pauc", "acc")) and "vision_gain" not in key
    ]
    outside = [f"{name} {key} {value}" for name, key, value in scores if value is not None and not 0 <= value <= 100]
    checks.append(
        ("every score is in 0-100", not outside if scores else None, "; ".join(outside) or f"{len(scores)} scores")
    )
    return checks


def checks_markdown(checks: list[tuple[str, bool | None, str]]) -> str:
    lines = [
        "| direction | holds | values (this stage vs the one compared; a claim: the gain [95 % CI]) |",
        "|---|---|---|",
    ]
    lines += [f"| {name} | {MARK[ok]} | {detail} |" for name, ok, detail in checks]
    return "\n".join(lines)
