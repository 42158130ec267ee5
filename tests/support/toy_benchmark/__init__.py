"""A benchmark outside the library, in one folder: what docs/architecture.md "A new benchmark" asks for.

Its format (`format.load_toy`), scorer and blind floor (`metric`) and item runner (`run`) are registered as
``toy`` by `register()`; from then on ``proactive-eval score|baseline|run --benchmark toy`` and the
``proactive-rl eval`` evaluator ``type: toy`` run it with no library file changed (`tests/eval/test_toy_benchmark.py`).
"""

from proactive_eval.benchmarks.registry import Benchmark, register_benchmark
from tests.support.toy_benchmark import metric, run
from tests.support.toy_benchmark.format import load_toy

BENCHMARK = Benchmark(
    name="toy",
    title="Toy frame counting",
    load=load_toy,
    items=run.items,
    run_item=run.run_item,
    results=run.results,
    summary=metric.summary,
    blind_floor=metric.blind_floor,
    metrics=metric.metrics,
    report_text=metric.report_text,
    results_file="toy_results.json",
    protocols=("official",),
    doc="tests/support/toy_benchmark/__init__.py",
)


def register() -> Benchmark:
    """Add `BENCHMARK` to the registry (again: a no-op); the caller restores the registry when done."""
    return register_benchmark(BENCHMARK)
