"""One package per benchmark: its format, metric, blind floor and protocol, registered once by name
(docs/architecture.md, "A new benchmark").

`BENCHMARKS` maps each name to its `Benchmark`; `get_benchmark(name)` is how every command finds one. The library's
own benchmarks register themselves when their package is imported, below: ``p3i``, ``pvqa``, ``proactivebench``,
``ovo_bench`` and ``streamingbench_po`` (``stream_bench`` is code the last two share, not a benchmark).
"""

from proactive_eval.benchmarks import ovo_bench, p3i, proactivebench, pvqa, streamingbench_po  # noqa: F401 - register
from proactive_eval.benchmarks.registry import (
    BENCHMARKS,
    Benchmark,
    benchmark_names,
    get_benchmark,
    register_benchmark,
)

__all__ = ["BENCHMARKS", "Benchmark", "benchmark_names", "get_benchmark", "register_benchmark"]
