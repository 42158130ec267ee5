"""Logging evaluation results to the ``report_to`` backends (written by the main process only).

Scalars are named ``eval_<evaluator>/<metric>`` (wandb shows them as ``eval/<evaluator>/<metric>``), plus
``eval_<evaluator>/wall_time_s``, ``eval_callback/wall_time_s`` (what the evaluation cost) and
``eval_callback/incomplete`` (how many evaluators failed). Inside a Trainer they go through ``Trainer.log``, so
every backend the Trainer reports to (wandb, tensorboard, trackio, ...) gets them at the training step and they
land in ``trainer_state.json``'s log history too; elsewhere (`proactive-rl eval`) they are written directly.
wandb also gets one table of sample timelines per evaluator and the report plots as images.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)

_IMAGES = ("timelines", "pauc_curves", "responses_per_target")


def scalars(results: dict[str, Any]) -> dict[str, float]:
    """The flat scalars of a results dict (see the module docstring)."""
    out = {f"eval_{k}": float(v) for k, v in results["metrics"].items() if isinstance(v, (int, float))}
    for name, entry in results["evaluators"].items():
        out[f"eval_{name}/wall_time_s"] = float(entry.get("wall_time_s", 0.0))
    out["eval_callback/wall_time_s"] = float(results["wall_time_s"])
    out["eval_callback/incomplete"] = float(len(results["incomplete"]))
    return out


def _wandb_run():
    # deferred: optional extra
    try:
        import wandb
    except ImportError:
        return None
    return wandb.run


def log_wandb_media(results: dict[str, Any], step: int | None) -> None:
    """Sample tables and plot images of every evaluator to the active wandb run (if any)."""
    # deferred: optional extra
    run = _wandb_run()
    if run is None:
        return
    import wandb

    payload: dict[str, Any] = {}
    for name, entry in results["evaluators"].items():
        if entry.get("status") != "ok":
            continue
        samples = entry.get("samples") or {}
        if samples.get("rows"):
            rows = [[("" if v is None else v) for v in row] for row in samples["rows"]]
            payload[f"eval/{name}/samples"] = wandb.Table(columns=list(samples["columns"]), data=rows)
        for key in _IMAGES:
            if key in entry.get("files", {}):
                payload[f"eval/{name}/{key}"] = wandb.Image(entry["files"][key])
    if payload:
        if step is not None:
            payload["train/global_step"] = step
        run.log(payload)


def log_results(
    results: dict[str, Any],
    step: int | None,
    trainer=None,
    report_to: Sequence[str] = (),
    logging_dir: str | None = None,
    is_main_process: bool = True,
) -> dict[str, float]:
    """Log a results dict; returns the scalars. Call it on every rank: with a `trainer` every rank appends the
    scalars to its log history (the Trainer's reporting callbacks write on the main process only); everything else
    is written by the main process only."""
    # deferred: keeps torch/transformers out of light import paths
    values = scalars(results)
    report_to = list(report_to or [])
    if trainer is not None:
        from transformers import Trainer

        # The base Trainer.log, not the subclass's: TRL's and the SFT trainer's log() flush (and all-reduce) their
        # running training statistics, which must stay on their own logging steps.
        Trainer.log(trainer, dict(values))
    elif is_main_process:
        _log_direct(values, step or 0, report_to, logging_dir)
    if not is_main_process:
        return values
    if "wandb" in report_to or (trainer is None and _wandb_run() is not None):
        try:
            log_wandb_media(results, step)
        except Exception:  # media are a convenience; the numbers are already logged
            logger.exception("could not log evaluation tables / images to wandb")
    return values


def _log_direct(values: dict[str, float], step: int, report_to: list[str], logging_dir: str | None) -> None:
    # deferred: keeps torch/transformers out of light import paths
    if "wandb" in report_to and _wandb_run() is not None:
        _wandb_run().log({**{k.replace("eval_", "eval/", 1): v for k, v in values.items()}, "train/global_step": step})
    if "tensorboard" in report_to:
        from torch.utils.tensorboard import SummaryWriter

        with SummaryWriter(logging_dir) as writer:
            for k, v in values.items():
                writer.add_scalar(k.replace("eval_", "eval/", 1), v, step)
    if "trackio" in report_to:
        try:
            import trackio
        except ImportError:
            logger.warning("report_to trackio: the trackio package is not installed; skipped")
        else:
            trackio.log(values, step=step)
