"""The `Evaluator` base class and the registry of evaluator types (``type:`` in an ``eval_callback`` block).

An evaluator type registers itself where it is defined, and the configuration reads the registry, so a new type
needs no edit anywhere else (docs/architecture.md, "a new evaluator")::

    @register_evaluator("answer_length")
    class AnswerLength(Evaluator):
        def generate(self, model, processor, items): ...
        def score(self, records, out_dir, plots=True): ...

A user evaluator outside the library is named by its import path instead (``type: my_package.module.MyEvaluator``).
Each evaluator type declares the dataclass of its fields (``config_class``, an `EvaluatorConfig` subclass with its
own defaults and checks; by default the base's fields only), and the ``type`` of a block picks it. A benchmark
registered in `proactive_eval.benchmarks` and run item by item (`Benchmark.runnable`) is an evaluator type of its own
name, evaluated by `proactive_rl.evaluation.benchmark.BenchmarkEvaluator`.

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
from dataclasses import dataclass, field, fields
from typing import Any

from tqdm.auto import tqdm

from proactive_eval.benchmarks import benchmark_names
from proactive_rl.errors import InputError, did_you_mean

EVALUATORS: dict[str, type] = {}
_BENCHMARK_EVALUATOR: type | None = None  # the evaluator of the item-by-item benchmarks, once it is defined


def register_evaluator(name: str):
    """Class decorator: make an `Evaluator` subclass available as ``type: <name>``; a name is registered once."""

    def register(cls: type) -> type:
        if name in EVALUATORS and EVALUATORS[name] is not cls:
            raise ValueError(f"evaluator type {name!r} is already registered ({EVALUATORS[name].__qualname__})")
        EVALUATORS[name] = cls
        return cls

    return register


def register_benchmark_evaluator(cls: type) -> type:
    """Class decorator: `cls` evaluates every registered benchmark that is run item by item (`Benchmark.runnable`),
    as ``type: <the benchmark's name>``, benchmarks registered later included."""
    global _BENCHMARK_EVALUATOR
    _BENCHMARK_EVALUATOR = cls
    return cls


def evaluator_types() -> list[str]:
    """The registered evaluator types, then the runnable benchmarks' names (each an evaluator type too)."""
    benchmarks = benchmark_names(needs="runnable") if _BENCHMARK_EVALUATOR is not None else []
    return [*EVALUATORS, *(name for name in benchmarks if name not in EVALUATORS)]


def evaluator_class(type_: str, where: str = "type") -> type:
    """The evaluator class of a ``type``: a registered name, a runnable benchmark's name, or an import path
    ``package.module.Class``."""
    if type_ in EVALUATORS:
        return EVALUATORS[type_]
    if _BENCHMARK_EVALUATOR is not None and type_ in benchmark_names(needs="runnable"):
        return _BENCHMARK_EVALUATOR
    choices = f"expected one of {', '.join(evaluator_types())} or an import path (package.module.Class)"
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


def check_keys(raw: Any, cls, where: str, required: tuple[str, ...] = ()) -> dict:
    """`raw`, a mapping whose keys are fields of dataclass `cls` (the unknown ones named with the closest field)."""
    if not isinstance(raw, dict):
        raise InputError(f"{where}: expected a mapping, got {raw!r}")
    valid = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - valid)
    if unknown:
        hint = did_you_mean(unknown[0], valid).replace(" did you mean", f" `{unknown[0]}`: did you mean")
        raise InputError(f"{where}: unknown keys {unknown};{hint} expected some of {sorted(valid)}")
    missing = [k for k in required if k not in raw]
    if missing:
        raise InputError(f"{where}: missing {missing} (present: {sorted(raw)})")
    return raw


def check_count(value: Any, where: str, optional: bool = True) -> None:
    """`value`: an integer >= 1 (or `None`, when `optional`)."""
    if (value is not None or not optional) and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise InputError(f"{where}: must be an integer >= 1, got {value!r}")


