"""P³I-Bench (PRS-U / PRS-B, docs/spec.md §4), registered as ``p3i``: the episode format, the metric, the blind
schedule and ``results.json`` (`score`); an episode is one item, played by a state-token policy
(`proactive_eval.benchmarks.episode_run`). The ``prs`` evaluator plays it with counterfactual rows as well."""

from proactive_eval.benchmarks.episode_run import episode_benchmark, episode_loader
from proactive_eval.benchmarks.p3i.blind import blind_prs_summary
from proactive_eval.benchmarks.p3i.format import convert_p3i
from proactive_eval.benchmarks.p3i.score import p3i_metrics, p3i_report_text, p3i_summary
from proactive_eval.benchmarks.registry import register_benchmark

BENCHMARK = register_benchmark(
    episode_benchmark(
        name="p3i",
        title="P³I-Bench",
        load=episode_loader(convert_p3i, lambda episode: episode.task != "pvqa", "pvqa"),
        summary=p3i_summary,
        blind_floor=blind_prs_summary,  # leave-one-out, α = 0.05, token-F1 content: `baseline --episodes`' default
        metrics=p3i_metrics,
        report_text=p3i_report_text,
        evaluators=("prs",),
        doc="docs/evaluation.md",
    )
)
