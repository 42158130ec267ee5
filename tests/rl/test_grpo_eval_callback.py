"""`eval_callback` in the two GRPO trainers: the tiny recipes, shortened, evaluate every saved checkpoint.

Each run writes ``checkpoint-N/eval/results.json`` per save and logs ``eval/<evaluator>/<metric>`` through the
Trainer; under DeepSpeed ZeRO-3 with 2 CPU processes both ranks hold the same numbers, which equal a 1-process
evaluation of the saved checkpoint (the engine shards, gathers and gathers parameters; docs/spec.md §5, §6).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.launching import launch

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SHORT = {"duration": [10, 10]}
PRS = {
    "type": "prs",
    "episodes": [{"source": "synthetic", "task": "accident", "num_episodes": 3, "seed": 99, "knobs": SHORT}],
    "max_new_tokens": 4,
}
MCQA = {"type": "mcqa", "environments": [{"kind": "occlusion", "n": 3, "seed": 0}], "max_new_tokens": 4}


def streaming_recipe(tmp_path: Path, eval_callback: dict, **overrides) -> Path:
    """recipes/tiny/grpo_streaming.yaml from the untrained tiny model, 2 steps, a save (and evaluation) each."""
    recipe = yaml.safe_load((ROOT / "recipes/tiny/grpo_streaming.yaml").read_text())
    recipe.update(
        model_name_or_path="tiny:qwen2_5_vl:xs",
        dataset_mixture=[{"source": "synthetic", "task": "accident", "num_episodes": 2, "seed": 11, "knobs": SHORT}],
        max_window_s=3.0,
        num_generations=2,
        per_device_train_batch_size=2,
        max_turn_tokens=3,
        max_steps=2,
        save_strategy="steps",
        save_steps=1,
        save_total_limit=None,
        output_dir=str(tmp_path / "out"),
        disable_tqdm=True,
        eval_callback=eval_callback,
    )
    recipe.update(overrides)
    path = tmp_path / "streaming.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


def suggestion_recipe(tmp_path: Path, eval_callback: dict, **overrides) -> Path:
    """recipes/tiny/grpo_suggestion.yaml without warm start, 2 steps, a save (and evaluation) each."""
    recipe = yaml.safe_load((ROOT / "recipes/tiny/grpo_suggestion.yaml").read_text())
    env = dict(recipe["environments"][0], num_envs=2)
    recipe.update(
        environments=[env],
        eval_environments=None,
        warm_start_steps=0,
        num_generations=2,
        per_device_train_batch_size=2,
        max_steps=2,
        logging_steps=1,
        save_strategy="steps",
        save_steps=1,
        save_total_limit=None,
        output_dir=str(tmp_path / "out"),
        disable_tqdm=True,
        eval_callback=eval_callback,
    )
    recipe.update(overrides)
    path = tmp_path / "suggestion.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return path


RECIPES = {"grpo_streaming": (streaming_recipe, PRS), "grpo_suggestion": (suggestion_recipe, MCQA)}


def test_eval_callback_block_is_validated_at_parse_time(tmp_path):
    from proactive_rl.trainers import trainer_module

    for trainer, (make, _) in RECIPES.items():
        recipe = make(tmp_path, {"evaluators": [{"type": "prs"}]})
        with pytest.raises(ValueError, match=r"eval_callback"):
            trainer_module(trainer).make_parser().parse_args_and_config(["--config", str(recipe)])


@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(RECIPES))
def test_tiny_grpo_recipe_evaluates_every_save(trainer, tmp_path):
    from proactive_rl.evaluation import ProactiveEvalCallback
    from proactive_rl.trainers import trainer_module

    make, evaluator = RECIPES[trainer]
    recipe = make(tmp_path, {"evaluators": [evaluator]})
    module = trainer_module(trainer)
    out = tmp_path / "out"
    args = module.make_parser().parse_args_and_config(["--config", str(recipe)])
    trained = module.main(*args)
    [callback] = [c for c in trained.callback_handler.callbacks if isinstance(c, ProactiveEvalCallback)]
    assert [r["step"] for r in callback.history] == [1, 2]
    name = evaluator["type"]
    for step in (1, 2):
        results = json.loads((out / f"checkpoint-{step}" / "eval" / "results.json").read_text())
        assert results["complete"] and results["step"] == step
        # the Trainer's log: eval_<evaluator>/<metric> (the wandb / tensorboard backends show eval/<evaluator>/<metric>)
        logged = next(
            e for e in trained.state.log_history if e.get("step") == step and f"eval_{name}/wall_time_s" in e
        )
        assert results["metrics"] and all(key.startswith(f"{name}/") for key in results["metrics"])
        for key, value in results["metrics"].items():
            assert logged[f"eval_{key}"] == pytest.approx(value)


SCRIPT = """
import json, sys
from pathlib import Path
from accelerate import PartialState
from proactive_rl.evaluation import ProactiveEvalCallback
from proactive_rl.evaluation.shutdown import exit_launched
from proactive_rl.trainers import trainer_module

