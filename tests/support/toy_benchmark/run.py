"""Putting the toy benchmark to a model, item by item: each question is asked once on the frames of its video up to
its ``time`` (1 frame per second), through any prompter with ``official(frames, prompt) -> text``
(`proactive_eval.benchmarks.stream_bench.run.EndpointPrompter`, `proactive_rl.evaluation.stream_bench.ClipPrompter`)."""

from __future__ import annotations

import math

from proactive_eval.video import read_video_frames
from tests.support.toy_benchmark.format import ToyBench

FPS = 1.0
PROMPT = "{question}\nAnswer with one word."


def items(bench: ToyBench) -> list[tuple[str, dict]]:
    """One unit of work per question: ``(id, record)``."""
    return [(r["id"], r) for r in bench.records]


def run_item(prompter, bench: ToyBench, record: dict, protocol: str = "official") -> dict:
    """``{"id", "response"}`` of one question: its frames ``[0, time)`` and prompt in one call."""
    times = [k / FPS for k in range(math.ceil(record["time"] * FPS))]
    frames = [f for _, f in read_video_frames(bench.videos[record["id"]], times)]
    return {"id": record["id"], "response": prompter.official(frames, PROMPT.format(question=record["question"]))}


def results(bench: ToyBench, outputs: list[dict]) -> list[dict]:
    """The official results list of a run: the outputs as they are, in `items` order."""
    return list(outputs)
