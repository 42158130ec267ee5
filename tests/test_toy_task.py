"""A streaming task added through the task table, no library file edited (docs/architecture.md "A new streaming
task"): the user module `tests/support/toy_task.py` defines it, a recipe names it by import path, and its episodes load,
are scored by PRS with its content rule, roll out in streaming GRPO for one step and are evaluated by the callback.

References are independent of the code under test: token-F1 of "alarm" against "smoke alarm" is 2/3 by hand
(P = 1, R = 1/2), and the toy task's windows keep the whole history while the same episode as an accident task
keeps a bounded one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from proactive_eval import Episode, load_episodes, save_episodes
from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.episodes import EpisodeError
from proactive_rewards import Target, get_reward, get_task, load_tasks
from proactive_rl.grpo.streaming.windows import build_windows
from proactive_rl.synthetic import generate_episodes

ROOT = Path(__file__).resolve().parents[1]
TOY = "tests.support.toy_task:TOY"  # the user's module, named by import path as a recipe names it


@pytest.fixture(scope="module")
def toy_file(tmp_path_factory) -> Path:
    """Two toy episodes in a JSON file: synthetic scenes (so frames render) under the toy task."""
    assert load_tasks([TOY]) == ["toy_alarm"]
    episodes = generate_episodes("accident", 2, seed=5, duration=(10, 12))
    for e in episodes:
        e.task, e.id = "toy_alarm", e.id.replace("accident", "toy")
    path = tmp_path_factory.mktemp("toy") / "toy.json"
    save_episodes(path, episodes)
    return path


def test_an_unregistered_task_is_rejected_saying_how_to_register(tmp_path):
    record = {"id": "u1", "task": "toy_unregistered", "duration": 5.0, "instruction": "x", "targets": []}
    (tmp_path / "u.json").write_text(json.dumps([record]))
    with pytest.raises(
        EpisodeError, match=r"unknown task 'toy_unregistered'; expected one of accident.*register_task"
    ):
        load_episodes(tmp_path / "u.json")


def test_episodes_of_the_registered_task_load(toy_file):
    episodes = load_episodes(toy_file)
    assert [e.task for e in episodes] == ["toy_alarm", "toy_alarm"] and all(e.targets for e in episodes)
    assert load_tasks([TOY]) == ["toy_alarm"]  # the same recipe loaded again (another process, a re-parse): kept


def test_prs_scores_it_by_its_free_text_rule(toy_file):
    episode = Episode(
        id="t1", task="toy_alarm", duration=30.0, instruction="alarm?", targets=[Target(5.0, "smoke alarm")]
    )
    report = score_prs([episode], {"t1": [(5.0, "alarm")]})
    assert report.episodes[0].results["B"].score == pytest.approx(2 / 3)  # token-F1; exact match would give 0
    assert report.summary()["groups"]["toy_alarm"]["content_scorer"] == "rule:token_f1"


def test_windows_keep_the_whole_history_and_the_reward_scores_its_rows(toy_file):
    (toy,) = [e for e in load_episodes(toy_file)][:1]
    as_accident = Episode(**{**toy.__dict__, "task": "accident"})
    knobs = dict(lead_s=2, tail_s=1, max_window_s=4, prefix_s=1)
    (w_toy,), (w_acc,) = build_windows([toy], **knobs), build_windows([as_accident], **knobs)
    assert w_toy.start == w_acc.start > 1 and w_acc.prefix_start > 0 and w_toy.prefix_start == 0
    reward = get_reward(get_task("toy_alarm").reward, alpha=0.05, lam=0.2)
    target = w_toy.row()["targets"][0]
    scores = reward(
        [f"<t={target['time']}s></Response> {target['text']}"] * 2, targets=[[target]] * 2, task=["toy_alarm", "pvqa"]
    )
    assert scores[0] == pytest.approx(1.0) and scores[1] is None


@pytest.mark.slow
def test_one_streaming_grpo_step_and_the_eval_callback(toy_file, tmp_path, monkeypatch):
    from proactive_rl.grpo.streaming.main import build_trainer, make_parser

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    recipe = yaml.safe_load((ROOT / "recipes/tiny/grpo_streaming.yaml").read_text())
    recipe.update(
        model_name_or_path="tiny:qwen2_5_vl:xs",
        register_tasks=[TOY],
        dataset_mixture=[{"source": str(toy_file)}],
        per_device_train_batch_size=4,
        num_generations=2,
        max_steps=1,
        output_dir=str(tmp_path / "out"),
        eval_callback={
            "on_save": False,
            "every_n_steps": 1,
            "fail_fast": True,
            "plots": False,
            "evaluators": [{"type": "prs", "episodes": [{"source": str(toy_file)}], "max_new_tokens": 4}],
        },
    )
    path = tmp_path / "toy_grpo.yaml"
    path.write_text(yaml.safe_dump(recipe))
    trainer = build_trainer(*make_parser().parse_args_and_config(["--config", str(path)]))
    assert {w.task for w in trainer.windows.values()} == {"toy_alarm"}
    trainer.train()
    [logs] = [row for row in trainer.state.log_history if "rewards/accident/mean" in row]
    assert math.isfinite(logs["rewards/accident/mean"])  # the toy rows were scored (None everywhere would be NaN)
    results = json.loads((tmp_path / "out" / "eval" / "step-1" / "results.json").read_text())
    assert results["complete"] and results["step"] == 1
    assert "prs/toy_alarm/prs_b" in results["metrics"]  # the callback scored the toy task's episodes
