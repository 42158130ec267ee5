"""ProactiveVideoQA (PAUC, docs/spec.md §5), registered as ``pvqa``: the format, the metric, the blind answer and
``results.json`` under the rule judge (`score`); an episode is one item, played by a state-token policy
(`proactive_eval.benchmarks.episode_run`). The ``pauc`` evaluator and ``score --episodes`` take any judge."""

from proactive_eval.benchmarks.episode_run import (
    PREDICTIONS_FILE,
    PROTOCOL,
    episode_items,
    episode_loader,
    episode_results,
    read_predictions,
    run_episode_item,
)
from proactive_eval.benchmarks.pvqa.format import convert_pvqa
from proactive_eval.benchmarks.pvqa.score import pvqa_blind_floor, pvqa_metrics, pvqa_report_text, pvqa_summary
from proactive_eval.benchmarks.registry import Benchmark, register_benchmark

BENCHMARK = register_benchmark(
    Benchmark(
        name="pvqa",
        title="ProactiveVideoQA",
        load=episode_loader(convert_pvqa, lambda episode: episode.task == "pvqa", "p3i"),
        items=episode_items,
        run_item=run_episode_item,
        results=episode_results,
        summary=pvqa_summary,
        blind_floor=pvqa_blind_floor,
        metrics=pvqa_metrics,
        report_text=pvqa_report_text,
        results_file=PREDICTIONS_FILE,
        read_results=read_predictions,
        protocols=(PROTOCOL,),
        policy_protocols=(PROTOCOL,),
        evaluators=("pauc",),
        doc="docs/evaluation.md",
    )
)
