"""State-token dialogues (docs/spec.md §2): ground-truth placement, equality with the processor's own
full rendering, per-turn rendering == full rendering, the label mask, and truncation by whole frames."""

import numpy as np
import pytest
import torch

from proactive_eval.episodes import Episode, EpisodeError, UserTurn
from proactive_eval.policy import Observation
from proactive_rewards import Response, Target
from proactive_rl import chat
from proactive_rl.models import build_tiny

ARCHS = ["qwen2_5_vl", "qwen3_vl"]
SYSTEM = chat.DEFAULT_SYSTEM_PROMPT


@pytest.fixture(scope="module", params=ARCHS)
def processor(request):
    return build_tiny(request.param)[1]


def _episode(**kw):
    base = dict(
        id="ep7",
        task="atomic",
        duration=8.0,
        instruction="Count the red circles.",
        targets=[Target(2.5, "1"), Target(5.0, "2"), Target(5.0, "3")],
        user_turns=[UserTurn(0.5, "faster please"), UserTurn(1.0, "and louder")],
    )
    base.update(kw)
    return Episode(**base)


def _frames(n, seed=0, size=64):
    rng = np.random.default_rng(seed)
    return [(float(k), rng.integers(0, 256, (size, size, 3), dtype=np.uint8)) for k in range(n)]


def _reference(processor, messages):
    """The processor's own full path: chat template over the whole dialogue, then one processor call."""
    text = processor.apply_chat_template(messages, tokenize=False)
    images = [i["image"] for m in messages if not isinstance(m["content"], str) for i in m["content"] if "image" in i]
    return processor(text=[text], images=images or None, return_tensors="pt")


def test_ground_truth_placement_by_hand():
    times = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    # 2.5 -> first frame >= 2.5 is t=3; both targets at 5.0 land on t=5 and are joined.
    assert chat.ground_truth_texts(_episode(), times) == [
        "</Silence>",
        "</Silence>",
        "</Silence>",
        "</Response> 1",
        "</Silence>",
        "</Response> 2; 3",
        "</Silence>",
    ]


def test_build_messages_structure():
    frames = _frames(4)
    messages = chat.build_messages(_episode(targets=[Target(1.0, "1")]), frames)
    assert [m["role"] for m in messages] == ["system"] + ["user", "assistant"] * 4
    assert messages[0]["content"][0]["text"] == SYSTEM and messages[0]["episode_id"] == "ep7"
    first, second = messages[1]["content"], messages[3]["content"]
    assert [i.get("text") for i in first if i["type"] == "text"] == ["Count the red circles.\n", "<t=0.0s>"]
    assert first[2]["image"] is frames[0][1]
    # The user text at 0.5 s waits for the t=1 frame; the one at 1.0 s joins the same turn.
    assert [i.get("text") for i in second if i["type"] == "text"] == ["<t=1.0s>", "\nfaster please\nand louder"]
    assert [m["content"][0]["text"] for m in messages[2::2]] == [
        "</Silence>",
        "</Response> 1",
        "</Silence>",
        "</Silence>",
    ]
    assert [m["time"] for m in messages[1:]] == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_build_messages_responses_and_max_frames():
    episode, frames = _episode(targets=[]), _frames(4)
    raw = ["</Silence>", "hello", "</Response> 2", "</Silence>"]
    messages = chat.build_messages(episode, frames, responses=raw)
    assert [m["content"][0]["text"] for m in messages[2::2]] == raw
    timed = [Response(0.2, "1"), (2.0, "</Response> 2")]
    messages = chat.build_messages(episode, frames, responses=timed, max_frames=2)
    assert [m["content"][0]["text"] for m in messages[2::2]] == [
        "</Silence>",
        "</Response> 1",
        "</Response> 2",
        "</Silence>",
    ]
    n_images = [sum(1 for i in m["content"] if i["type"] == "image") for m in messages[1::2]]
    assert n_images == [0, 0, 1, 1]
    assert messages[1]["content"][1]["text"] == "<t=0.0s>"  # older turns keep their text
    processor = build_tiny("qwen3_vl")[1]
    enc, ref = chat.encode_dialogue(processor, messages), _reference(processor, messages)
    assert torch.equal(enc["input_ids"], ref["input_ids"][0]) and enc["image_grid_thw"].shape[0] == 2
    with pytest.raises(EpisodeError, match="ep7.*3 per-step responses for 4"):
        chat.build_messages(episode, frames, responses=raw[:3])


