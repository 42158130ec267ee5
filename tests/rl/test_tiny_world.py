"""The tiny recipes train and evaluate on the world where seeing matters, the demo's (30-90 s episodes, one decision
every 2 s, ...; `proactive_rl.demo.settings`), not the 10-14 s world whose frame-blind schedule scored PRS-B 91-94,
and each ships an ``eval_callback`` on held-out episodes (seeds the training data does not use)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from proactive_rl.demo.settings import DemoSettings
from proactive_rl.evaluation import load_eval_config

ROOT = Path(__file__).resolve().parents[2]
WORLD = {"duration": list(DemoSettings().duration), **DemoSettings().knobs}


@pytest.mark.parametrize("name", ["sft", "grpo_streaming"])
def test_tiny_streaming_recipes_use_the_demo_world_and_evaluate_held_out_episodes(name):
    path = ROOT / "recipes" / "tiny" / f"{name}.yaml"
    recipe = yaml.safe_load(path.read_text())
    config = load_eval_config(str(path))
    [evaluator] = config.evaluators
    training = recipe["dataset_mixture"]
    held_out = evaluator.episodes
    assert all(source["knobs"] == WORLD for source in training)
    assert all(source.knobs == WORLD for source in held_out)  # parsed: `DatasetSource`
    seeds = {s["seed"] for s in training}
    assert all(s.seed not in seeds for s in held_out)
    assert {s.task for s in held_out} == {s["task"] for s in training}
