"""The README's reward reuse with the project's own tiny model and processor: a plain ``trl.GRPOTrainer``.

TRL decodes completions with ``skip_special_tokens=True``; the state tokens are plain added tokens
(`proactive_rl.models.tokenizer.plain_state_tokens`), so the rewards read them. Generation is replaced by a fixed
perfect rollout (the completion ids of ``<t=5.0s></Response> Warning``), so the logged rewards are known exactly:
the accident reward of an on-time warning and a well-formed state turn are both 1.0 (docs/spec.md §4, §7).
"""

from __future__ import annotations

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import AddedToken  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from proactive_rewards import accident_reward, get_reward, state_format_reward  # noqa: E402
from proactive_rl.models import STATE_TOKENS, build_tiny, load_model  # noqa: E402

PERFECT = "<t=5.0s></Response> Warning"


def _special_checkpoint(tmp_path):
    """A checkpoint that holds the state tokens as *special* tokens (as saved before they were made plain)."""
    model, processor = build_tiny("qwen2_5_vl", "xs")
    tok = processor.tokenizer
    tok._tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in STATE_TOKENS])
    tok.extra_special_tokens = [*tok.extra_special_tokens, *STATE_TOKENS]
    assert tok.decode(tok(PERFECT)["input_ids"], skip_special_tokens=True) == "<t=5.0s> Warning"
    model.save_pretrained(tmp_path / "ckpt")
    processor.save_pretrained(tmp_path / "ckpt")
    return load_model(tmp_path / "ckpt", dtype="float32")


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", ["fresh", "special_in_checkpoint"])
def test_plain_grpo_trainer_logs_perfect_rewards(checkpoint, tmp_path):
    # the independent reference: the rewards on the text itself
    assert accident_reward(PERFECT, [(5.0, "Warning")]) == 1.0 and state_format_reward(PERFECT) == 1.0
    model, processor = build_tiny("qwen2_5_vl", "xs") if checkpoint == "fresh" else _special_checkpoint(tmp_path)
    plain_grpo_trainer_logs_perfect_rewards(model, processor, tmp_path)


def plain_grpo_trainer_logs_perfect_rewards(model, processor, tmp_path):
    """Two steps of a plain `trl.GRPOTrainer` on the fixed perfect rollout log rewards 1.0 (also run on the real
    Qwen vocabulary, `tests/rl/test_real_vocab.py`)."""
    tok = processor.tokenizer
    completion = tok(PERFECT + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert tok.convert_tokens_to_ids("</Response>") in completion  # one id, not pieces
    row = {"prompt": "Warn me before two vehicles collide.", "task": "accident"}
    row["targets"] = [{"time": 5.0, "text": "Warning", "window": None}]
    args = GRPOConfig(
        output_dir=str(tmp_path / "out"),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=len(completion),
        logging_steps=1,
        learning_rate=1e-4,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[get_reward("accident"), get_reward("state_format")],
        args=args,
        train_dataset=Dataset.from_list([row] * 4),
        processing_class=processor,
    )

    def fixed_rollout(prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        return [list(completion) for _ in prompt_ids], None

    trainer._generate_single_turn = fixed_rollout  # generation replaced; decoding and scoring are TRL's own
    trainer.train()
    logged = [e for e in trainer.state.log_history if "rewards/accident/mean" in e]
    assert len(logged) == 2
    for entry in logged:
        assert entry["rewards/accident/mean"] == 1.0
        assert entry["rewards/state_format/mean"] == 1.0
    assert torch.isfinite(torch.tensor([e["loss"] for e in logged])).all()
