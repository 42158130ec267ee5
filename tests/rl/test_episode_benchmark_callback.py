"""``{type: p3i, annotations: ...}`` in an ``eval_callback`` block: P³I-Bench through the registry's item API
(`proactive_eval.benchmarks.episode_run`) with a tiny model's own state-token policy, giving the PRS of the
``prs`` evaluator on the same episodes (the reference: its own batching, matching and report code)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proactive_rl.evaluation import BenchmarkEvaluator, EvalCallbackConfig, build_evaluators, evaluate_model
from proactive_rl.evaluation.base import evaluator_class


@pytest.fixture
def annotations(tmp_path):
    """Two synthetic ``accident`` episodes (10-14 frames, one warning each) as an episodes file with videos."""
    pytest.importorskip("av")
    from proactive_rl.synthetic import generate_episodes
    from proactive_rl.synthetic.export import export_episodes

    export_episodes(tmp_path, generate_episodes("accident", 2, 1, duration=[10, 14]))
    return str(tmp_path / "episodes.json")


def test_p3i_through_the_callback_path_equals_the_prs_evaluator(annotations, proactive, tmp_path):
    model, processor = proactive  # speaks at some frames: the scores are not all zero
    block = {"evaluators": [{"type": "p3i", "annotations": annotations, "max_new_tokens": 4},
                            {"type": "prs", "episodes": [annotations], "max_new_tokens": 4}]}  # fmt: skip
    config = EvalCallbackConfig.from_dict(block)
    assert evaluator_class("p3i") is BenchmarkEvaluator and config.evaluators[0].protocol == "streaming"
    results = evaluate_model(model, processor, build_evaluators(config.evaluators), out_dir=tmp_path / "eval")
    assert results["complete"], results["incomplete"]
    summary = json.loads((tmp_path / "eval" / "p3i" / "results.json").read_text())
    official = json.loads((tmp_path / "eval" / "p3i" / "predictions.json").read_text())
    episodes = json.loads(Path(annotations).read_text())
    assert [r["id"] for r in official] == [e["id"] for e in episodes]
    assert summary["speed"]["video_frames"] == sum(int(e["duration"] * e["fps"]) for e in episodes)
    reference = json.loads((tmp_path / "eval" / "prs" / "results.json").read_text())
    for key in ("prs_u", "prs_b"):
        assert summary["prs"]["overall"][key] == pytest.approx(reference["prs"]["overall"][key])
        assert results["metrics"][f"p3i/{key}"] == pytest.approx(reference["prs"]["overall"][key])
    assert sum(len(r["responses"]) for r in official) > 0 and summary["prs"]["overall"]["prs_u"] > 0
    assert results["metrics"]["p3i/blind_prs_b"] == summary["blind_floor"]["overall"]["prs_b"]
