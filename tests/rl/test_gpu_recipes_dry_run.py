"""Dry-run the GPU training recipes before anyone spends GPU hours (issue 8, acceptance 4).

Each recipe is parsed by the trainer `proactive-rl train` dispatches it to, with only what a CPU cannot hold
replaced: the model becomes a saved checkpoint of the tiny model of the same architecture (a folder, as a real
checkpoint is, so TRL can build its reference model from it), the data a few synthetic sources, bf16 and
flash-attention are switched off. Every other field — LoRA, loss type, generation and batch settings — goes
through `build_trainer` unchanged, so a typo or an incompatible combination fails here.
"""

import importlib
from pathlib import Path

import pytest
import yaml

from proactive_rl.cli import TRAINERS

ROOT = Path(__file__).resolve().parents[2]
GPU_RECIPES = {
    "recipes/p3i_assistant/sft_qwen3vl_4b.yaml": "qwen3_vl",
    "recipes/p3i_assistant/grpo_qwen3vl_4b.yaml": "qwen3_vl",
    "recipes/proactivebench/grpo_qwen2_5vl_3b_rp050.yaml": "qwen2_5_vl",
    "recipes/proactivebench/grpo_qwen2_5vl_3b_rp075.yaml": "qwen2_5_vl",
    "recipes/proactivebench/grpo_qwen2_5vl_3b_rp100.yaml": "qwen2_5_vl",
}
SYNTHETIC_EPISODES = [
    {"source": "synthetic", "task": "accident", "num_episodes": 2, "seed": 5, "knobs": {"duration": [10, 12]}}
]
SYNTHETIC_ENVIRONMENTS = [{"source": "synthetic", "kind": "occlusion", "num_envs": 2, "seed": 5}]


@pytest.fixture(scope="module")
def tiny_checkpoints(tmp_path_factory):
    from proactive_rl.models import build_tiny

    folders = {}
    for arch in sorted(set(GPU_RECIPES.values())):
        model, processor = build_tiny(arch, "xs", seed=0)
        folders[arch] = tmp_path_factory.mktemp(arch)
        model.save_pretrained(folders[arch])
        processor.save_pretrained(folders[arch])
    return folders


def _cpu_sized(config: dict, checkpoint: Path, out: Path) -> dict:
    config = dict(config, model_name_or_path=str(checkpoint), output_dir=str(out), bf16=False, report_to="none")
    config.pop("attn_implementation", None)
    if "dataset_mixture" in config:
        config["dataset_mixture"] = SYNTHETIC_EPISODES
        config["eval_mixture"] = None
        config.pop("expected_windows", None)  # the paper's 863-window composition needs the real data
    if "environments" in config:
        config["environments"] = SYNTHETIC_ENVIRONMENTS
        config["eval_environments"] = None
    return config


def test_the_gpu_recipes_exist():
    for path in GPU_RECIPES:
        assert (ROOT / path).is_file(), path


@pytest.mark.parametrize("path", sorted(GPU_RECIPES))
def test_gpu_recipe_builds_its_trainer_on_the_tiny_model(path, tmp_path, tiny_checkpoints):
    config = yaml.safe_load((ROOT / path).read_text())
    trainer_name = config.get("trainer", "sft")
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump(_cpu_sized(config, tiny_checkpoints[GPU_RECIPES[path]], tmp_path / "out")))
    module = importlib.import_module(TRAINERS[trainer_name].split(":")[0])
    script, training, model = module.make_parser().parse_args_and_config(["--config", str(recipe)])
    trainer = module.build_trainer(script, training, model)
    assert trainer.args.learning_rate == config["learning_rate"]
    assert trainer.args.gradient_accumulation_steps == config.get("gradient_accumulation_steps", 1)
    if config.get("use_peft"):
        assert hasattr(trainer.model, "peft_config"), f"{path}: use_peft set but the model is not a PEFT model"
