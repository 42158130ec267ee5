"""PEFT that works: LoRA trains the state-token rows (and only those rows of the embeddings); QLoRA is refused on CPU.

Under a q/v LoRA the embeddings are frozen, so two new state tokens could never move apart (docs/spec.md §2, §3):
`proactive_rl.training.peft_config_for` makes their rows trainable through PEFT's ``trainable_token_indices``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
SHORT = {"duration": [10, 14]}


def _args(tmp_path, *extra, **fields):
    import yaml

    from proactive_rl.sft.main import make_parser

    recipe = tmp_path / "sft.yaml"
    recipe.write_text(yaml.safe_dump({**yaml.safe_load((ROOT / "recipes/tiny/sft.yaml").read_text()), **fields}))
    argv = ["--config", str(recipe), "--output_dir", str(tmp_path / "out")]
    argv += ["--use_peft", "true", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true", *extra]
    return make_parser().parse_args_and_config(argv)


def _state_rows(model, ids):
    """The rows the model embeds the state tokens with (PEFT's trainable-token deltas applied)."""
    with torch.no_grad():
        return model.get_input_embeddings()(torch.tensor(ids)).detach().clone()


def test_lora_config_targets_the_state_rows(tmp_path):
    from peft import get_peft_model

    from proactive_rl.models import STATE_TOKENS, build_tiny
    from proactive_rl.training import peft_config_for

    _, _, model_args = _args(tmp_path)
    model, processor = build_tiny("qwen2_5_vl", "xs")
    ids = [processor.tokenizer.convert_tokens_to_ids(t) for t in STATE_TOKENS]
    config = peft_config_for(model_args, model, processor)
    assert config.trainable_token_indices == {"embed_tokens": ids}  # tied output embedding: one entry
    peft_model = get_peft_model(model, config)
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert any("trainable_tokens" in n and "embed_tokens" in n for n in trainable), trainable
    assert not any(n.endswith("embed_tokens.weight") for n in trainable)  # only the state rows, not the matrix
    # a recipe that chose for itself keeps its choice
    _, _, own = _args(tmp_path, "--lora_modules_to_save", "embed_tokens")
    assert peft_config_for(own, model, processor).trainable_token_indices is None


@pytest.mark.slow
def test_lora_sft_on_the_tiny_recipe_learns_the_state_tokens(tmp_path):
    """The tiny SFT recipe with ``use_peft: true``: the state rows move apart from step 1, and after the recipe's
    steps the held-out response recall (greedy state token at the response positions) is above 0."""
    from transformers import TrainerCallback

    from proactive_rl.models import STATE_TOKENS
    from proactive_rl.sft.main import build_trainer

    held_out = [{"source": "synthetic", "task": "accident", "num_episodes": 8, "seed": 901, "knobs": SHORT}]
    trainer = build_trainer(*_args(tmp_path, eval_mixture=held_out))
    tokenizer = trainer.processing_class.tokenizer
    ids = [tokenizer.convert_tokens_to_ids(t) for t in STATE_TOKENS]
    assert type(trainer.model).__name__.startswith("Peft")
    before = _state_rows(trainer.model, ids)
    seen = {}

    class AfterStepOne(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step == 1:
                seen["rows"] = _state_rows(trainer.model, ids)

    trainer.add_callback(AfterStepOne())
    trainer.train()
    rows = seen["rows"]
    assert not torch.allclose(rows[0], rows[1])  # the two state tokens are apart after step 1 (lr 0: warm-up) ...
    after = _state_rows(trainer.model, ids)
    assert not torch.allclose(after, before)  # ... and their rows trained (frozen under a plain q/v LoRA)
    assert not torch.allclose(after[0], after[1])
    metrics = trainer.evaluate()
    assert metrics["eval_response_recall"] > 0, metrics


def test_qlora_on_cpu_refuses_naming_the_flag(tmp_path):
    from proactive_rl.sft.main import build_trainer

    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: QLoRA is allowed")
    for flag in ("load_in_4bit", "load_in_8bit"):
        with pytest.raises(ValueError, match=rf"^{flag}: QLoRA .* needs a CUDA GPU"):
            build_trainer(*_args(tmp_path, f"--{flag}", "true"))


def test_untied_output_embedding_gets_its_state_rows_too(tmp_path):
    """LLaVA-NeXT-Mistral has an untied ``lm_head``: its state rows are trainable as well."""
    from peft import get_peft_model

    from proactive_rl.models import STATE_TOKENS, build_tiny
    from proactive_rl.training import peft_config_for

    _, _, model_args = _args(tmp_path)
    model, processor = build_tiny("llava_next", "xs")
    assert model.get_output_embeddings().weight is not model.get_input_embeddings().weight
    ids = [processor.tokenizer.convert_tokens_to_ids(t) for t in STATE_TOKENS]
    config = peft_config_for(model_args, model, processor)
    assert config.trainable_token_indices == {"embed_tokens": ids, "lm_head": ids}
    trainable = [n for n, p in get_peft_model(model, config).named_parameters() if p.requires_grad]
    assert sum("trainable_tokens_delta" in n for n in trainable) == 2
