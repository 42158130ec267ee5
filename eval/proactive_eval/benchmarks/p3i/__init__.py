"""P³I-Bench (PRS-U / PRS-B, docs/spec.md §4), registered as ``p3i``: the episode format, the metric and the blind
schedule; played through the streaming engine by the ``prs`` evaluator and ``proactive-eval score|run --episodes``."""

from proactive_eval.benchmarks.p3i.blind import blind_prs_summary
from proactive_eval.benchmarks.p3i.format import convert_p3i
from proactive_eval.benchmarks.registry import Benchmark, register_benchmark

BENCHMARK = register_benchmark(
    Benchmark(
        name="p3i",
        title="P³I-Bench",
        load=convert_p3i,
        blind_floor=blind_prs_summary,  # leave-one-out, α = 0.05, token-F1 content: `baseline --episodes`' default
        evaluators=("prs",),
        doc="docs/evaluation.md",
    )
)
