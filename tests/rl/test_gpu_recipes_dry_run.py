"""Dry-run the GPU training recipes before anyone spends GPU hours.

Each recipe is parsed by the trainer `proactive-rl train` dispatches it to, with only what a CPU cannot hold
replaced: the model becomes a saved checkpoint of the tiny model of the same architecture (a folder, as a real
checkpoint is, so TRL can build its reference model from it), the data a few synthetic sources, bf16 and
flash-attention are switched off. Every other field — LoRA, loss type, generation and batch settings — goes
through `build_trainer` unchanged, so a typo or an incompatible combination fails here. The LLaVA-NeXT-Mistral
recipe (the only architecture with no other CPU GRPO test) also takes one GRPO step.
"""

import importlib
from pathlib import Path

import pytest
import yaml

from proactive_rl.trainers import TRAINERS

ROOT = Path(__file__).resolve().parents[2]
GPU_RECIPES = {
    "recipes/p3i_assistant/sft_qwen3vl_4b.yaml": "qwen3_vl",
    "recipes/p3i_assistant/grpo_qwen3vl_4b.yaml": "qwen3_vl",
    "recipes/proactivebench/grpo_qwen2_5vl_3b_rp050.yaml": "qwen2_5_vl",
    "recipes/proactivebench/grpo_qwen2_5vl_3b_rp075.yaml": "qwen2_5_vl",
    "recipes/proactivebench/grpo_qwen2_5vl_3b_rp100.yaml": "qwen2_5_vl",
    "recipes/proactivebench/grpo_llava_next_mistral_7b_rp050.yaml": "llava_next",
    "recipes/proactivebench/grpo_llava_next_mistral_7b_rp075.yaml": "llava_next",
    "recipes/proactivebench/grpo_llava_next_mistral_7b_rp100.yaml": "llava_next",
}
SYNTHETIC_EPISODES = [
    {"source": "synthetic", "task": "accident", "num_episodes": 2, "seed": 5, "knobs": {"duration": [10, 12]}}
]
SYNTHETIC_ENVIRONMENTS = [{"source": "synthetic", "kind": "occlusion", "num_envs": 2, "seed": 5}]
# The recipes' eval_callback evaluators read benchmark files; the same evaluator types on synthetic data.
SYNTHETIC_EVALUATORS = {
    "prs": {"type": "prs", "episodes": SYNTHETIC_EPISODES, "max_new_tokens": 4},
    "mcqa": {"type": "mcqa", "environments": [{"kind": "occlusion", "n": 2, "seed": 5}], "max_new_tokens": 4},
}


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
    if config.get("eval_callback"):
        evaluators = [SYNTHETIC_EVALUATORS[e["type"]] for e in config["eval_callback"]["evaluators"]]
        config["eval_callback"] = dict(config["eval_callback"], evaluators=evaluators)
    return config


def test_the_gpu_recipes_exist():
    for path in GPU_RECIPES:
        assert (ROOT / path).is_file(), path


def _build(path: str, tmp_path: Path, checkpoint: Path, **overrides):
    config = yaml.safe_load((ROOT / path).read_text())
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(yaml.safe_dump({**_cpu_sized(config, checkpoint, tmp_path / "out"), **overrides}))
    module = importlib.import_module(TRAINERS[config.get("trainer", "sft")])
    script, training, model = module.make_parser().parse_args_and_config(["--config", str(recipe)])
    return config, module.build_trainer(script, training, model)


@pytest.mark.parametrize("path", sorted(GPU_RECIPES))
def test_gpu_recipe_builds_its_trainer_on_the_tiny_model(path, tmp_path, tiny_checkpoints):
    config, trainer = _build(path, tmp_path, tiny_checkpoints[GPU_RECIPES[path]])
    assert trainer.args.learning_rate == config["learning_rate"]
    assert trainer.args.gradient_accumulation_steps == config.get("gradient_accumulation_steps", 1)
    if config.get("use_peft"):
        assert hasattr(trainer.model, "peft_config"), f"{path}: use_peft set but the model is not a PEFT model"


def test_llava_next_recipe_takes_a_grpo_step_on_the_tiny_model(tmp_path, tiny_checkpoints):
    """One optimizer step of the LLaVA-NeXT-Mistral recipe (8 rollouts of one prompt, LoRA on q/k, gradient
    checkpointing) on the saved tiny LLaVA-NeXT: image prompts reach the policy, the reward scores them, the adapters
    move. Changed for CPU: one accumulation step instead of 4 (the batch arithmetic is checked above), and one-letter
    answers: a random model's free text never names an option, so every reward, advantage and gradient would be 0."""
    import torch
    from transformers import LlavaNextForConditionalGeneration, LlavaNextProcessor

    path = "recipes/proactivebench/grpo_llava_next_mistral_7b_rp050.yaml"
    overrides = dict(max_steps=1, logging_steps=1, gradient_accumulation_steps=1)
    overrides.update(answer_letters_only=True, max_completion_length=1)
    _, trainer = _build(path, tmp_path, tiny_checkpoints["llava_next"], **overrides)
    policy = trainer.model.get_base_model()
    assert isinstance(trainer.processing_class, LlavaNextProcessor)
    assert isinstance(policy, LlavaNextForConditionalGeneration)
    seen = []

    def count_image_tokens(module, args, kwargs):  # what the policy receives, in generation and in the loss
        if kwargs.get("pixel_values") is not None:
            ids = kwargs["input_ids"]
            seen.append((int((ids == module.config.image_token_id).sum()), kwargs["image_sizes"].shape[0]))

    hook = policy.register_forward_pre_hook(count_image_tokens, with_kwargs=True)
    try:
        trainer.train()
    finally:
        hook.remove()
    # A 64 px frame: 4 base + 4 x 4 high-res + 4 row-end features per image (models/families/llava_next/tiny.py).
    assert seen and all(tokens == 24 * images for tokens, images in seen), seen
    moved = {n.split(".")[3] for n, p in trainer.model.named_parameters() if "lora_B" in n and p.any()}
    assert moved == {"language_model", "vision_tower"}  # q_proj/k_proj exist in both (see the recipe)
    logs = [h for h in trainer.state.log_history if "rewards/proactive_suggestion/mean" in h]
    assert logs and logs[0]["rewards/proactive_suggestion/std"] > 0
    assert torch.isfinite(torch.tensor(logs[0]["loss"]))
