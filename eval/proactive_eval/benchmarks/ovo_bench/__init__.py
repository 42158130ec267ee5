"""OVO-Bench (docs/ovo_bench.md), registered as ``ovo_bench``: the annotation loader (`format`), the official scorer
(`metric`), a results object matched to the annotations (`match`), ``results.json`` and the blind floor (`score`)
and the protocols (`run`)."""

from proactive_eval.benchmarks.ovo_bench.format import load_ovo_bench
from proactive_eval.benchmarks.ovo_bench.run import ovo_items, ovo_run_results, run_ovo_item
from proactive_eval.benchmarks.ovo_bench.score import ovo_blind_floor, ovo_metrics, ovo_summary
from proactive_eval.benchmarks.registry import Benchmark, register_benchmark
from proactive_eval.benchmarks.stream_bench.report import report_text

BENCHMARK = register_benchmark(
    Benchmark(
        name="ovo_bench",
        title="OVO-Bench",
        load=load_ovo_bench,
        items=ovo_items,
        run_item=run_ovo_item,
        results=ovo_run_results,
        summary=ovo_summary,
        blind_floor=ovo_blind_floor,
        metrics=ovo_metrics,
        report_text=report_text,
        results_file="ovo_bench_results.json",
        protocols=("streaming", "official"),
        doc="docs/ovo_bench.md",
    )
)
