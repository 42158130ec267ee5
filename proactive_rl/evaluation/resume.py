"""Resumable evaluation for `proactive-rl eval` (docs/spec.md §1: finished episodes are never recomputed).

Each rank appends every episode (or environment) it finishes to ``<out>/<evaluator>/partial-rank<r>.jsonl`` (one
fsynced line, `proactive_eval.predictions.PredictionWriter`; an item's counterfactual runs before its own), and the
main process writes the evaluator's record files when it scores: ``predictions.jsonl`` (and
``predictions_counterfactual.jsonl``) of a streaming evaluator, in the predictions format; the evaluator's
`Evaluator.records_files`, one record a line, for the others (MCQA ``outcomes.jsonl`` and ``outcomes_swap.jsonl``,
OEG ``predictions.jsonl``). A later run on the same folder reads them all (any number of ranks, a torn last line
dropped), plays only the items not in them, and scores everything (an LLM judge answers what it already answered
from its cache). Episodes whose video could not be played are never written, so they are tried again.

Records are reused only when ``run.json`` holds the same fingerprint (the evaluator's settings and the
checkpoint); otherwise the folder's old predictions are set aside and everything is played again. The training
callback never resumes: each of its evaluations is of new weights.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict
from pathlib import Path
from typing import Any

from proactive_eval.predictions import PredictionWriter, load_predictions
from proactive_eval.records import iter_jsonl, read_text

logger = logging.getLogger(__name__)

FINGERPRINT_NAME = "run.json"
PREDICTIONS_NAME = "predictions.jsonl"
PARTIAL_GLOB = "partial-rank*.jsonl"


def partial_path(folder: Path, rank: int) -> Path:
    return folder / f"partial-rank{rank}.jsonl"


def fingerprint(evaluator, meta: dict[str, Any] | None) -> dict[str, Any]:
    """What must not change for stored predictions to be reused: the evaluator's settings and the checkpoint."""
    return json.loads(json.dumps({"evaluator": asdict(evaluator.config), "meta": meta or {}}, default=str))


def resumed_records(folder: Path, print_: dict[str, Any], records_files: tuple[str, ...] = ()) -> list[dict]:
    """The finished items stored in `folder` for the run `print_` (``[]`` for another run: its files are
    renamed ``*.stale``), as generate records: ``{"id", "responses": [(time, text, malformed)]}`` read from the
    predictions format, or, with `records_files`, the records as they were written. Main process only; it also
    writes the fingerprint."""
    folder.mkdir(parents=True, exist_ok=True)
    stored = folder / FINGERPRINT_NAME
    # the counterfactual runs of the streaming evaluators (`proactive_rl.evaluation.looks`) are records too
    names = records_files or (PREDICTIONS_NAME, "predictions_counterfactual.jsonl")
    files = [*(folder / name for name in names), *sorted(folder.glob(PARTIAL_GLOB))]
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
    records: dict[str, dict] = {}
    for f in files:
        _repair(f)
        for record in _stored(f) if records_files else _predictions(f):
            records.setdefault(str(record["id"]), record)
    return list(records.values())


def _predictions(path: Path) -> list[dict]:
    outputs = load_predictions(path)
    return [{"id": eid, "responses": [(r.time, r.text, r.malformed) for r in rs]} for eid, rs in outputs.items()]


def _stored(path: Path) -> list[dict]:
    """The records of a JSONL file written by `PredictionWriter.write_record` (or as a whole records file)."""
    return [record for _, record in iter_jsonl(read_text(path, "stored records"), path)]


def finish(folder: Path) -> None:
    """After ``predictions.jsonl`` holds every record: drop the per-rank files."""
    for f in folder.glob(PARTIAL_GLOB):
        f.unlink(missing_ok=True)


def _repair(path: Path) -> None:
    """Drop a torn last line (a rank killed mid-write), as `PredictionWriter` does when it reopens a file."""
    PredictionWriter(path).close()
