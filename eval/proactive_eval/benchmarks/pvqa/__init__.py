"""ProactiveVideoQA (PAUC, docs/spec.md §5), registered as ``pvqa``: the format, the metric, the blind answer and
``results.json`` under the rule judge (`score`); an episode is one item, played by a state-token policy
(`proactive_eval.benchmarks.episode_run`). The ``pauc`` evaluator and ``score --episodes`` take any judge."""

from proactive_eval.benchmarks.episode_run import episode_benchmark, episode_loader
from proactive_eval.benchmarks.pvqa.format import convert_pvqa
from proactive_eval.benchmarks.pvqa.score import pvqa_blind_floor, pvqa_metrics, pvqa_report_text, pvqa_summary
from proactive_eval.benchmarks.registry import register_benchmark

BENCHMARK = register_benchmark(
    episode_benchmark(
        name="pvqa",
        title="ProactiveVideoQA",
        load=episode_loader(convert_pvqa, lambda episode: episode.task == "pvqa", "p3i"),
        summary=pvqa_summary,
        blind_floor=pvqa_blind_floor,
        metrics=pvqa_metrics,
        report_text=pvqa_report_text,
        evaluators=("pauc",),
        doc="docs/evaluation.md",
    )
)
