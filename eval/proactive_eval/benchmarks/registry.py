"""The benchmark registry: each benchmark registered once, under its one name (docs/architecture.md, "A new benchmark").

``proactive-eval score|baseline|run --benchmark NAME``, the evaluators of ``proactive-rl eval`` and the training
callback look a benchmark up here by name; none of them names a benchmark itself.

Example::

    register_benchmark(Benchmark(name="my_bench", title="MyBench", load=..., items=..., run_item=..., ...))
    bench = get_benchmark("my_bench")
    summary = bench.summary(bench.load("annotations.json"), json.loads(Path("results.json").read_text()))
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from proactive_eval.errors import InputError

NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class Benchmark:
    """One benchmark: what each command needs of it. A benchmark put to a model item by item (P³I and ProactiveVideoQA
    an episode at a time, OVO-Bench, StreamingBench Proactive Output, a new one) gives every callable; ProactiveBench,
    whose environments are interactive, gives what scoring needs (load, summary, blind floor) and names the
    evaluators that play it in `evaluators`.

    Args:
        name (`str`): the one spelling, everywhere: ``--benchmark`` value, evaluator ``type``, results folder.
        title (`str`): as its paper writes it, for reports.
        load (`Callable`, *optional*): ``load(annotations, video_root=None) -> loaded``: the official annotation
            file checked (an `InputError` / `EpisodeError` naming file, record and field).
        items (`Callable`, *optional*): ``items(loaded) -> [(id, value), ...]``, the units of work (a run's shards).
        run_item (`Callable`, *optional*): ``run_item(prompter, loaded, value, protocol) -> output``: one unit put
            to a prompter (a `StreamingPolicy` under the protocols in `policy_protocols`); JSON-serialisable.
        results (`Callable`, *optional*): ``results(loaded, outputs) -> official``: the official results object from
            the outputs, in `items` order.
        summary (`Callable`, *optional*): ``summary(loaded, official, file="predictions", model=None) -> dict``:
            the ``results.json`` of an official results object (score beside the blind floor, coverage, speed),
            matched to the annotations, the only source of gold.
        blind_floor (`Callable`, *optional*): ``blind_floor(loaded) -> dict``: the best never-looking answerer
            fitted on the annotations, scored by the same scorer.
        metrics (`Callable`, *optional*): ``metrics(summary) -> {name: float}``, what a training callback logs.
        report_text (`Callable`, *optional*): ``report_text(summary) -> str``, the short table a command prints.
        results_file (`str`, *optional*): the official results file a run writes beside ``results.json``.
        read_results (`Callable`, *optional*): ``read_results(path) -> official``: how ``score --benchmark`` reads
            a results file (default: one JSON document; the episode benchmarks read JSONL as well).
        results_model (`str`, *optional*): where an official results file holds several models' outputs
            (StreamingBench), the key `results` writes a run's under; a run's summary is
            ``summary(loaded, official, model=results_model)``.
        protocols (`tuple[str, ...]`): the protocols `run_item` accepts, the default first.
        policy_protocols (`tuple[str, ...]`): those whose prompter is a state-token `StreamingPolicy`.
        evaluators (`tuple[str, ...]`): ``proactive_rl`` evaluator types of its own (none: the generic one).
        doc (`str`): its page, e.g. ``docs/ovo_bench.md``.
    """

    name: str
    title: str
    load: Callable[..., Any] | None = None
    items: Callable[[Any], list[tuple[str, Any]]] | None = None
    run_item: Callable[..., Any] | None = None
    results: Callable[[Any, list], Any] | None = None
    summary: Callable[..., dict[str, Any]] | None = None
    blind_floor: Callable[[Any], dict[str, Any]] | None = None
    metrics: Callable[[dict[str, Any]], dict[str, float]] | None = None
    report_text: Callable[[dict[str, Any]], str] | None = None
    results_file: str | None = None
    protocols: tuple[str, ...] = ("official",)
    policy_protocols: tuple[str, ...] = ()
    evaluators: tuple[str, ...] = ()
    doc: str = ""
    results_model: str | None = None
    read_results: Callable[[Any], Any] | None = None

    def __post_init__(self):
        if not NAME.fullmatch(self.name):
            raise ValueError(f"benchmark name {self.name!r}: lower-case letters, digits and '_' (one spelling)")

    @property
    def runnable(self) -> bool:
        """Whether every callable of an item-by-item run is given (the generic evaluator and ``run`` need them)."""
        return all(getattr(self, f) is not None for f in ("load", "items", "run_item", "results", "summary"))


BENCHMARKS: dict[str, Benchmark] = {}


def register_benchmark(benchmark: Benchmark) -> Benchmark:
    """Add `benchmark` to the registry; a name already taken by another benchmark is an error."""
    if BENCHMARKS.get(benchmark.name, benchmark) is not benchmark:
        raise ValueError(f"benchmark {benchmark.name!r} is already registered")
    BENCHMARKS[benchmark.name] = benchmark
    return benchmark


def get_benchmark(name: str, needs: str | None = None) -> Benchmark:
    """The registered benchmark `name`, or an `InputError` listing the names (and, with `needs`, those that have it)."""
    benchmark = BENCHMARKS.get(name)
    able = sorted(n for n, b in BENCHMARKS.items() if needs is None or bool(getattr(b, needs)))
    if benchmark is None:
        spelled = str(name).lower().replace("-", "_")
        if spelled != name and spelled in BENCHMARKS:  # an old or hyphenated spelling: one spelling everywhere
            raise InputError(f"unknown benchmark {name!r}: it is spelled {spelled!r}")
        raise InputError(f"unknown benchmark {name!r}; expected one of {', '.join(able)}")
    if needs is not None and not getattr(benchmark, needs):
        raise InputError(f"benchmark {name!r} has no {needs}; benchmarks that do: {', '.join(able)}")
    return benchmark


def benchmark_names(needs: str | None = None) -> list[str]:
    """The registered names, sorted (only those whose field `needs` is set, e.g. "blind_floor" or "runnable")."""
    return sorted(n for n, b in BENCHMARKS.items() if needs is None or bool(getattr(b, needs)))
