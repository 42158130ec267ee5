"""Every saved model folder has a model card (README.md): base model, recipe, state tokens and how to prompt, the
latest evaluation; with ``push_to_hub`` the final folder -- processor with its state tokens included -- is uploaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SHORT = {"duration": [10, 10]}


@pytest.mark.slow
def test_sft_folder_has_a_card_with_the_latest_evaluation_and_pushes_the_processor(tmp_path, monkeypatch):
    import huggingface_hub

    from proactive_rl.models import STATE_TOKENS
    from proactive_rl.sft.main import build_trainer, make_parser
    from proactive_rl.training import finish

    recipe = yaml.safe_load((ROOT / "recipes/tiny/sft.yaml").read_text())
    prs = {"type": "prs", "max_new_tokens": 4}
    prs["episodes"] = [{"source": "synthetic", "task": "accident", "num_episodes": 2, "seed": 99, "knobs": SHORT}]
    recipe.update(
        dataset_mixture=[{"source": "synthetic", "task": "accident", "num_episodes": 4, "seed": 1, "knobs": SHORT}],
        max_steps=2,
        save_steps=2,
        logging_steps=1,
        per_device_train_batch_size=2,
        output_dir=str(tmp_path / "out"),
        disable_tqdm=True,
        eval_callback={"evaluators": [prs]},
    )
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    script_args, training_args, model_args = make_parser().parse_args_and_config(["--config", str(path)])
    trainer = build_trainer(script_args, training_args, model_args)
    trainer.train()
    pushed = {}

    def fake_upload(repo_id, folder_path, **kwargs):  # what the hub would receive
        pushed.update(repo=repo_id, files=sorted(p.name for p in Path(folder_path).iterdir()))
        pushed["tokenizer"] = json.loads(Path(folder_path, "tokenizer.json").read_text())

    monkeypatch.setattr(huggingface_hub, "upload_folder", fake_upload)
    monkeypatch.setattr(huggingface_hub, "create_repo", lambda name, **kw: type("Repo", (), {"repo_id": name}))
    trainer.args.push_to_hub, trainer.args.hub_model_id = True, "me/tiny-sft"
    out = tmp_path / "out"
    finish(trainer, str(out), model_args=model_args)

    card = (out / "README.md").read_text()
    assert "tiny:qwen2_5_vl:xs" in card and "ProactiveSFTTrainer" in card
    tok = trainer.processing_class.tokenizer
    for token in STATE_TOKENS:
        assert f"`{token}` (id {tok.convert_tokens_to_ids(token)})" in card
    assert "You are a proactive assistant" in card  # the system prompt it was trained with
    last = json.loads((out / "eval" / "history.jsonl").read_text().splitlines()[-1])
    assert last["step"] == 2 and "step 2" in card
    for key, value in last["metrics"].items():
        assert f"| {key} | {value:.4g} |" in card if isinstance(value, float) else f"| {key} | {value} |" in card
    # the push carries the card and the processor with its (plain) state tokens
    assert pushed["repo"] == "me/tiny-sft" and {"README.md", "tokenizer.json", "config.json"} <= set(pushed["files"])
    added = {t["content"]: t for t in pushed["tokenizer"]["added_tokens"]}
    assert all(t in added and added[t]["special"] is False for t in STATE_TOKENS)


def test_card_without_evaluation_says_so(tmp_path):
    from types import SimpleNamespace

    from proactive_rl.models import build_tiny
    from proactive_rl.training import model_card

    model, processor = build_tiny("qwen2_5_vl", "xs")
    trainer = SimpleNamespace(
        model=model,
        processing_class=processor,
        args=SimpleNamespace(learning_rate=1e-3),
        state=SimpleNamespace(global_step=3),
    )
    card = model_card(trainer, str(tmp_path), reports={"suggestion_eval.json": {"after": {"acc": 50.0}}})
    assert "end of run" in card and "| after/acc | 50 |" in card
    assert "No evaluation" in model_card(trainer, str(tmp_path))
