"""The `Evaluator` base class and the registry of evaluator types (``type:`` in an ``eval_callback`` block).

An evaluator type registers itself where it is defined, and the configuration reads the registry, so a new type
needs no edit anywhere else (docs/architecture.md, "a new evaluator")::

    @register_evaluator("answer_length")
    class AnswerLength(Evaluator):
        def generate(self, model, processor, items): ...
        def score(self, records, out_dir, plots=True): ...

A user evaluator outside the library is named by its import path instead (``type: my_package.module.MyEvaluator``).

An evaluator is used in three stages, so that the expensive part is spread over ranks and the rest is not:

1. ``items()``: the episodes / environments, built once, identically on every rank (deterministic), or given when
   the evaluator is constructed (``items=``: a caller that already holds its environments or episodes);
2. ``generate(model, processor, items, writer=None)``: run the model on this rank's shard; returns picklable
   records (a ``resumable`` evaluator also hands each finished item to `writer`);
3. ``score(records, out_dir)``: on the main process, on the gathered records of every rank: metrics, summary,
   sample rows and report files (`Scored`).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, field
from typing import Any

from tqdm.auto import tqdm

EVALUATORS: dict[str, type] = {}


def register_evaluator(name: str):
    """Class decorator: make an `Evaluator` subclass available as ``type: <name>``; a name is registered once."""

    def register(cls: type) -> type:
        if name in EVALUATORS and EVALUATORS[name] is not cls:
            raise ValueError(f"evaluator type {name!r} is already registered ({EVALUATORS[name].__qualname__})")
        EVALUATORS[name] = cls
        return cls

    return register


def evaluator_class(type_: str, where: str = "type") -> type:
    """The evaluator class of a ``type``: a registered name, or an import path ``package.module.Class``."""
    if type_ in EVALUATORS:
        return EVALUATORS[type_]
    choices = f"expected one of {', '.join(EVALUATORS)} or an import path (package.module.Class)"
    if not isinstance(type_, str) or "." not in type_.replace(":", "."):
        raise ValueError(f"{where}: {choices}, got {type_!r}")
    module_name, _, attr = type_.replace(":", ".").rpartition(".")
    try:
        cls = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise ValueError(f"{where}: cannot import {type_!r} ({err}); {choices}") from None
    if not (isinstance(cls, type) and issubclass(cls, Evaluator)):
        raise ValueError(f"{where}: {type_!r} is not a proactive_rl.evaluation.Evaluator subclass")
    return cls


@dataclass
class Scored:
    """What `Evaluator.score` returns: logged scalars, the full summary, sample rows and written files."""

    metrics: dict[str, float]
    summary: dict[str, Any]
    samples: list[list[Any]] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)


class Evaluator:
    """Base class; see the module docstring.

    Args:
        config (`EvaluatorConfig`): its configuration (``name``, ``max_items``, the type's own fields).
        progress (`bool`, *optional*): progress bars while generating / judging; `None`: on when stderr is a
            terminal, on the main process (`show_progress`).
        log_samples (`int`, *optional*, defaults to `4`): rows of the sample table.
        items (`list`, *optional*): the episodes / environments to evaluate, instead of those the config names.
    """

    SAMPLE_COLUMNS = ["evaluator", "id", "task", "targets", "responses", "score"]
    #: generate() stores each finished item through its `writer`, so an interrupted run can resume
    resumable = False
    #: the files of its folder that `score` writes its records to, one a line, for a resumed run to read
    #: (`writer.write_record`); empty: the streaming predictions format (`writer.write(id, outputs)`)
    records_files: tuple[str, ...] = ()

    def __init__(self, config, progress: bool | None = False, log_samples: int = 4, items: list | None = None):
        self.config, self.name = config, config.name
        self.progress, self.log_samples = show_progress(progress), int(log_samples)
        self._items = list(items) if items is not None else None

    @classmethod
    def check_config(cls, config, where: str) -> None:
        """Validate (and normalise) the type's own fields of `config` at parse time; raise `ValueError` naming
        `where` and the field."""

    def items(self) -> list:
        if self._items is None:
            self._items = self._load()
            if self.config.max_items is not None:
                self._items = self._items[: self.config.max_items]
        return self._items

    def _load(self) -> list:
        raise NotImplementedError(f"{type(self).__name__}: give `items=` or implement _load()")

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        """Records of this rank's `items`; `writer` (a `PredictionWriter`, given to ``resumable`` evaluators
        only) receives each finished item as it ends."""
        raise NotImplementedError

    def score(self, records: list[dict], out_dir, plots: bool = True) -> Scored:
        raise NotImplementedError

    def _progress(self, items: list, unit: str):
        """`items`, with a progress bar when ``progress`` is set."""
        if not self.progress:
            return items

        return tqdm(items, desc=f"eval: {self.name}", unit=unit)

    def _progress_bar(self, total: int, unit: str):
        """A progress bar of `total` items to update by hand (items finished out of order), or None."""
        if not self.progress:
            return None

        return tqdm(total=total, desc=f"eval: {self.name}", unit=unit)


def show_progress(progress: bool | None) -> bool:
    """`progress`, or when `None`: whether stderr is a terminal and this is the main process (one bar, not one
    per rank; a log file gets none)."""
    if progress is not None:
        return bool(progress)
    return sys.stderr.isatty() and os.environ.get("RANK", "0") == "0" and os.environ.get("LOCAL_RANK", "0") == "0"


def build_evaluators(configs: list, progress: bool | None = None, log_samples: int = 4) -> list[Evaluator]:
    """One `Evaluator` per `EvaluatorConfig`, in order, of the class its ``type`` names."""
    return [evaluator_class(c.type)(c, progress=progress, log_samples=log_samples) for c in configs]