@dataclass
class EvaluatorConfig:
    """The fields of every evaluator, read from one entry of an ``eval_callback`` block's ``evaluators``; each type
    extends it with its own (`Evaluator.config_class`: `proactive_rl.evaluation.evaluators.PRSConfig`, ...).

    Args:
        type (`str`): a registered evaluator type (`evaluator_types`): ``prs``, ``pauc``, ``mcqa``, ``oeg``, a
            runnable benchmark's name (``ovo_bench``, ``streamingbench_po``, ...), or the import path of a user
            `Evaluator` subclass (``package.module.Class``).
        name (`str`, *optional*): the metric prefix and folder name; defaults to the type (its last part for an
            import path).
        max_items (`int`, *optional*): evaluate only the first N items (episodes, environments, benchmark items).
        max_new_tokens (`int`, *optional*, defaults to `16`): longest assistant turn.
    """

    type: str
    name: str | None = None
    max_items: int | None = None
    max_new_tokens: int = 16

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> EvaluatorConfig:
        """The configuration of the type ``raw["type"]`` names (its evaluator's ``config_class``), checked; a key
        that is no field of that type is an error naming its closest field."""
        if not isinstance(raw, dict):
            raise InputError(f"{where}: expected a mapping, got {raw!r}")
        if "type" not in raw:
            raise InputError(f"{where}: missing ['type'] (present: {sorted(raw)})")
        evaluator = evaluator_class(raw["type"], f"{where}.type")
        config_class = evaluator.config_class
        try:
            config = config_class(**check_keys(raw, config_class, where, required=("type",)))
        except InputError as err:
            raise InputError(f"{err}{_elsewhere(raw, config_class)}") from None
        config.check(where)
        return config

    def check(self, where: str) -> None:
        """Validate and normalise the fields at parse time; raise `ValueError` naming `where` and the field. A
        subclass checks its own fields after calling this."""
        self.name = str(self.name or self.type.replace(":", ".").rpartition(".")[2])
        check_count(self.max_items, f"{where}.max_items")
        check_count(self.max_new_tokens, f"{where}.max_new_tokens", optional=False)


def _elsewhere(raw: dict, config_class: type) -> str:
    """`` (`hint` is a field of mcqa / oeg evaluators)`` for the keys of `raw` that are another type's fields."""
    own = {f.name for f in fields(config_class)}
    types = [(t, evaluator_class(t).config_class) for t in evaluator_types()]
    notes = []
    for key in sorted(set(raw) - own):
        owners = [t for t, c in types if key in {f.name for f in fields(c)}]
        if owners:
            notes.append(f"`{key}` is a field of {' / '.join(owners)} evaluators")
    return f" ({'; '.join(notes)})" if notes else ""


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
        config (`EvaluatorConfig`): its configuration, of its ``config_class`` (``name``, ``max_items``, the
            type's own fields).
        progress (`bool`, *optional*): progress bars while generating / judging; `None`: on when stderr is a
            terminal, on the main process (`show_progress`).
        log_samples (`int`, *optional*, defaults to `4`): rows of the sample table.
        items (`list`, *optional*): the episodes / environments to evaluate, instead of those the config names.
    """

    SAMPLE_COLUMNS = ["evaluator", "id", "task", "targets", "responses", "score"]
    #: the dataclass of its ``eval_callback`` entry: `EvaluatorConfig` or a subclass with the type's own fields
    config_class: type = EvaluatorConfig
    #: generate() stores each finished item through its `writer`, so an interrupted run can resume
    resumable = False
    #: the files of its folder that `score` writes its records to, one a line, for a resumed run to read
    #: (`writer.write_record`); empty: the streaming predictions format (`writer.write(id, outputs)`)
    records_files: tuple[str, ...] = ()

    def __init__(self, config, progress: bool | None = False, log_samples: int = 4, items: list | None = None):
        self.config, self.name = config, config.name
        self.progress, self.log_samples = show_progress(progress), int(log_samples)
        self._items = list(items) if items is not None else None

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
