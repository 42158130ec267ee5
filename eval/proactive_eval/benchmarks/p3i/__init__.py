"""P³I-Bench (PRS-U / PRS-B, docs/spec.md §4), registered as ``p3i``: the episode format, the metric, the blind
schedule and ``results.json`` (`score`); an episode is one item, played by a state-token policy
(`proactive_eval.benchmarks.episode_run`). The ``prs`` evaluator plays it with counterfactual rows as well."""

from proactive_eval.benchmarks.episode_run import (
    PREDICTIONS_FILE,
    PROTOCOL,
    episode_items,
    episode_loader,
    episode_results,
    read_predictions,
    run_episode_item,
)
from proactive_eval.benchmarks.p3i.blind import blind_prs_summary
from proactive_eval.benchmarks.p3i.format import convert_p3i
from proactive_eval.benchmarks.p3i.score import p3i_metrics, p3i_report_text, p3i_summary
from proactive_eval.benchmarks.registry import Benchmark, register_benchmark

BENCHMARK = register_benchmark(
    Benchmark(
        name="p3i",
        title="P³I-Bench",
        load=episode_loader(convert_p3i, lambda episode: episode.task != "pvqa", "pvqa"),
        items=episode_items,
        run_item=run_episode_item,
        results=episode_results,
        summary=p3i_summary,
        blind_floor=blind_prs_summary,  # leave-one-out, α = 0.05, token-F1 content: `baseline --episodes`' default
        metrics=p3i_metrics,
        report_text=p3i_report_text,
        results_file=PREDICTIONS_FILE,
        read_results=read_predictions,
        protocols=(PROTOCOL,),
        policy_protocols=(PROTOCOL,),
        evaluators=("prs",),
        doc="docs/evaluation.md",
    )
)
