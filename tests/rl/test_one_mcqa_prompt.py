"""One MCQA prompt: `proactive-rl eval`, the training callback (`ProactiveEvalCallback`) and the suggestion
trainer's end-of-run evaluation (``suggestion_eval.json``) give identical answers and identical acc / ps on the same
checkpoint and environments, and that answer is the one a reference computed here independently gives: the
suggestion trainer's own training row (`environment_rows`), rendered as TRL renders it
(`trl.data_utils.prepare_multimodal_messages` + the processor's chat template), one forward pass, the most likely
option letter (greedy decoding restricted to the letters, ``answer_letters_only``).

The checkpoint is a fixed random tiny model whose option-letter rows of the (tied) embedding are drawn 30× larger
than the rest (and whose processor normalises with CLIP's statistics), so that its answers differ between
environments and states (as built, a random tiny model answers
every question with the same letter; a short warm start only teaches it the most frequent category).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
KNOBS = {
    "negatives": "easy",
    "colours": ["red", "green", "blue", "yellow"],
    "colour_weights": [0.4, 0.25, 0.2, 0.15],
    "layout": "fixed",
    "corruptions": ["merge"],
    "object_radius": 0.6,
}
N_ENVS, SEED = 6, 101


def _outcomes(path: Path) -> list[dict]:
    return [
        {k: r[k] for k in ("id", "answers", "outcomes", "success", "turns")}
        for r in map(json.loads, path.read_text().splitlines())
    ]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    from proactive_rl.data.mcqa import letter_token_ids
    from proactive_rl.models import build_tiny

    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    letters = letter_token_ids(processor.tokenizer, 9)
    weight = model.get_output_embeddings().weight
    with torch.no_grad():  # sharper, image-dependent letter logits (module docstring)
        generator = torch.Generator().manual_seed(0)
        weight[letters] = torch.randn(len(letters), weight.shape[1], generator=generator) * weight.std() * 30
    # CLIP's pixel statistics: under the tiny processor's (centred on the synthetic world's background) a random
    # tiny model answers every one of these frame-filling images alike
    for images in (processor.image_processor, processor.video_processor):
        images.image_mean, images.image_std = [0.48145466, 0.4578275, 0.40821073], [0.26862954, 0.26130258, 0.27577711]
    path = tmp_path_factory.mktemp("tiny")
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def _reference_first_answers(checkpoint: Path) -> dict[str, str]:
    """The first answer of each environment, computed without the evaluation code (module docstring)."""
    import numpy as np
    from PIL import Image
    from trl.data_utils import prepare_multimodal_messages

    from proactive_rl.data.mcqa import environment_rows, letter_token_ids
    from proactive_rl.models import load_model
    from proactive_rl.synthetic import make_environments

    model, processor = load_model(str(checkpoint))
    model.eval()
    answers = {}
    for env in make_environments("corruption", N_ENVS, seed=SEED, **KNOBS):
        row = environment_rows(env)[0]
        image = Image.fromarray(np.asarray(row["image"], dtype=np.uint8))
        messages = prepare_multimodal_messages(row["prompt"], images=[image])
        text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
        inputs = processor(text=[text], images=[image], return_tensors="pt")
        with torch.no_grad():
            logits = model(**inputs).logits[0, -1]
        letters = letter_token_ids(processor.tokenizer, len(row["options"]))
        answers[env.id] = chr(65 + int(torch.argmax(logits[letters])))
    return answers


@pytest.mark.slow
def test_eval_command_callback_and_trainer_answer_alike(checkpoint, tmp_path):
    from transformers import TrainerControl, TrainerState, TrainingArguments

    from proactive_rl.cli import main as cli
    from proactive_rl.evaluation import ProactiveEvalCallback
    from proactive_rl.grpo.suggestion.main import main as suggestion_main
    from proactive_rl.grpo.suggestion.main import make_parser
    from proactive_rl.models import load_model

    environments = [{"kind": "corruption", "n": N_ENVS, "seed": SEED, **KNOBS}]
    block = {
        "evaluators": [
            {"type": "mcqa", "environments": environments, "max_new_tokens": 1, "answer_letters_only": True}
        ]
    }
    config = tmp_path / "eval.yaml"
    config.write_text(yaml.safe_dump({"eval_callback": block}))

    # 1. proactive-rl eval --model CHECKPOINT
    argv = ["eval", "--model", str(checkpoint), "--config", str(config), "--out", str(tmp_path / "cmd")]
    assert cli([*argv, "--dtype", "float32", "--no-plots"]) == 0
    command = json.loads((tmp_path / "cmd" / "results.json").read_text())

    # 2. the training callback, at a save of the same weights
    model, processor = load_model(str(checkpoint))
    args = TrainingArguments(output_dir=str(tmp_path / "cb"), report_to="none")
    state = TrainerState(global_step=1)
    ProactiveEvalCallback({**block, "plots": False}).on_save(
        args, state, TrainerControl(), model=model, processing_class=processor
    )
    callback = json.loads((tmp_path / "cb" / "checkpoint-1" / "eval" / "results.json").read_text())

    # 3. the suggestion trainer's evaluation before and after one GRPO step that cannot move the weights (lr 0)
    source = {"source": "synthetic", "kind": "corruption", "num_envs": N_ENVS, "seed": SEED, **KNOBS}
    recipe = yaml.safe_load((ROOT / "recipes/tiny/grpo_suggestion.yaml").read_text())
    recipe.update(
        model_name_or_path=str(checkpoint),
        environments=[{**source, "num_envs": 2, "seed": 0}],
        eval_environments=[source],
        warm_start_steps=0,
        max_steps=1,
        learning_rate=0.0,
        per_device_train_batch_size=4,
        num_generations=4,
        output_dir=str(tmp_path / "grpo"),
    )
    (tmp_path / "grpo.yaml").write_text(yaml.safe_dump(recipe))
    suggestion_main(*make_parser().parse_args_and_config(["--config", str(tmp_path / "grpo.yaml")]))
    report = json.loads((tmp_path / "grpo" / "suggestion_eval.json").read_text())

    runs = {
        "command": _outcomes(tmp_path / "cmd" / "mcqa" / "outcomes.jsonl"),
        "callback": _outcomes(tmp_path / "cb" / "checkpoint-1" / "eval" / "mcqa" / "outcomes.jsonl"),
        "trainer before": _outcomes(tmp_path / "grpo" / "suggestion_eval" / "before" / "mcqa" / "outcomes.jsonl"),
        "trainer after": _outcomes(tmp_path / "grpo" / "suggestion_eval" / "after" / "mcqa" / "outcomes.jsonl"),
    }
    reference = runs["command"]
    assert len(reference) == N_ENVS
    for name, outcomes in runs.items():
        assert outcomes == reference, name
    # the answers differ between environments: the comparison is not between constant policies
    assert len({r["answers"][0] for r in reference}) > 1
    assert {r["id"]: r["answers"][0] for r in reference} == _reference_first_answers(checkpoint)

    metrics = {k: command["metrics"][f"mcqa/{k}"] for k in ("acc", "ps")}
    assert {k: callback["metrics"][f"mcqa/{k}"] for k in ("acc", "ps")} == metrics
    for when in ("before", "after"):
        assert {k: report[when][k] for k in ("acc", "ps")} == metrics and report[when]["n"] == N_ENVS
    # and acc / ps are those of the outcomes (docs/spec.md §6): 100 × success rate, mean (turns - 1)
    assert metrics["acc"] == pytest.approx(100 * sum(r["success"] for r in reference) / N_ENVS)
    assert metrics["ps"] == pytest.approx(sum(r["turns"] - 1 for r in reference) / N_ENVS)
