"""ProactiveVideoQA (PAUC, docs/spec.md §5), registered as ``pvqa``: the format, the metric and the blind answer;
played through the streaming engine by the ``pauc`` evaluator and ``proactive-eval score|run --episodes`` (its blind
floor needs the evaluation's judge: ``proactive-eval baseline --episodes anno.json --judge ...``)."""

from proactive_eval.benchmarks.pvqa.format import convert_pvqa
from proactive_eval.benchmarks.registry import Benchmark, register_benchmark

BENCHMARK = register_benchmark(
    Benchmark(name="pvqa", title="ProactiveVideoQA", load=convert_pvqa, evaluators=("pauc",), doc="docs/evaluation.md")
)