def test_bad_inputs_name_the_episode():
    with pytest.raises(EpisodeError, match="'ep7'.*targets.*after the last frame"):
        chat.build_messages(_episode(targets=[Target(7.5, "1")]), _frames(4))
    frames = _frames(3)
    with pytest.raises(EpisodeError, match="'ep7'.*frames.*increase"):
        chat.build_messages(_episode(), [frames[0], frames[2], frames[1]])
    with pytest.raises(EpisodeError, match="'ep7'.*no frames"):
        chat.build_messages(_episode(), [])


def test_encode_equals_processor_full_rendering(processor):
    messages = chat.build_messages(_episode(), _frames(7))
    enc = chat.encode_dialogue(processor, messages)
    ref = _reference(processor, messages)
    assert torch.equal(enc["input_ids"], ref["input_ids"][0])
    assert torch.equal(enc["attention_mask"], ref["attention_mask"][0])
    assert torch.equal(enc["mm_token_type_ids"], ref["mm_token_type_ids"][0])
    assert torch.equal(enc["pixel_values"], ref["pixel_values"])
    assert torch.equal(enc["image_grid_thw"], ref["image_grid_thw"])
    # Cached second encode is identical.
    again = chat.encode_dialogue(processor, messages)
    assert all(torch.equal(enc[k], again[k]) for k in enc)


def _slow_labels(tokenizer, ids):
    """Reference mask: scan the ids; inside an assistant turn, supervise from after the ``assistant\\n`` header
    through the first <|im_end|>."""
    im_start, im_end = tokenizer.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    header = tokenizer("assistant\n", add_special_tokens=False)["input_ids"]
    labels, k = [-100] * len(ids), 0
    while k < len(ids):
        if ids[k] == im_start and ids[k + 1 : k + 1 + len(header)] == header:
            k += 1 + len(header)
            while True:
                labels[k] = ids[k]
                k += 1
                if ids[k - 1] == im_end:
                    break
        else:
            k += 1
    return labels


def test_labels_supervise_assistant_turns_only(processor):
    messages = chat.build_messages(_episode(), _frames(7))
    enc = chat.encode_dialogue(processor, messages)
    labels = enc["labels"]
    assert labels.tolist() == _slow_labels(processor.tokenizer, enc["input_ids"].tolist())
    supervised = enc["input_ids"][labels != -100]
    assert torch.equal(labels[labels != -100], supervised)
    decoded = processor.tokenizer.decode(supervised)
    expected = ["</Silence>"] * 3 + ["</Response> 1", "</Silence>", "</Response> 2; 3", "</Silence>"]
    assert decoded == "".join(t + "<|im_end|>" for t in expected)
    # Each state token is one supervised position.
    silence, response = processor.tokenizer.convert_tokens_to_ids(["</Silence>", "</Response>"])
    assert int((labels == silence).sum()) == 5 and int((labels == response).sum()) == 2


def test_per_turn_rendering_concatenates_to_full(processor):
    episode, frames = _episode(), _frames(7, seed=3)
    messages = chat.build_messages(episode, frames)
    ref = _reference(processor, messages)
    texts = [m["content"][0]["text"] for m in messages[2::2]]
    user_texts = ["", "faster please\nand louder"] + [""] * 5
    turns = [chat.render_system_turn(processor)]
    for k, (time, frame) in enumerate(frames):
        obs = Observation("ep7", k, time, [frame], episode.instruction, user_text=user_texts[k])
        turns.append(chat.render_observation(processor, obs))
        turns.append(chat.render_assistant_turn(processor, texts[k]))
    ids = [i for t in turns for i in t.input_ids]
    assert ids == ref["input_ids"][0].tolist()
    pixels = torch.cat([t.pixel_values for t in turns if t.pixel_values is not None])
    assert torch.equal(pixels, ref["pixel_values"])
    assert torch.equal(
        torch.cat([t.image_grid_thw for t in turns if t.image_grid_thw is not None]), ref["image_grid_thw"]
    )
    assert [i for t in turns for i in t.labels] == chat.encode_dialogue(processor, messages)["labels"].tolist()


def test_generation_prompt_and_assistant_turn(processor):
    tok = processor.tokenizer
    prompt = chat.generation_prompt_ids(processor)
    assert prompt == tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
    turn = chat.render_assistant_turn(processor, "</Response> Warning")
    assert (
        turn.input_ids
        == tok("<|im_start|>assistant\n</Response> Warning<|im_end|>\n", add_special_tokens=False)["input_ids"]
    )
    assert turn.input_ids[: len(prompt)] == prompt
    assert tok.decode([i for i in turn.labels if i != -100]) == "</Response> Warning<|im_end|>"


