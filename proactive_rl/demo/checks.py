"""What the demo should show, checked on its own table: the direction of each stage's effect on held-out scores.

- SFT above the untrained model on PRS-B of every streaming task it trains (docs/spec.md §4) and on PAUC (§5);
- streaming GRPO at or above SFT on overall PRS-B, with PRS-U at most `PRS_U_SLACK` points below SFT (§7);
- suggestion GRPO above SFT on MCQA accuracy (§6);
- the final model (after suggestion GRPO) keeping PRS-B >= `KEEP` x the streaming-GRPO row on every task, and
  PAUC >= `KEEP` x the streaming-GRPO row.

Each check is ``(name, holds, detail)``; a check whose stages did not run holds ``None`` (not evaluated).
"""

from __future__ import annotations

from typing import Any

PRS_U_SLACK = 5.0
KEEP = 0.9
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


def checks_markdown(checks: list[tuple[str, bool | None, str]]) -> str:
    lines = ["| direction | holds | values (this stage vs the one compared) |", "|---|---|---|"]
    lines += [f"| {name} | {MARK[ok]} | {detail} |" for name, ok, detail in checks]
    return "\n".join(lines)
