"""Evaluators ``type: ovo_bench`` and ``type: streamingbench_po``: the model on the official annotation files under
the ``official`` or ``streaming`` protocol (`proactive_rl.evaluation.stream_bench`), scored by the official rules
(`proactive_eval.stream_bench_score`), beside the blind floor and the speed columns.

    eval_callback:
      evaluators:
        - {type: ovo_bench, annotations: data/ovo_bench_new.json, video_root: data/src_videos, protocol: streaming}
        - {type: streamingbench_po, annotations: src/data/questions_proactive.json, protocol: official}

Each writes the official results file of its benchmark to its folder (``ovo_bench_results.json`` /
``streamingbench_po_results.json``; the authors' ``score.py`` / ``count.py`` read them) and ``results.json``.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from proactive_eval.formats.ovo_bench import load_ovo_bench
from proactive_eval.formats.streamingbench import load_streamingbench_po
from proactive_eval.stream_bench_run import Speed, run_po_proactive
from proactive_eval.stream_bench_score import ovo_bench_summary, streamingbench_summary
from proactive_rl.evaluation.base import Evaluator, Scored, register_evaluator
from proactive_rl.evaluation.stream_bench import (
    PROTOCOLS,
    ClipPrompter,
    ovo_results,
    ovo_video_groups,
    run_ovo_group,
    run_po_question,
)

MODEL_KEY = "proactive_rl"  # the model's key in a StreamingBench results file


@dataclass
class BenchItem:
    """One unit of work: a video's OVO-Bench records, or one Proactive Output question (its index)."""

    id: str
    value: Any


class _StreamBenchEvaluator(Evaluator):
    results_name = ""
    protocols = PROTOCOLS

    @classmethod
    def check_config(cls, config, where: str) -> None:
        if not config.annotations or not Path(config.annotations).is_file():
            raise ValueError(
                f"{where}.annotations: the official annotation file is needed, got {config.annotations!r}"
            )
        if config.protocol == "filtered":  # the field's default (an MCQA setting): this type's default instead
            config.protocol = "streaming"
        if config.protocol not in cls.protocols:
            raise ValueError(f"{where}.protocol: expected one of {', '.join(cls.protocols)}, got {config.protocol!r}")

    def generate(self, model, processor, items: list, writer=None) -> list[dict]:
        self.items()  # the loaded annotations (`bench`)
        prompter = ClipPrompter(model, processor, self.config.max_new_tokens)
        if self.config.protocol == "proactive":  # the model's own response time: a state-token streaming policy
            # deferred: tests monkeypatch this name where it is defined
            from proactive_rl.evaluation.policy import model_policy

            prompter = model_policy(model, processor, self.config.max_new_tokens)
        start = time.perf_counter()
        records = [{"id": item.id, "out": self._run(prompter, item.value)} for item in self._progress(items, "item")]
        speed = getattr(prompter, "speed", None) or Speed()
        speed.wall_s = time.perf_counter() - start
        return records + [{"id": "~speed", "speed": speed.summary()}]

    def _speed(self, records: list[dict]) -> tuple[list[dict], dict]:
        """The run's records and its speed (rank shards: the walls add, the latencies are the first rank's)."""
        speeds = [r["speed"] for r in records if "speed" in r]
        speed = dict(speeds[0]) if speeds else {}
        for key in ("wall_s", "video_frames", "frames_encoded", "calls"):
            speed[key] = sum(s[key] for s in speeds)
        speed["frames_per_s"] = speed["video_frames"] / speed["wall_s"] if speed.get("wall_s") else None
        return [r["out"] for r in records if "speed" not in r], speed

    def _write(self, out_dir, results, summary) -> dict[str, str]:
        if out_dir is None:
            return {}
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        paths = {"official_results": out_dir / self.results_name, "results": out_dir / "results.json"}
        paths["official_results"].write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
        paths["results"].write_text(json.dumps(summary, indent=1, ensure_ascii=False) + "\n")
        return {k: str(v) for k, v in paths.items()}


@register_evaluator("ovo_bench")
class OVOBenchEvaluator(_StreamBenchEvaluator):
    """OVO-Bench (backward, real-time, forward): per-task accuracy, category means and overall, in percent."""

    results_name = "ovo_bench_results.json"

    def _load(self) -> list:
        self.bench = load_ovo_bench(self.config.annotations, video_root=self.config.video_root)
        return [BenchItem(group["video"], group) for group in ovo_video_groups(self.bench)]

    def _run(self, prompter, group) -> list[dict]:
        return run_ovo_group(prompter, group, self.config.protocol)

    def score(self, records, out_dir, plots=True) -> Scored:
        records, speed = self._speed(records)
        results = ovo_results([r for out in records for r in out])
        summary = ovo_bench_summary([r for item in self.items() for r in item.value["records"]], results)
        summary.update(protocol=self.config.protocol, speed=speed)
        metrics = {f"{task}": value for task, value in summary["tasks"].items()}
        metrics.update({k: v for k, v in summary["categories"].items() if v is not None})
        if summary["overall"] is not None:
            metrics["overall"] = summary["overall"]
        metrics["frames_per_s"] = speed.get("frames_per_s") or 0.0
        return Scored(metrics, summary, files=self._write(out_dir, results, summary))


@register_evaluator("streamingbench_po")
class StreamingBenchPOEvaluator(_StreamBenchEvaluator):
    """StreamingBench Proactive Output: time accuracy and answer accuracy per task type (fractions)."""

    results_name = "streamingbench_po_results.json"
    #: ``proactive``: a state-token model watching from the question on, its first response the answer
    protocols = (*PROTOCOLS, "proactive")

    def _load(self) -> list:
        self.bench = load_streamingbench_po(self.config.annotations, video_root=self.config.video_root)
        return [BenchItem(f"question-{i}", i) for i in range(len(self.bench.questions))]

    def _run(self, prompter, index) -> dict:
        if self.config.protocol == "proactive":
            return {"index": index, "output": run_po_proactive(prompter, self.bench, index)}
        return {"index": index, "output": run_po_question(prompter, self.bench, index, self.config.protocol)}

    def score(self, records, out_dir, plots=True) -> Scored:
        records, speed = self._speed(records)
        self.items()
        entries = json.loads(json.dumps(self.bench.entries))
        for record in records:
            q = self.bench.questions[record["index"]]
            entries[q.entry]["questions"][q.index][MODEL_KEY] = record["output"]
        summary = streamingbench_summary(self.bench.entries, entries, MODEL_KEY)
        summary.update(protocol=self.config.protocol, speed={**summary["speed"], **speed})
        metrics = {}
        for task, stats in summary["tasks"].items():
            metrics[f"{task}/time_accuracy"] = stats["time_accuracy"]
            metrics[f"{task}/answer_accuracy"] = stats["answer_accuracy"]
        metrics["frames_per_s"] = speed.get("frames_per_s") or 0.0
        return Scored(metrics, summary, files=self._write(out_dir, entries, summary))
