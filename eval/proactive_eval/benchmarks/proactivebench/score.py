"""``proactive-eval score|baseline --benchmark proactivebench``: acc / ps of a replay answers file on one dataset's
filtered benchmark, beside the image-blind policy, with the 95 % paired interval of the accuracy gain over it
(docs/spec.md §6, §14, §15; docs/proactivebench.md).

    proactive-eval score --benchmark proactivebench --annotations test/QuickDraw_preprocessed.jsonl \\
        --predictions answers.jsonl --out r/

The annotation file is the authors' ``<folder>_preprocessed.jsonl`` (its name gives the dataset; images are not
read). The results file holds answers only (``{"id", "dataset", "answers": [...]}``, as ``mcqa --policy
replay:``): they are played through the environments, so the outcome comes from the annotations, never from the
file. An interactive environment is played by the ``mcqa`` command and the ``mcqa`` / ``oeg`` evaluators.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks.proactivebench.blind import blind_mcqa_summary
from proactive_eval.benchmarks.proactivebench.command import ANSWERS_FIX, parse_answers, replay_policy
from proactive_eval.benchmarks.proactivebench.environments import ENVIRONMENTS_FIX, load_environments, run_environment
from proactive_eval.benchmarks.proactivebench.metric import DATASETS, dataset_key
from proactive_eval.benchmarks.proactivebench.report import mcqa_markdown, mcqa_results
from proactive_eval.errors import InputError
from proactive_eval.intervals import paired_interval
from proactive_eval.records import nonempty, read_records

SUFFIX = "_preprocessed.jsonl"
PROTOCOL = "filtered"


def load_mcqa(annotations, video_root=None):
    """The filtered benchmark's environments of one ``<folder>_preprocessed.jsonl`` (images not loaded)."""
    name = Path(str(annotations)).name
    folders = ", ".join(f"{folder}{SUFFIX}" for folder in DATASETS.values())
    try:
        key = dataset_key(name.removesuffix(SUFFIX)) if name.endswith(SUFFIX) else None
    except ValueError:
        key = None
    if key is None:
        raise InputError(f"--annotations: {name} is not one of the authors' files ({folders})")
    envs = load_environments(annotations, key, video_root, load_images=False, protocol=PROTOCOL)
    return nonempty(envs, annotations, f"{PROTOCOL} benchmark records", ENVIRONMENTS_FIX)


def read_answers_records(path) -> list:
    """The records of a replay answers file (JSONL or a JSON list)."""
    return nonempty(read_records(path), path, "answers", ANSWERS_FIX)


def mcqa_summary(envs, official, file="answers", model=None) -> dict[str, Any]:
    """``results.json`` of an answers object: `mcqa_results` of the answers played through `envs` (an environment
    without answers gives up at once), its ``blind_floor`` and ``gain_over_blind`` (acc, model − blind, with its
    95 % paired interval over the environments), and what of the file was not played."""
    policy_for = replay_policy(*parse_answers(official, str(file)))
    blind_rows: list[dict] = []
    blind = blind_mcqa_summary([copy.deepcopy(env) for env in envs], per_env=blind_rows)
    rows = []
    for env in envs:
        out = run_environment(copy.deepcopy(env), policy_for(env))
        rows.append({"id": out.id, "dataset": env.dataset, "success": out.success, "turns": out.turns})
    known = {(env.dataset, str(env.id)) for env in envs}
    meta = {"replay_records_ignored": {"ids_matching_no_environment": sum(k not in known for k in policy_for.answers),
                                       "repeated_ids": policy_for.repeated}}  # fmt: skip
    results = mcqa_results(rows, PROTOCOL, None, meta, blind_floor=blind)
    gain = paired_interval([100.0 * r["success"] for r in rows], [100.0 * b["success"] for b in blind_rows])
    return {"benchmark": "proactivebench", **results, "gain_over_blind": {"acc": gain.as_dict()}}


def mcqa_metrics(summary: dict[str, Any]) -> dict[str, float]:
    """What a training callback logs: acc / ps, the blind floor's and the accuracy gain."""
    out = {"acc": float(summary["avg"]["acc"]), "ps": float(summary["avg"]["ps"])}
    out.update(
        blind_acc=float(summary["blind_floor"]["acc"]), gain_acc=float(summary["gain_over_blind"]["acc"]["diff"])
    )
    return out


def mcqa_report_text(summary: dict[str, Any]) -> str:
    """The report `mcqa` prints, with the blind policy and the gain over it (95 % interval)."""
    blind, gain = summary["blind_floor"], summary["gain_over_blind"]["acc"]
    return (
        mcqa_markdown(summary)
        + f"\nimage-blind policy: acc {blind['acc']:.1f}, ps {blind['ps']:.2f}; model − blind acc "
        + f"{gain['diff']:+.1f} [{gain['low']:+.1f}, {gain['high']:+.1f}] (95 % CI, n = {gain['n']})\n"
    )
