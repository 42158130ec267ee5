"""What the demo should show, checked on its own table: the direction of each stage's effect on held-out scores.

- SFT above the untrained model on PRS-B of every streaming task it trains (docs/spec.md §4) and on PAUC (§5);
- streaming GRPO at or above SFT on overall PRS-B, with PRS-U at most `PRS_U_SLACK` points below SFT (§7);
- suggestion GRPO above SFT on MCQA accuracy (§6);
- the final model (after suggestion GRPO) keeping PRS-B >= `KEEP` x the streaming-GRPO row on every task, and
  PAUC >= `KEEP` x the streaming-GRPO row.

`claims` checks what the demo claims against what a model that never looks reaches (docs/spec.md §14): the
blind schedule fitted on the training split (at most `BLIND_MAX` PRS-B, so that seeing has room to show), SFT
`SFT_OVER_BLIND` and the final model `FINAL_OVER_BLIND` points above it on every streaming task, swapping each
episode's frames for another's costing the final model `SWAP_DROP` points, streaming GRPO `RL_OVER_SFT` points
above SFT on the mean task PRS-B, and the final MCQA accuracy `MCQA_OVER_BLIND` points above the image-blind policy
with swapped images costing `MCQA_SWAP_DROP`.

A smoke run (``--quick``) trains a few steps on a few episodes: its scores say nothing about these directions, so
it checks only what it can show (`smoke_checks`): every stage ran and was evaluated, and its scores are in range.

Each check is ``(name, holds, detail)``; a check whose stages did not run holds ``None`` (not evaluated).
"""

from __future__ import annotations

from typing import Any

PRS_U_SLACK = 5.0
KEEP = 0.9
BLIND_MAX = 65.0
SFT_OVER_BLIND = 15.0
FINAL_OVER_BLIND = 25.0
SWAP_DROP = 20.0
RL_OVER_SFT = 5.0
MCQA_OVER_BLIND = 15.0
MCQA_SWAP_DROP = 10.0
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


def claims(stages: list[dict[str, Any]]) -> list[tuple[str, bool | None, str]]:
    """The checks against the blind schedule and the swapped frames (module docstring); empty when the evaluation
    reported no blind row."""
    m = _metrics(stages)
    sft, grpo, final = (m.get(k) for k in ("sft", "grpo_streaming", "grpo_suggestion"))
    blind = next((row for row in m.values() if row.get("blind_prs_b") is not None), None)
    if blind is None:
        return []
    tasks = [k.split("/")[0] for k in blind if k.endswith("/blind_prs_b")]
    checks: list[tuple[str, bool | None, str]] = []

    def get(row, key):
        return None if row is None else row.get(key)

    def add(name: str, a, b, holds) -> None:
        ok = None if a is None or b is None else bool(holds(a, b))
        checks.append((name, ok, "–" if ok is None else f"{a:.1f} vs {b:.1f}"))

    for task in tasks:
        b = blind[f"{task}/blind_prs_b"]
        checks.append((f"blind schedule <= {BLIND_MAX:g} on {task} PRS-B", b <= BLIND_MAX, f"{b:.1f}"))
    for task in tasks:
        add(
            f"SFT >= blind + {SFT_OVER_BLIND:g} on {task} PRS-B",
            get(sft, f"{task}/prs_b"),
            blind[f"{task}/blind_prs_b"],
            lambda a, b: a >= b + SFT_OVER_BLIND,
        )
    for task in tasks:
        add(
            f"final >= blind + {FINAL_OVER_BLIND:g} on {task} PRS-B",
            get(final, f"{task}/prs_b"),
            blind[f"{task}/blind_prs_b"],
            lambda a, b: a >= b + FINAL_OVER_BLIND,
        )
    for task in tasks:
        add(
            f"swapped frames lower the final {task} PRS-B by >= {SWAP_DROP:g}",
            get(final, f"{task}/prs_b"),
            get(final, f"{task}/prs_b_swap"),
            lambda a, b: a - b >= SWAP_DROP,
        )

    def task_mean(row):
        values = [get(row, f"{t}/prs_b") for t in tasks]
        return None if row is None or None in values else sum(values) / len(values)

    add(
        f"streaming GRPO >= SFT + {RL_OVER_SFT:g} on mean task PRS-B",
        task_mean(grpo),
        task_mean(sft),
        lambda a, b: a >= b + RL_OVER_SFT,
    )
    add(
        f"final MCQA acc >= image-blind + {MCQA_OVER_BLIND:g}",
        get(final, "acc"),
        blind.get("blind_acc"),
        lambda a, b: a >= b + MCQA_OVER_BLIND,
    )
    add(
        f"swapped images lower the final MCQA acc by >= {MCQA_SWAP_DROP:g}",
        get(final, "acc"),
        get(final, "acc_swap"),
        lambda a, b: a - b >= MCQA_SWAP_DROP,
    )
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
    lines = ["| direction | holds | values (this stage vs the one compared) |", "|---|---|---|"]
    lines += [f"| {name} | {MARK[ok]} | {detail} |" for name, ok, detail in checks]
    return "\n".join(lines)
