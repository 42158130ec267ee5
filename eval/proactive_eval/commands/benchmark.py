"""``proactive-eval score|baseline|run --benchmark NAME``: any registered benchmark, through its `Benchmark` alone
(`proactive_eval.benchmarks.registry`; docs/architecture.md, "A new benchmark").

    proactive-eval score --benchmark ovo_bench --annotations ovo_bench_new.json --predictions results.json --out r/
    proactive-eval baseline --benchmark streamingbench_po --annotations questions_proactive.json
    proactive-eval run --benchmark ovo_bench --annotations ovo_bench_new.json --video-root src_videos \\
        --policy openai:MODEL@http://localhost:8000/v1 --out run/

``score`` writes ``DIR/results.json``: the benchmark's summary of an official results file (its numbers beside the
blind floor, coverage, speed); ``baseline`` prints the blind floor of the annotations; ``run`` puts every item to
an OpenAI-compatible server under the ``official`` protocol and writes the official results file beside
``results.json`` (the summary of that file, with the run's speed).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks import get_benchmark
from proactive_eval.benchmarks.stream_bench.run import Speed
from proactive_eval.common.stream_files import read_json, shown
from proactive_eval.errors import InputError


def _load(bench, annotations, video_root):
    """The annotations of `bench`, loaded and checked by its loader."""
    if bench.load is None:
        raise InputError(f"benchmark {bench.name!r} has no loader for --annotations")
    if annotations is None:
        raise InputError("--annotations is required with --benchmark (the official annotation file)")
    return bench.load(annotations, video_root=video_root)


def score_benchmark(
    name: str, annotations, predictions, out=None, model: str | None = None, video_root=None
) -> dict[str, Any]:
    """The summary of the official results file `predictions` against `annotations`; ``out/results.json`` when
    `out` is given (`model`: the outputs' key where the file holds several models', e.g. StreamingBench's)."""
    bench = get_benchmark(name, needs="summary")
    loaded = _load(bench, annotations, video_root)
    official = bench.read_results(predictions) if bench.read_results else read_json(predictions, "--predictions")
    report = bench.summary(loaded, official, file=shown(predictions), model=model)
    report["meta"] = {"annotations": str(annotations), "predictions": str(predictions)}
    if out is not None:
        path = Path(out) / "results.json"
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
            report["meta"]["results_json"] = str(path)
            path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
        except OSError as err:
            raise InputError(f"--out: cannot write {shown(path)}: {err.strerror or err}") from None
    return report


def baseline_benchmark(name: str, annotations, video_root=None) -> dict[str, Any]:
    """``{"benchmark", "blind_floor"}``: the blind floor fitted on `annotations` and scored by the benchmark's
    scorer (the row `score` and `run` report beside a model's numbers)."""
    bench = get_benchmark(name, needs="blind_floor")
    return {"benchmark": bench.name, "blind_floor": bench.blind_floor(_load(bench, annotations, video_root))}


def write_run(out, results_file: str | None, official: Any, summary: dict[str, Any]) -> dict[str, str]:
    """Write a run's official results (``out/results_file``, where the benchmark has one) and ``results.json``;
    return their paths (``official_results``, ``results``)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"results": out / "results.json"}
    if results_file is not None:
        paths = {"official_results": out / results_file, **paths}
        paths["official_results"].write_text(json.dumps(official, indent=1, ensure_ascii=False) + "\n")
    paths["results"].write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
    return {k: str(v) for k, v in paths.items()}


def run_benchmark(name: str, annotations, prompter, protocol: str, out, video_root=None) -> dict[str, Any]:
    """Put every item of the benchmark's annotation file to `prompter` under `protocol`; write the official results
    file and ``results.json`` (the summary, the protocol, the run's speed, the missing videos) to `out`; return the
    summary."""
    bench = get_benchmark(name, needs="runnable")
    if protocol not in bench.protocols:
        raise InputError(f"benchmark {name!r} has no {protocol} protocol; it has {', '.join(bench.protocols)}")
    start = time.perf_counter()
    loaded = _load(bench, annotations, video_root)
    outputs = [bench.run_item(prompter, loaded, value, protocol) for _, value in bench.items(loaded)]
    official = bench.results(loaded, outputs)
    speed = getattr(prompter, "speed", None) or Speed()
    speed.wall_s = time.perf_counter() - start
    summary = bench.summary(loaded, official, model=bench.results_model)
    missing = getattr(loaded, "missing", [])
    summary.update(protocol=protocol, speed={**summary.get("speed", {}), **speed.summary()}, missing_videos=missing)
    summary["meta"] = {"annotations": str(annotations), "results_json": str(Path(out) / "results.json")}
    write_run(out, bench.results_file, official, summary)
    return summary
