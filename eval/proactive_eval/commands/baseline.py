"""The ``proactive-eval baseline`` rows: the floor a frame-blind policy reaches on a benchmark, from its files alone (docs/spec.md §14).

    proactive-eval baseline --episodes p3i_test.json                       # leave-one-out on the test episodes
    proactive-eval baseline --episodes test.json --fit train.json --alpha 0.05 --json
    proactive-eval baseline --episodes WEB/anno.json                       # ProactiveVideoQA: PAUC, rule judge
    proactive-eval baseline --episodes QuickDraw_preprocessed.jsonl --dataset QD --protocol unfiltered

Per task it prints the blind schedule and its PRS-U / PRS-B (`proactive_eval.benchmarks.p3i.blind`), PAUC for ``pvqa`` episodes
with the ``--judge`` (`proactive_eval.benchmarks.pvqa.blind`), or, for ProactiveBench environment files (``--dataset``), the
image-blind policy and its acc / ps (`proactive_eval.benchmarks.proactivebench.blind`). The numbers are the blind row an evaluator of
`proactive_rl.evaluation` reports for the same episodes, fitted the same way.
"""

from __future__ import annotations

from typing import Any

from proactive_eval.commands.blind import blind_floor, fit_label
from proactive_eval.commands.score import make_judge, prs_content_scorers
from proactive_rewards import ALPHA


def baseline_results(episodes, reference=None, alpha: float = ALPHA, judge_spec: str = "rule:token_f1") -> dict:
    """The blind rows of streaming episodes: ``{"prs": ..., "pauc": ...}`` (those present), fitted on `reference`
    or by leave-one-out."""
    out: dict[str, Any] = {}
    pvqa = [e for e in episodes if e.task == "pvqa"]
    other = [e for e in episodes if e.task != "pvqa"]
    if other:
        scorers = prs_content_scorers(judge_spec)
        out["prs"] = blind_floor("prs", other, reference, alpha=alpha, content_scorer=scorers)
    if pvqa:
        out["pauc"] = blind_floor("pauc", pvqa, reference, judge=make_judge(judge_spec))
    return out


def baseline_text(results: dict[str, Any]) -> str:
    lines = []
    if "prs" in results:
        prs = results["prs"]
        lines += ["## blind schedule, PRS × 100 (docs/spec.md §4, §14)", ""]
        lines += [
            "| task | episodes | fitted | PRS-U | PRS-B | schedule (PRS-B) | schedule (PRS-U) |",
            "|---|---|---|---|---|---|---|",
        ]
        for task, row in prs["groups"].items():
            schedules = prs["schedules"].get(task.split(":")[0], {})
            lines.append(
                f"| {task} | {row['num_episodes']} | {prs['fit'].get(task.split(':')[0], '')} | {row['prs_u']:.2f} | "
                f"{row['prs_b']:.2f} | {schedules.get('prs_b', {}).get('described', '')} | "
                f"{schedules.get('prs_u', {}).get('described', '')} |"
            )
        o = prs["overall"]
        lines.append(f"| **overall** | {o['num_episodes']} | | {o['prs_u']:.2f} | {o['prs_b']:.2f} | | |")
    if "pauc" in results:
        pauc = results["pauc"]
        omegas = [k for k in pauc["overall"] if k.startswith("omega=")]
        lines += ["", "## blind answer, PAUC × 100, turn-weighted (docs/spec.md §5, §14)", ""]
        lines += ["| group | videos | turns | " + " | ".join(omegas) + " |", "|---|---|---|" + "---|" * len(omegas)]
        for group, row in list(pauc["groups"].items()) + [("**overall**", pauc["overall"])]:
            lines.append(
                f"| {group} | {row['num_videos']} | {row['num_turns']} | "
                + " | ".join(f"{row[k]:.2f}" for k in omegas)
                + " |"
            )
        for task, schedule in pauc["schedules"].items():
            lines.append(f"\n- {task} ({fit_label(pauc['fit'][task])}): {schedule['pauc']['described']}")
    if "mcqa" in results:
        mcqa = results["mcqa"]
        lines += ["## image-blind policy, MCQA (docs/spec.md §6, §14)", ""]
        lines += ["| dataset | n | fitted | acc | ps | policy |", "|---|---|---|---|---|---|"]
        for dataset, row in mcqa["groups"].items():
            policy = mcqa["policies"][dataset]["described"]
            lines.append(
                f"| {dataset} | {row['n']} | {mcqa['fit'][dataset]} | {row['acc']:.1f} | {row['ps']:.2f} | {policy} |"
            )
    return "\n".join(lines) + "\n"
