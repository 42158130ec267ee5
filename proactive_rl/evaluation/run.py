"""`evaluate_model`: run evaluators on a model across ranks and write the results (shared by the callback and
`proactive-rl eval`, so that both give the same numbers for the same weights).

Distributed protocol: every rank builds the same items, takes its contiguous shard with
`PartialState.split_between_processes`, and generates on it with the parameters gathered whole (ZeRO-3: a
sharded forward is a collective, and ranks decode for different numbers of steps). The records are collected
with `gather_object`; the main process scores them (a judge is called once, not once per rank), writes the
files, and broadcasts the results, so every rank returns the same dict. A failure anywhere is caught on the
rank where it happens and travels through the same gather, so no rank is ever left waiting in a collective.

With ``resume=True`` (`proactive-rl eval`, ``--watch`` too) a resumable evaluator (streaming, MCQA, OEG) plays only
the items not already stored in its folder (`proactive_rl.evaluation.resume`): the main process reads them and
broadcasts them before the shards are cut, every rank appends each item it finishes to its own file, and the
scoring sees them all, in the items' order.
"""

from __future__ import annotations

import datetime as _dt
import json
import logging
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proactive_eval.common.counterfactual import split_counterfactual_id
from proactive_eval.predictions import PredictionWriter, atomic_write_text
from proactive_rl.errors import debug, input_errors
from proactive_rl.evaluation.base import Evaluator
from proactive_rl.evaluation.policy import generation_model
from proactive_rl.evaluation.resume import fingerprint, finish, partial_path, resumed_records

logger = logging.getLogger(__name__)

RESULTS_NAME = "results.json"


class EvaluationFailed(RuntimeError):
    """An evaluator failed and ``fail_fast`` is set."""


def _failure(name: str, stage: str, err: BaseException, rank: int) -> dict[str, Any]:
    return {
        "status": "failed",
        "stage": stage,
        "error": f"{type(err).__name__}: {err}",
        "traceback": "".join(traceback.format_exception(type(err), err, err.__traceback__)),
        "rank": rank,
    }


def _resumed(evaluators, out: Path, meta: dict | None) -> dict[str, list[dict]]:
    """Main process: the stored records of each resumable evaluator (see `proactive_rl.evaluation.resume`)."""
    resumed = {}
    for ev in evaluators:
        if not ev.resumable:
            continue
        try:
            ids = [item.id for item in ev.items()]
        except Exception:  # reported by the generate stage, on every rank alike
            continue
        if len(set(ids)) < len(ids):  # a stored record could stand for either item: play everything
            logger.warning("evaluator %r: item ids are not unique, so it does not resume", ev.name)
            continue
        resumed[ev.name] = resumed_records(out / ev.name, fingerprint(ev, meta), ev.records_files)
        if resumed[ev.name]:
            logger.info("evaluator %r: %d items already done, resumed", ev.name, len(resumed[ev.name]))
    return resumed


def _generate_local(
    evaluators: Sequence[Evaluator], model, processor, trainer, state, out: Path | None, resumed: dict
) -> dict[str, dict]:
    local: dict[str, dict] = {}
    with generation_model(model, trainer) as gen_model:
        for ev in evaluators:
            start = time.perf_counter()
            try:
                done = {r["id"] for r in resumed.get(ev.name, [])}
                items = [item for item in ev.items() if item.id not in done]
                with state.split_between_processes(list(range(len(items)))) as indices:
                    shard = [items[i] for i in indices]
                writer = None
                if ev.name in resumed and out is not None:
                    writer = PredictionWriter(partial_path(out / ev.name, state.process_index))
                try:
                    # only a resumable evaluator takes a writer: a new evaluator's generate(model, processor, items)
                    kwargs = {"writer": writer} if ev.resumable else {}
                    records = ev.generate(gen_model, processor, shard, **kwargs)
                finally:
                    if writer is not None:
                        writer.close()
                local[ev.name] = {"status": "ok", "records": records}
            except Exception as err:  # an evaluation never kills training; fail_fast re-raises after the gather
                logger.error(  # an input error (a missing episode file) is its one line; anything else its traceback
                    "evaluator %r failed while generating on rank %d: %s",
                    ev.name,
                    state.process_index,
                    err,
                    exc_info=not isinstance(err, input_errors()) or debug(),
                )
                local[ev.name] = _failure(ev.name, "generate", err, state.process_index)
            local[ev.name]["seconds"] = time.perf_counter() - start
    return local


def in_item_order(evaluator, records: list[dict]) -> list[dict]:
    """`records` in the order of the evaluator's items, each item's own record and then its counterfactual runs
    (``<id>#<kind>``) in the configured order: a resumed run scores the list an uninterrupted run scores."""
    order = {item.id: k for k, item in enumerate(evaluator.items())}
    kinds = {kind: k for k, kind in enumerate(getattr(evaluator.config, "counterfactual", None) or [])}

    def key(record):
        base, kind = split_counterfactual_id(record["id"])
        return order.get(base, len(order)), -1 if kind is None else kinds.get(kind, len(kinds))

    return sorted(records, key=key)