module = trainer_module(sys.argv[1])
trainer = module.build_trainer(*module.make_parser().parse_args_and_config(sys.argv[2:]))
trainer.train()
[callback] = [c for c in trainer.callback_handler.callbacks if isinstance(c, ProactiveEvalCallback)]
state = PartialState()
dump = {
    "rank": state.process_index,
    "num_processes": state.num_processes,
    "zero3": trainer.is_deepspeed_enabled and trainer.accelerator.state.deepspeed_plugin.zero_stage == 3,
    "history": [
        {k: r[k] for k in ("step", "metrics", "complete", "incomplete", "num_processes")}
        | {"items_per_rank": {n: e.get("items_per_rank") for n, e in r["evaluators"].items()}}
        for r in callback.history
    ],
}
Path(trainer.args.output_dir, f"rank{state.process_index}.json").write_text(json.dumps(dump))
sys.exit(exit_launched(0))  # as the entry points end (proactive_rl.evaluation.shutdown)
"""


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.parametrize("trainer", list(RECIPES))
def test_zero3_two_processes_agree_and_match_one_process(trainer, tmp_path):
    make, evaluator = RECIPES[trainer]
    block = {"evaluators": [evaluator]}
    # one save at step 2 (1 row per rank and step, so the two ranks roll out different data)
    recipe = make(tmp_path, block, save_steps=2, per_device_train_batch_size=2)
    script = tmp_path / "train_dump.py"
    script.write_text(SCRIPT)
    cmd = [str(BIN / "accelerate"), "launch", "--config_file", "launch/zero3.yaml", "--num_processes", "2"]
    cmd += ["--main_process_port", "29523", str(script), trainer, "--config", str(recipe)]
    cmd += ["--use_cpu", "false", "--ddp_backend", "gloo"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu", "TOKENIZERS_PARALLELISM": "false"}
    env |= {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    proc = launch(cmd, cwd=ROOT, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    out = tmp_path / "out"
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(d["zero3"] and d["num_processes"] == 2 for d in ranks)
    assert ranks[0]["history"] == ranks[1]["history"]  # both ranks hold the same numbers
    [h] = ranks[0]["history"]
    assert h["step"] == 2 and h["complete"], h["incomplete"]
    assert h["num_processes"] == 2 and h["items_per_rank"] == {evaluator["type"]: [2, 1]}
    saved = json.loads((out / "checkpoint-2" / "eval" / "results.json").read_text())
    assert saved["metrics"] == h["metrics"]

    # a 1-process evaluation of the saved (ZeRO-3 gathered) checkpoint gives the same numbers
    from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model
    from proactive_rl.evaluation.command import load_checkpoint

    model, processor = load_checkpoint(out / "checkpoint-2")
    evaluators = build_evaluators(EvalCallbackConfig.from_dict(block).evaluators)
    single = evaluate_model(model, processor, evaluators, out_dir=tmp_path / "single", step=2)
    assert single["metrics"] == pytest.approx(h["metrics"])
