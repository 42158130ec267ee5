"""A benchmark from outside the library (`tests/support/toy_benchmark`), registered at run time, is an evaluator type
of its own name: ``{type: toy, annotations: ...}`` in an ``eval_callback`` block runs it through the training
callback's path (`EvalCallbackConfig` → `evaluate_model`, `ProactiveEvalCallback`) with no library file changed.

The annotations ask "how many frames have you seen?" on one 6-second video at 1 frame per second, at 2, 3, 3 and
5 s: the gold answers are "2", "3", "3", "5"; the blind floor answers the most frequent gold, "3": 2 of 4, 50 %.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from proactive_eval.benchmarks.stream_bench.run import Speed
from proactive_eval.video import write_video
from proactive_rl.evaluation import (
    BenchmarkEvaluator,
    EvalCallbackConfig,
    ProactiveEvalCallback,
    build_evaluators,
    evaluate_model,
)
from proactive_rl.evaluation.base import evaluator_class
from proactive_rl.evaluation.stream_bench import ClipPrompter
from tests.support.toy_benchmark import run
from tests.support.toy_benchmark.format import load_toy

TIMES = {"a": 2, "b": 3, "c": 3, "d": 5}


@pytest.fixture
def annotations(tmp_path):
    pytest.importorskip("av")
    write_video(tmp_path / "v.mp4", [np.full((32, 32, 3), 20 * k, np.uint8) for k in range(6)], fps=1.0)
    question = "How many frames have you seen?"
    records = [
        {"id": i, "video": "v.mp4", "time": t, "question": question, "answer": str(t)} for i, t in TIMES.items()
    ]
    (tmp_path / "toy.json").write_text(json.dumps(records))
    return str(tmp_path / "toy.json")


@pytest.fixture(scope="module")
def tiny():
    from proactive_rl.models import build_tiny

    return build_tiny("qwen2_5_vl", "xs", seed=0)


def by_hand(official: list[dict]) -> dict[str, float]:
    """The toy's metrics worked from its rules: percent of the 4 questions whose stripped response is the gold."""
    right = sum(r["response"].strip() == str(TIMES[r["id"]]) for r in official)
    return {"accuracy": 100 * right / 4, "blind_floor": 50.0}


def test_unregistered_it_is_no_evaluator_type():
    with pytest.raises(ValueError, match=r"evaluators\[0\].type: expected one of prs, pauc, mcqa, oeg, ") as info:
        EvalCallbackConfig.from_dict({"evaluators": [{"type": "toy", "annotations": "toy.json"}]})
    assert "ovo_bench, p3i, pvqa, streamingbench_po" in str(info.value) and "toy," not in str(info.value)


def test_the_tiny_model_through_the_callback_path(toy, annotations, tiny, tmp_path):
    model, processor = tiny
    block = {"evaluators": [{"type": "toy", "annotations": annotations, "max_new_tokens": 3}]}
    config = EvalCallbackConfig.from_dict(block)
    [evaluator_config] = config.evaluators
    assert evaluator_class("toy") is BenchmarkEvaluator
    assert (evaluator_config.name, evaluator_config.protocol, evaluator_config.video_root) == ("toy", "official", None)
    results = evaluate_model(model, processor, build_evaluators(config.evaluators), out_dir=tmp_path / "eval")
    assert results["complete"], results["incomplete"]

    folder = tmp_path / "eval" / "toy"
    official = json.loads((folder / "toy_results.json").read_text())
    summary = json.loads((folder / "results.json").read_text())
    assert results["evaluators"]["toy"]["files"] == {
        "official_results": str(folder / "toy_results.json"),
        "results": str(folder / "results.json"),
    }
    assert json.loads((tmp_path / "eval" / "results.json").read_text())["metrics"] == results["metrics"]
    # the official file holds what the model answers to each question, asked on its own
    bench = load_toy(annotations)
    prompter = ClipPrompter(model, processor, max_new_tokens=3)
    assert official == [run.run_item(prompter, bench, record) for record in bench.records]
    expected = by_hand(official)
    assert results["metrics"] == {"toy/accuracy": expected["accuracy"], "toy/blind_floor": 50.0,
                                  "toy/frames_per_s": 0.0}  # fmt: skip
    assert summary["accuracy"] == expected["accuracy"] and summary["blind_floor"] == {"answer": "3", "accuracy": 50.0}
    assert summary["coverage"] == {"expected": 4, "answered": 4, "missing": 0} and summary["protocol"] == "official"
    assert summary["speed"]["calls"] == 4 and summary["speed"]["frames_encoded"] == 2 + 3 + 3 + 5


class CountingPrompter:
    """Answers how many frames it was shown, but "many" from 5 on: a, b, c right, d wrong (75 %)."""

    def __init__(self, model, processor, max_new_tokens=16):
        self.speed = Speed()

    def official(self, frames, prompt):
        self.speed.call_s.append(0.0)
        return "many" if len(frames) >= 5 else str(len(frames))


def test_a_training_callback_on_save_scores_the_answers(toy, annotations, tiny, tmp_path, monkeypatch):
    monkeypatch.setattr("proactive_rl.evaluation.benchmark.ClipPrompter", CountingPrompter)
    model, processor = tiny
    callback = ProactiveEvalCallback({"evaluators": [{"type": "toy", "name": "frames", "annotations": annotations}]})
    args = SimpleNamespace(output_dir=str(tmp_path), report_to=[], logging_dir=None)
    state = SimpleNamespace(global_step=3, is_world_process_zero=True)
    callback.on_save(args, state, None, model=model, processing_class=processor)

    out = tmp_path / "checkpoint-3" / "eval"
    official = json.loads((out / "frames" / "toy_results.json").read_text())
    assert official == [{"id": "a", "response": "2"}, {"id": "b", "response": "3"}, {"id": "c", "response": "3"},
                        {"id": "d", "response": "many"}]  # fmt: skip
    assert by_hand(official) == {"accuracy": 75.0, "blind_floor": 50.0}
    results = json.loads((out / "results.json").read_text())
    assert results["step"] == 3 and results["complete"]
    assert results["metrics"] == {"frames/accuracy": 75.0, "frames/blind_floor": 50.0, "frames/frames_per_s": 0.0}
    history = json.loads((tmp_path / "eval" / "history.jsonl").read_text())
    assert history["metrics"] == results["metrics"]
