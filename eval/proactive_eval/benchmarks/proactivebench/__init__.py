"""ProactiveBench (MCQA acc / ps and OEG agg, docs/spec.md §6), registered as ``proactivebench``: records, protocol,
environments, metric, blind policy, reports and the `proactive-eval mcqa` command; played by the ``mcqa`` and
``oeg`` evaluators."""

from proactive_eval.benchmarks.registry import Benchmark, register_benchmark

BENCHMARK = register_benchmark(
    Benchmark(name="proactivebench", title="ProactiveBench", evaluators=("mcqa", "oeg"), doc="docs/proactivebench.md")
)