def _drop_reference(messages, k):
    """The dialogue with the first k steps removed and the instruction moved to the new first user turn."""
    instruction = [i for i in messages[1]["content"] if i.get("instruction")]
    first = dict(messages[1 + 2 * k])
    first["content"] = instruction + first["content"]
    return [messages[0], first] + messages[2 + 2 * k :]


def test_truncation_drops_whole_early_frames(processor):
    messages = chat.build_messages(_episode(), _frames(7))
    full = len(chat.encode_dialogue(processor, messages)["input_ids"])
    per_frame = int(chat.encode_dialogue(processor, messages)["image_grid_thw"][0].prod()) // 4
    max_length = full - 25
    enc = chat.encode_dialogue(processor, messages, max_length=max_length)
    assert len(enc["input_ids"]) <= max_length
    # Find which reference (k steps dropped) it equals; k must be the smallest that fits.
    lengths = {k: _reference(processor, _drop_reference(messages, k))["input_ids"].shape[1] for k in range(1, 7)}
    k = min(k for k, n in lengths.items() if n <= max_length)
    ref = _reference(processor, _drop_reference(messages, k))
    assert torch.equal(enc["input_ids"], ref["input_ids"][0]) and torch.equal(enc["pixel_values"], ref["pixel_values"])
    assert enc["image_grid_thw"].shape[0] == 7 - k
    assert int(enc["mm_token_type_ids"].sum()) == (7 - k) * per_frame  # no frame split
    text = processor.tokenizer.decode(enc["input_ids"])
    assert text.count("Count the red circles.") == 1 and text.count(SYSTEM) == 1
    assert enc["labels"].tolist() == _slow_labels(processor.tokenizer, enc["input_ids"].tolist())


def test_truncation_errors_name_the_episode(processor):
    messages = chat.build_messages(_episode(), _frames(7))
    full = len(chat.encode_dialogue(processor, messages)["input_ids"])
    with pytest.raises(ValueError, match="episode 'ep7'.*max_length"):
        chat.encode_dialogue(processor, messages, max_length=full - 1, truncation="error")
    assert len(chat.encode_dialogue(processor, messages, max_length=full, truncation="error")["input_ids"]) == full
    with pytest.raises(ValueError, match="episode 'ep7'.*even the system turn"):
        chat.encode_dialogue(processor, messages, max_length=40)
    with pytest.raises(ValueError, match="expected one of drop_frames, error"):
        chat.encode_dialogue(processor, messages, truncation="cut")


def test_encoded_dialogue_trains(processor):
    """The encoded dict feeds the model as is (batch dim added); the loss uses the assistant labels only."""
    arch = "qwen3_vl" if "Qwen3" in type(processor).__name__ else "qwen2_5_vl"
    model, _ = build_tiny(arch)
    enc = chat.encode_dialogue(processor, chat.build_messages(_episode(), _frames(8)))
    batch = {k: v if k in ("pixel_values", "image_grid_thw") else v.unsqueeze(0) for k, v in enc.items()}
    out = model(**batch)
    logits, labels = out.logits[0, :-1], enc["labels"][1:]
    manual = torch.nn.functional.cross_entropy(logits[labels != -100], labels[labels != -100])
    assert torch.allclose(out.loss, manual, atol=1e-5)
    out.loss.backward()


def test_every_synthetic_task_renders():
    """End to end on the embedded world: one episode per task, frames rendered by the generator."""
    from proactive_eval.episodes import TASKS
    from proactive_rl.synthetic import generate_episodes, render_frames

    _, processor = build_tiny("qwen2_5_vl")
    response = processor.tokenizer.convert_tokens_to_ids("</Response>")
    for task in TASKS:
        episode = generate_episodes(task, 1, seed=0)[0]
        frames = render_frames(episode)
        enc = chat.encode_dialogue(processor, chat.build_messages(episode, frames))
        times = [t for t, _ in frames]
        steps = {next(k for k, t in enumerate(times) if t >= target.time - 1e-6) for target in episode.targets}
        assert int((enc["labels"] == response).sum()) == len(steps), task
        assert enc["image_grid_thw"].shape[0] == len(frames), task
