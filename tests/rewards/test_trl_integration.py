"""A real TRL run: GRPOTrainer on CPU with proactive_rewards as reward_funcs.

The model and tokenizer are built here (a 2-layer Qwen2 with hidden size 32 and a word-level tokenizer whose
vocabulary holds the state tokens), so nothing touches a hub. The dataset carries the reward columns
(``targets``, ``times``, ``task``) exactly as `proactive_rewards.trl` documents them.
"""

import pytest

pytest.importorskip("trl")

import torch  # noqa: E402
from datasets import Dataset  # noqa: E402
from tokenizers import Tokenizer, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from proactive_rewards import get_reward  # noqa: E402

WORDS = ["</Silence>", "</Response>", "Warning", "start", "end", "1", "2", "watch", "the", "road", "count", "plates"]


def _tokenizer() -> PreTrainedTokenizerFast:
    vocab = {w: i for i, w in enumerate(["<pad>", "<eos>", "<unk>", *WORDS])}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")


def _model(vocab_size: int) -> Qwen2ForCausalLM:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=vocab_size,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=64,
        pad_token_id=0,
        eos_token_id=1,
        bos_token_id=1,
    )
    return Qwen2ForCausalLM(config)


@pytest.mark.slow
def test_grpo_trainer_logs_proactive_rewards(tmp_path):
    tokenizer = _tokenizer()
    rows = [
        {"prompt": "watch the road", "task": "accident", "targets": [{"time": 2.0, "text": "Warning"}]},
        {
            "prompt": "count plates",
            "task": "atomic",
            "targets": [{"time": 1.0, "text": "1"}, {"time": 4.0, "text": "2"}],
        },
    ]
    for r in rows:
        for t in r["targets"]:
            t["window"] = None  # one schema for the column (HF datasets unifies struct fields)
        r["times"] = [float(k) for k in range(8)]  # one decision step per generated token at most
    dataset = Dataset.from_list(rows * 2)
    reward_funcs = [get_reward("accident"), get_reward("count"), get_reward("state_format")]
    args = GRPOConfig(
        output_dir=str(tmp_path),
        max_steps=2,
        per_device_train_batch_size=2,
        num_generations=2,
        max_completion_length=6,
        logging_steps=1,
        learning_rate=1e-3,
        use_cpu=True,
        bf16=False,
        report_to=[],
        save_strategy="no",
        seed=0,
    )
    trainer = GRPOTrainer(
        model=_model(len(tokenizer)),
        reward_funcs=reward_funcs,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    logged = [entry for entry in trainer.state.log_history if "rewards/state_format/mean" in entry]
    assert len(logged) == 2
    for name in ("accident", "count", "state_format"):
        assert f"rewards/{name}/mean" in logged[0]
    assert all(0.0 <= entry["rewards/state_format/mean"] <= 1.0 for entry in logged)
    # Each step's prompt is an accident or a count row: the reward for its task scored it, the other gave None.
    for entry in logged:
        assert sum(entry[f"rewards/{name}/mean"] is not None for name in ("accident", "count")) == 1
