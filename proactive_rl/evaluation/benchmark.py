"""The evaluator of every benchmark registered in `proactive_eval.benchmarks` and run item by item
(`Benchmark.runnable`: OVO-Bench, StreamingBench Proactive Output, a new one): its ``type`` is the benchmark's name.

    eval_callback:
      evaluators:
        - {type: ovo_bench, annotations: data/ovo_bench_new.json, video_root: data/src_videos, protocol: streaming}
        - {type: streamingbench_po, annotations: src/data/questions_proactive.json, protocol: official}

The benchmark's items (`Benchmark.items`) are sharded over the ranks; each is put to the model by the benchmark's
`Benchmark.run_item`, through a `ClipPrompter` (`proactive_rl.evaluation.stream_bench`: ``official`` or ``streaming``)
or, under the benchmark's `Benchmark.policy_protocols`, a state-token streaming policy that decides by itself when
to speak. The outputs become the official results object (`Benchmark.results`), scored by the benchmark's own
scorer (`Benchmark.summary`: the official numbers beside the blind floor) and logged as `Benchmark.metrics`, with
the speed columns. Its folder holds the official results file (`Benchmark.results_file`; the authors' scripts read
it) and ``results.json``. A benchmark registered later (``register_benchmark``) is an evaluator type as well, with no
edit here (docs/architecture.md, "A new benchmark").
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks import get_benchmark
from proactive_eval.benchmarks.stream_bench.run import Speed
from proactive_rl.errors import InputError
from proactive_rl.evaluation.base import Evaluator, EvaluatorConfig, Scored, register_benchmark_evaluator
from proactive_rl.evaluation.stream_bench import ClipPrompter


@dataclass
class BenchmarkConfig(EvaluatorConfig):
    """A registered benchmark's evaluator (``type``: the benchmark's name): `EvaluatorConfig`'s fields and

    Args:
        annotations (`str`): the benchmark's official annotation file (`Benchmark.load`).
        video_root (`str`, *optional*): the folder the file's video paths are relative to (default: the file's
            folder).
        protocol (`str`, *optional*): how items are put to the model, one of the benchmark's `Benchmark.protocols`
            or `Benchmark.policy_protocols`; defaults to the first of its protocols (OVO-Bench, StreamingBench:
            ``streaming``; docs/ovo_bench.md, docs/streamingbench.md).
    """

    annotations: str | None = None
    video_root: str | None = None
    protocol: str | None = None

    def check(self, where: str) -> None:
        super().check(where)
        benchmark = get_benchmark(self.type, needs="runnable")
        if not self.annotations or not Path(self.annotations).is_file():
            raise InputError(f"{where}.annotations: the official annotation file is needed, got {self.annotations!r}")
        protocols = tuple(dict.fromkeys((*benchmark.protocols, *benchmark.policy_protocols)))
        self.protocol = protocols[0] if self.protocol is None else self.protocol
        if self.protocol not in protocols:
            raise InputError(f"{where}.protocol: expected one of {', '.join(protocols)}, got {self.protocol!r}")


@dataclass
class BenchItem:
    """One unit of work of a benchmark (`Benchmark.items`): its id and its value."""

    id: str
    value: Any


@register_benchmark_evaluator
class BenchmarkEvaluator(Evaluator):
    """A registered benchmark, item by item: its official numbers, blind floor and speed (module docstring)."""

    config_class = BenchmarkConfig

    def __init__(self, config, progress: bool | None = False, log_samples: int = 4, items: list | None = None):
        super().__init__(config, progress, log_samples, items)
        self.benchmark = get_benchmark(config.type, needs="runnable")
        self.loaded = None  # what `Benchmark.load` read from the annotations

    def _load(self) -> list:
        self.loaded = self.benchmark.load(self.config.annotations, video_root=self.config.video_root)
        return [BenchItem(item_id, value) for item_id, value in self.benchmark.items(self.loaded)]

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        self.items()  # the loaded annotations
        protocol = self.config.protocol
        if protocol in self.benchmark.policy_protocols:  # the model's own response time: a state-token policy
            # deferred: tests monkeypatch this name where it is defined
            from proactive_rl.evaluation.policy import model_policy

            prompter = model_policy(model, processor, self.config.max_new_tokens)
        else:
            prompter = ClipPrompter(model, processor, self.config.max_new_tokens)
        start = time.perf_counter()
        run = self.benchmark.run_item
        records = [
            {"id": item.id, "out": run(prompter, self.loaded, item.value, protocol)}
            for item in self._progress(items, "item")
        ]
        speed = getattr(prompter, "speed", None) or Speed()
        speed.wall_s = time.perf_counter() - start
        return records + [{"id": "~speed", "speed": speed.summary()}]

    def score(self, records, out_dir, plots=True) -> Scored:
        outputs, speed = _speed(records)  # in the items' order (`proactive_rl.evaluation.run.in_item_order`)
        self.items()
        official = self.benchmark.results(self.loaded, outputs)
        summary = self.benchmark.summary(self.loaded, official, model=self.benchmark.results_model)
        summary.update(protocol=self.config.protocol, speed={**summary.get("speed", {}), **speed})
        metrics = dict(self.benchmark.metrics(summary)) if self.benchmark.metrics is not None else {}
        metrics.setdefault("frames_per_s", speed.get("frames_per_s") or 0.0)
        return Scored(metrics, summary, files=self._write(out_dir, official, summary))

    def _write(self, out_dir, official, summary) -> dict[str, str]:
        """The official results file and ``results.json`` in `out_dir` (none without one)."""
        if out_dir is None:
            return {}
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        name = self.benchmark.results_file or f"{self.benchmark.name}_results.json"
        paths = {"official_results": out_dir / name, "results": out_dir / "results.json"}
        paths["official_results"].write_text(json.dumps(official, indent=1, ensure_ascii=False) + "\n")
        paths["results"].write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
        return {k: str(v) for k, v in paths.items()}


def _speed(records: list[dict]) -> tuple[list, dict]:
    """The items' outputs and the run's speed (rank shards: the walls add, the latencies are the first rank's)."""
    speeds = [r["speed"] for r in records if "speed" in r]
    speed = dict(speeds[0]) if speeds else {}
    for key in ("wall_s", "video_frames", "frames_encoded", "calls"):
        speed[key] = sum(s[key] for s in speeds)
    speed["frames_per_s"] = speed["video_frames"] / speed["wall_s"] if speed.get("wall_s") else None
    return [r["out"] for r in records if "speed" not in r], speed
