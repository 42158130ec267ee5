"""`ProactiveEvalCallback`: the metrics a proactive model is published with, measured while it trains.

Attach it from a recipe (``eval_callback:`` block, see `EvalCallbackConfig`) or by hand::

    callback = ProactiveEvalCallback({"evaluators": [{"type": "prs", "episodes": [...]}]}).attach(trainer)

At each trigger (``on_save``, ``on_evaluate``, every N steps) it evaluates the live model on every rank
(`evaluate_model`), logs the scalars on the main process to every ``report_to`` backend, and writes
``checkpoint-N/eval/results.json`` (or ``output_dir/eval/step-N/`` without a checkpoint) with its reports and
plots, atomically. A run resumed from a checkpoint that was saved but never scored (killed while it was being
evaluated) scores it first, before the first step. A failing evaluator is logged with its traceback and listed in
the results as incomplete; training goes on unless ``fail_fast: true``. Every evaluation's wall time is logged
(``eval_callback/wall_time_s``) and appended, with the metrics, to ``output_dir/eval/history.jsonl``, which
survives checkpoint rotation.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from proactive_rl.evaluation.backends import log_results
from proactive_rl.evaluation.base import build_evaluators
from proactive_rl.evaluation.config import EvalCallbackConfig
from proactive_rl.evaluation.run import RESULTS_NAME, evaluate_model

logger = logging.getLogger(__name__)

HISTORY_NAME = "history.jsonl"


class ProactiveEvalCallback(TrainerCallback):
    """Evaluate the live model with proactive evaluators during training.

    Args:
        config (`EvalCallbackConfig` or `dict`): evaluators and triggers (a recipe's ``eval_callback`` block).
        trainer (`Trainer`, *optional*): the trainer; set by `attach`. Needed under DeepSpeed ZeRO-3 (to gather
            the weights for generation) and to log through the Trainer's own backends.

    Attributes:
        history (`list[dict]`): the results of every evaluation of this run, on every rank.
        total_seconds (`float`): wall time spent evaluating in this run.
    """

    def __init__(self, config: EvalCallbackConfig | dict[str, Any], trainer=None):
        self.config = EvalCallbackConfig.from_dict(config)
        self.evaluators = build_evaluators(self.config.evaluators, self.config.progress, self.config.log_samples)
        self.trainer = trainer
        self.history: list[dict[str, Any]] = []
        self.total_seconds = 0.0
        self._evaluated: dict[int, Path | None] = {}  # step -> where its results were written

    def attach(self, trainer) -> ProactiveEvalCallback:
        """Add this callback to `trainer` and keep a reference to it; returns `self`."""
        self.trainer = trainer
        trainer.add_callback(self)
        return self

    # --- triggers -------------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, **kwargs):
        # Build every evaluator's episodes / environments now: a bad episode file fails before the first step.
        for ev in self.evaluators:
            ev.items()
        out = self._unscored_checkpoint(args, state)
        if out is not None:  # the run resumed from it: the live weights are its weights
            logger.info(
                "step %d: %s was saved but never scored (the run was killed?): evaluating it",
                state.global_step,
                out.parent,
            )
            self._evaluate(args, state, out, kwargs)

    def _unscored_checkpoint(self, args, state) -> Path | None:
        """On a resume, the ``eval/`` folder of the checkpoint the run resumed from (``checkpoint-<global_step>``) when
        ``on_save`` should have scored it and its ``results.json`` was never written: a run killed while evaluating it
        (the Trainer saves, then calls ``on_save``) would otherwise never score it. Decided on the main process."""
        # deferred: keeps torch/transformers out of light import paths
        from accelerate import PartialState
        from accelerate.utils import broadcast_object_list

        out = None
        if state.is_world_process_zero and self.config.on_save and state.global_step > 0:
            checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if checkpoint.is_dir() and not (checkpoint / "eval" / RESULTS_NAME).is_file():
                out = str(checkpoint / "eval")
        if PartialState().num_processes > 1:
            out = broadcast_object_list([out])[0]
        return Path(out) if out is not None else None

    def on_step_end(self, args, state, control, **kwargs):
        n = self.config.every_n_steps
        if n and state.global_step % n == 0:
            self._evaluate(args, state, Path(args.output_dir) / "eval" / f"step-{state.global_step}", kwargs)

    def on_save(self, args, state, control, **kwargs):
        if self.config.on_save:
            out = Path(args.output_dir) / f"checkpoint-{state.global_step}" / "eval"
            self._evaluate(args, state, out, kwargs)

    def on_evaluate(self, args, state, control, **kwargs):
        if self.config.on_evaluate:
            self._evaluate(args, state, Path(args.output_dir) / "eval" / f"step-{state.global_step}", kwargs)

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.history:
            logger.info(
                "ProactiveEvalCallback: %d evaluations, %.1f s in total", len(self.history), self.total_seconds
            )

    # --- work -----------------------------------------------------------------------------------------------
    def _evaluate(self, args, state, out: Path, kwargs: dict) -> dict[str, Any] | None:
        step = state.global_step
        if step in self._evaluated:  # e.g. every_n_steps and on_save at the same step: evaluate once
            previous = self._evaluated[step]
            if state.is_world_process_zero and previous is not None and previous != out and previous.exists():
                shutil.copytree(previous, out, dirs_exist_ok=True)
            return None
        trainer = self.trainer
        model = trainer.model if trainer is not None else kwargs.get("model")
        processor = trainer.processing_class if trainer is not None else kwargs.get("processing_class")
        if model is None or processor is None:
            raise RuntimeError("ProactiveEvalCallback: the Trainer did not pass the model and processing_class")
        start = time.perf_counter()
        results = evaluate_model(
            model,
            processor,
            self.evaluators,
            out_dir=out if state.is_world_process_zero else None,
            step=step,
            trainer=trainer,
            fail_fast=self.config.fail_fast,
            plots=self.config.plots,
            meta={"trigger_dir": str(out)},
        )
        self._evaluated[step] = out
        seconds = time.perf_counter() - start
        self.total_seconds += seconds
        self.history.append(results)
        # on every rank: the trainer's log() may be a collective; its reporting callbacks write on rank 0 only
        logging_dir = getattr(args, "logging_dir", None)
        log_results(results, step, trainer, args.report_to, logging_dir, is_main_process=state.is_world_process_zero)
        if state.is_world_process_zero:
            self._append_history(Path(args.output_dir) / "eval" / HISTORY_NAME, results, seconds)
            logger.info(
                "step %d: evaluated in %.1f s (%s)%s",
                step,
                seconds,
                ", ".join(f"{k}={v:.2f}" for k, v in results["metrics"].items() if isinstance(v, float)),
                "" if results["complete"] else f"; INCOMPLETE: {[i['evaluator'] for i in results['incomplete']]}",
            )
        return results

    def _append_history(self, path: Path, results: dict[str, Any], seconds: float) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {k: results[k] for k in ("step", "complete", "incomplete", "metrics", "wall_time_s", "trigger_dir")}
        record["callback_seconds"] = round(seconds, 3)
        with path.open("a") as f:  # one line per evaluation, flushed: a crash loses at most the one in progress
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            f.flush()
