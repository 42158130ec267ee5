"""`HFStreamingPolicy` (docs/spec.md §2, §9): the evaluation policy sees exactly the tokens training renders.

References: `proactive_rl.chat.encode_dialogue(build_messages(...))`, the full-dialogue rendering the SFT/GRPO
data uses, and the model's own full forward pass for greedy decoding.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from proactive_eval.episodes import Episode, UserTurn
from proactive_eval.streaming import run_episode, run_streaming
from proactive_rewards import Response, Target
from proactive_rl.chat import build_messages, encode_dialogue, generation_prompt_ids, render_system_turn
from proactive_rl.models import build_tiny
from proactive_rl.models.families import mm_token_types
from proactive_rl.streaming import HFStreamingPolicy, SamplingParams, gathered_for_generation

SILENCE, RESPONSE = "</Silence>", "</Response>"


class Scripted(torch.nn.Module):
    """A tiny model whose every assistant turn is forced, token by token, to the next scripted answer's canonical
    tokenisation (a stand-in for a trained model, so the rendered dialogue can be compared token for token). It
    counts calls, so the policy runs without speculation (one chunk call, then one call per token)."""

    def __init__(self, model, processor, answers):
        super().__init__()
        self.inner, self.config = model, model.config
        self.tokenizer = processor.tokenizer
        self.answers, self.queue = list(answers), []

    def forward(self, input_ids, **kwargs):
        out = self.inner(input_ids=input_ids, **kwargs)
        if input_ids.shape[1] > 1:  # a user chunk (or a re-prefill ending with one): a new assistant turn
            text = self.answers.pop(0)
            self.queue = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [
                self.tokenizer.convert_tokens_to_ids("<|im_end|>")
            ]
        forced = torch.full_like(out.logits, -1e4)
        forced[..., self.queue.pop(0)] = 0.0
        out.logits = forced
        return out


def episode(n: int = 7) -> tuple[Episode, list[tuple[float, np.ndarray]]]:
    rng = np.random.default_rng(0)
    frames = [(float(t), rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)) for t in range(n)]
    ep = Episode(
        id="toy",
        task="atomic",
        duration=float(n),
        instruction="Count the red circles.",
        targets=[Target(2.0, "1"), Target(5.0, "2")],
        user_turns=[UserTurn(3.0, "Are you watching?")],
    )
    return ep, frames


def script(n: int) -> list[str]:
    return [f"{RESPONSE} {k}" if k % 3 == 2 else SILENCE for k in range(n)]


@pytest.mark.parametrize("arch", ["qwen2_5_vl", "qwen3_vl"])
@pytest.mark.parametrize("max_frames", [None, 2])
def test_session_tokens_equal_chat_rendering(arch, max_frames):
    """After N steps the engine holds exactly `chat.encode_dialogue`'s ids for the same dialogue (with
    `max_frames`: the rendering that keeps the latest K frames), and the responses are the scripted ones."""
    model, processor = build_tiny(arch, "xs", seed=0)
    ep, frames = episode()
    answers = script(len(frames))
    policy = HFStreamingPolicy(Scripted(model, processor, answers), processor, max_frames=max_frames, speculate=False)
    responses = run_episode(policy, ep, frame_source=lambda e: frames)
    assert responses == [Response(float(k), str(k)) for k in range(len(frames)) if k % 3 == 2]

    messages = build_messages(ep, frames, responses=answers, max_frames=max_frames)
    full = encode_dialogue(processor, messages)["input_ids"].tolist()
    session = policy.session
    after_stop = full[len(full) - 1 :]  # the template's newline after the last end-of-turn token
    assert session.token_ids() + after_stop == full
    assert session.num_images == (len(frames) if max_frames is None else max_frames)
    assert session.n_rebuilds == (0 if max_frames is None else len(frames) - max_frames)


def test_meta_max_frames_overrides_and_reset_starts_over():
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    ep, frames = episode(4)
    policy = HFStreamingPolicy(Scripted(model, processor, script(4) * 2), processor, max_frames=3, speculate=False)
    run_episode(policy, ep, frame_source=lambda e: frames, max_frames=1)
    assert policy.session.max_frames == 1 and policy.session.num_images == 1
    run_episode(policy, ep, frame_source=lambda e: frames)
    assert policy.session.max_frames == 3
    system = render_system_turn(processor).input_ids
    assert policy.session.token_ids()[: len(system)] == system


def greedy_reference(model, processor, ids, frames, cap):
    """Greedy decoding by a full forward pass over the dialogue at every step (no cache)."""
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    c = model.config
    banned = [c.image_token_id, c.video_token_id, c.vision_start_token_id, c.vision_end_token_id]
    banned += range(len(processor.tokenizer), model.get_output_embeddings().weight.shape[0])
    enc = processor.image_processor(images=frames, return_tensors="pt")
    out = []
    while True:
        t = torch.tensor([ids + out])
        types = mm_token_types(t, c.image_token_id, c.video_token_id)
        with torch.no_grad():
            logits = model(
                input_ids=t,
                pixel_values=enc["pixel_values"],
                image_grid_thw=enc["image_grid_thw"],
                mm_token_type_ids=types,
            ).logits[0, -1]
        logits[list(banned)] = float("-inf")
        token = stop if len(out) == cap else int(logits.argmax())
        out.append(token)
        if token == stop:
            return out


def test_real_model_greedy_steps_equal_full_forward_decoding():
    """The policy on a real (tiny) model: each step's greedy turn equals decoding with full forward passes over
    the chat-rendered dialogue so far."""
    model, processor = build_tiny("qwen3_vl", "xs", seed=1)
    ep, frames = episode(5)
    policy = HFStreamingPolicy(model, processor, SamplingParams(max_new_tokens=3))
    policy.reset(ep)
    from proactive_eval.policy import Observation

    header = generation_prompt_ids(processor)
    for k, (time, frame) in enumerate(frames):
        user_text = "Are you watching?" if k == 3 else ""
        before = policy.session.token_ids() if policy.session else []
        text = policy.step(Observation(ep.id, k, time, [frame], ep.instruction, user_text))
        ids = policy.session.token_ids()
        prompt = ids[: len(ids) - len(policy.last_turn.token_ids[0])]
        assert prompt[len(prompt) - len(header) :] == header and prompt[: len(before)] == before
        want = greedy_reference(model, processor, prompt, [f for _, f in frames[: k + 1]], 3)
        assert policy.last_turn.token_ids[0] == want
        assert text == processor.tokenizer.decode(want[:-1], skip_special_tokens=False)


def test_run_streaming_writes_predictions(tmp_path):
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    ep, frames = episode(3)
    scripted = Scripted(model, processor, [SILENCE, f"{RESPONSE} 1", SILENCE])
    policy = HFStreamingPolicy(scripted, processor, speculate=False)
    out = run_streaming(policy, [ep], tmp_path / "pred.jsonl", frame_source=lambda e: frames, progress=False)
    assert out == {"toy": [Response(1.0, "1")]}
    assert (tmp_path / "pred.jsonl").read_text().count("toy") == 1


def test_gathered_for_generation_without_zero3_is_a_no_op():
    model, _ = build_tiny("qwen2_5_vl", "xs", seed=0)
    with gathered_for_generation(model) as m:
        assert m is model
