"""ProactiveBench (MCQA acc / ps and OEG agg, docs/spec.md §6), registered as ``proactivebench``: records, protocol,
environments, metric, blind policy, reports, ``results.json`` of a replay answers file (`score`) and the
`proactive-eval mcqa` command. Its environments are interactive (an answer picks the next image), so a model plays
them through the ``mcqa`` and ``oeg`` evaluators or ``mcqa``, not item by item."""

from proactive_eval.benchmarks.proactivebench.blind import blind_mcqa_summary
from proactive_eval.benchmarks.proactivebench.score import (
    load_mcqa,
    mcqa_metrics,
    mcqa_report_text,
    mcqa_summary,
    read_answers_records,
)
from proactive_eval.benchmarks.registry import Benchmark, register_benchmark

BENCHMARK = register_benchmark(
    Benchmark(
        name="proactivebench",
        title="ProactiveBench",
        load=load_mcqa,
        summary=mcqa_summary,
        blind_floor=blind_mcqa_summary,
        metrics=mcqa_metrics,
        report_text=mcqa_report_text,
        read_results=read_answers_records,
        evaluators=("mcqa", "oeg"),
        doc="docs/proactivebench.md",
    )
)
