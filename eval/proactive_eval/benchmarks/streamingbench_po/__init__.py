"""StreamingBench Proactive Output (docs/streamingbench.md), registered as ``streamingbench_po``: the question loader
(`format`), the official scorer (`metric`), a results file matched to the questions (`match`), ``results.json`` and
the blind floor (`score`) and the protocols (`run`; ``proactive``: a state-token `StreamingPolicy` answering when it
decides to, `run_po_proactive`)."""

from proactive_eval.benchmarks.registry import Benchmark, register_benchmark
from proactive_eval.benchmarks.stream_bench.report import report_text
from proactive_eval.benchmarks.streamingbench_po.format import load_streamingbench_po
from proactive_eval.benchmarks.streamingbench_po.run import MODEL_KEY, po_items, po_run_results, run_po_item
from proactive_eval.benchmarks.streamingbench_po.score import po_metrics, po_summary, streamingbench_blind_floor

BENCHMARK = register_benchmark(
    Benchmark(
        name="streamingbench_po",
        title="StreamingBench Proactive Output",
        load=load_streamingbench_po,
        items=po_items,
        run_item=run_po_item,
        results=po_run_results,
        summary=po_summary,
        blind_floor=streamingbench_blind_floor,
        metrics=po_metrics,
        report_text=report_text,
        results_file="streamingbench_po_results.json",
        results_model=MODEL_KEY,
        protocols=("streaming", "official", "proactive"),
        policy_protocols=("proactive",),
        doc="docs/streamingbench.md",
    )
)
