"""Resumable streaming evaluation for `proactive-rl eval` (docs/spec.md §1: finished episodes are never recomputed).

Each rank appends every episode it finishes to ``<out>/<evaluator>/partial-rank<r>.jsonl`` (one fsynced line,
`proactive_eval.predictions.PredictionWriter`), and the main process writes the whole ``predictions.jsonl`` when
the evaluation ends. A later run on the same folder reads both (any number of ranks, a torn last line dropped),
plays only the episodes not in them, and scores everything. Episodes whose video could not be played are never
written, so they are tried again.

Records are reused only when ``run.json`` holds the same fingerprint (the evaluator's settings and the
checkpoint); otherwise the folder's old predictions are set aside and everything is played again. The training
callback never resumes: each of its evaluations is of new weights.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FINGERPRINT_NAME = "run.json"
PREDICTIONS_NAME = "predictions.jsonl"
PARTIAL_GLOB = "partial-rank*.jsonl"


def partial_path(folder: Path, rank: int) -> Path:
    return folder / f"partial-rank{rank}.jsonl"


def fingerprint(evaluator, meta: dict[str, Any] | None) -> dict[str, Any]:
    """What must not change for stored predictions to be reused: the evaluator's settings and the checkpoint."""
    from dataclasses import asdict

    return json.loads(json.dumps({"evaluator": asdict(evaluator.config), "meta": meta or {}}, default=str))


def resumed_records(folder: Path, print_: dict[str, Any]) -> list[dict]:
    """The finished episodes stored in `folder` for the run `print_` (``[]`` for another run: its files are
    renamed ``*.stale``), as generate records ``{"id", "responses": [(time, text, malformed)]}``.
    Main process only; it also writes the fingerprint."""
    from proactive_eval.predictions import load_predictions

    folder.mkdir(parents=True, exist_ok=True)
    stored = folder / FINGERPRINT_NAME
    # the counterfactual runs of the streaming evaluators (`proactive_rl.evaluation.looks`) are records too
    files = [
        folder / PREDICTIONS_NAME,
        folder / "predictions_counterfactual.jsonl",
        *sorted(folder.glob(PARTIAL_GLOB)),
    ]
    files = [f for f in files if f.is_file()]
    try:
        same = json.loads(stored.read_text()) == print_
    except (OSError, json.JSONDecodeError):
        same = False
    if files and not same:
        logger.warning("%s: stored predictions are of another run (settings or checkpoint differ): replaying", folder)
        for f in files:
            f.replace(f.with_name(f.name + ".stale"))
        files = []
    stored.write_text(json.dumps(print_, indent=1) + "\n")
    outputs: dict[str, list] = {}
    for f in files:
        _repair(f)
        for eid, responses in load_predictions(f).items():
            outputs.setdefault(eid, responses)
    return [{"id": eid, "responses": [(r.time, r.text, r.malformed) for r in rs]} for eid, rs in outputs.items()]


def finish(folder: Path) -> None:
    """After ``predictions.jsonl`` holds every record: drop the per-rank files."""
    for f in folder.glob(PARTIAL_GLOB):
        f.unlink(missing_ok=True)


def _repair(path: Path) -> None:
    """Drop a torn last line (a rank killed mid-write), as `PredictionWriter` does when it reopens a file."""
    from proactive_eval.predictions import PredictionWriter

    PredictionWriter(path).close()