def _score(evaluators, gathered: list[dict], out_dir: Path | None, plots: bool, resumed: dict) -> dict[str, dict]:
    entries = {}
    for ev in evaluators:
        parts = [g[ev.name] for g in gathered]
        generate_s = max(p["seconds"] for p in parts)
        failed = [p for p in parts if p["status"] != "ok"]
        if failed:
            entry = {k: v for k, v in failed[0].items() if k != "seconds"}
            entry["failed_ranks"] = [p["rank"] for p in failed]
            entries[ev.name] = {**entry, "generate_s": round(generate_s, 3), "wall_time_s": round(generate_s, 3)}
            continue
        old = resumed.get(ev.name, [])
        records = in_item_order(ev, old + [r for p in parts for r in p["records"]])
        start = time.perf_counter()
        try:
            scored = ev.score(records, out_dir / ev.name if out_dir is not None else None, plots=plots)
            if ev.name in resumed and out_dir is not None:
                finish(out_dir / ev.name)  # predictions.jsonl now holds every record
            entry = {
                "status": "ok",
                "num_items": len(records),
                "resumed_items": len(old),
                "items_per_rank": [len(p["records"]) for p in parts],
                "metrics": scored.metrics,
                "summary": scored.summary,
                "samples": {"columns": ev.SAMPLE_COLUMNS, "rows": scored.samples},
                "files": scored.files,
            }
        except Exception as err:
            logger.exception("evaluator %r failed while scoring", ev.name)
            entry = _failure(ev.name, "score", err, 0)
            entry["num_items"] = len(records)
        score_s = time.perf_counter() - start
        entry.update(
            generate_s=round(generate_s, 3), score_s=round(score_s, 3), wall_time_s=round(generate_s + score_s, 3)
        )
        entries[ev.name] = entry
    return entries


def evaluate_model(
    model,
    processor,
    evaluators: Sequence[Evaluator],
    out_dir: str | Path | None = None,
    step: int | None = None,
    trainer=None,
    fail_fast: bool = False,
    plots: bool = True,
    meta: dict[str, Any] | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """Evaluate `model` with every evaluator, on every rank; returns the same results dict on every rank.

    Args:
        model (`PreTrainedModel`): the model (the live training model, or one loaded from a checkpoint).
        processor (`ProcessorMixin`): its processor.
        evaluators (`Sequence[Evaluator]`): from `build_evaluators`.
        out_dir (`str` or `Path`, *optional*): where to write ``results.json`` (atomically) and one folder per
            evaluator (predictions, report, plots); nothing is written when `None`.
        step (`int`, *optional*): the training step, recorded in the results.
        trainer (`Trainer`, *optional*): the running trainer; needed under DeepSpeed ZeRO-3 (to gather weights).
        fail_fast (`bool`, *optional*, defaults to `False`): raise `EvaluationFailed` (on every rank) when an
            evaluator failed, after the results are written.
        plots (`bool`, *optional*, defaults to `True`): draw the report plots.
        meta (`dict`, *optional*): extra fields for the results (e.g. the checkpoint path).
        resume (`bool`, *optional*, defaults to `False`): reuse the episodes a previous run of the same evaluators
            on the same checkpoint (same `meta`) finished in `out_dir`, and store each finished episode as it ends;
            `out_dir` must then be given on every rank.

    Returns:
        `dict`: ``{"step", "complete", "incomplete": [{"evaluator", "stage", "error"}], "metrics": {"name/metric":
        value}, "evaluators": {name: {"status", "metrics", "summary", "wall_time_s", ...}}, "wall_time_s", ...}``.
    """
    # deferred: keeps torch/transformers out of light import paths
    from accelerate import PartialState
    from accelerate.utils import broadcast_object_list, gather_object

    state = PartialState()
    start = time.perf_counter()
    out = Path(out_dir) if out_dir is not None else None
    if resume and out is None:
        raise ValueError("evaluate_model: resume=True needs out_dir on every rank")
    resumed: dict[str, list[dict]] = {}
    if resume:
        resumed = _resumed(evaluators, out, meta) if state.is_main_process else None
        if state.num_processes > 1:
            resumed = broadcast_object_list([resumed])[0]
    local = _generate_local(evaluators, model, processor, trainer, state, out if resume else None, resumed)
    gathered = gather_object([local]) if state.num_processes > 1 else [local]

    results = None
    if state.is_main_process:
        if out is not None:
            out.mkdir(parents=True, exist_ok=True)
        entries = _score(evaluators, gathered, out, plots, resumed)
        incomplete = [
            {"evaluator": name, "stage": e["stage"], "error": e["error"]}
            for name, e in entries.items()
            if e["status"] != "ok"
        ]
        metrics = {
            f"{name}/{k}": v for name, e in entries.items() if e["status"] == "ok" for k, v in e["metrics"].items()
        }
        results = {
            "step": step,
            "complete": not incomplete,
            "incomplete": incomplete,
            "metrics": metrics,
            "evaluators": entries,
            "num_processes": state.num_processes,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            **(meta or {}),
        }
        results["wall_time_s"] = round(time.perf_counter() - start, 3)
        if out is not None:
            atomic_write_text(
                out / RESULTS_NAME, json.dumps(results, indent=1, ensure_ascii=False, default=str) + "\n"
            )
        for item in incomplete:
            logger.error(
                "evaluation at step %s: evaluator %r failed (%s): %s",
                step,
                item["evaluator"],
                item["stage"],
                item["error"],
            )
    if state.num_processes > 1:
        results = broadcast_object_list([results])[0]
    if fail_fast and results["incomplete"]:
        failed = ", ".join(f"{i['evaluator']} ({i['stage']}: {i['error']})" for i in results["incomplete"])
        raise EvaluationFailed(f"evaluation at step {step} failed (fail_fast): {failed}")
    return results
