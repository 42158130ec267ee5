"""Model families (`proactive_rl.models.families`): the streaming engine knows a family only through its adapter.

Reference: the model's own full forward pass over the whole dialogue (it derives its positions and encodes every
image itself), as in `tests/rl/test_streaming_engine.py`; fp32 on CPU, docs/spec.md §9's bound 1e-5. A toy family
is added from this test alone, as a family's folder adds one (`proactive_rl/models/families/<family>/`): its adapter
(a tiny Qwen2.5-VL renamed ``toy_vl``, whose positions are computed with its own loop -- Qwen2.5-VL's rule for
images, written out -- instead of the model's ``get_rope_index``), its tiny builder and its chat template, registered
with `register_family`; `build_tiny("toy_vl")` and the streaming engine then find it through the registry.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from proactive_rl.chat import generation_prompt_ids
from proactive_rl.models import build_tiny, families
from proactive_rl.models.families import ImageFeatures, ModelFamily, family_of, register_family
from proactive_rl.streaming import SamplingParams, StreamingSession
from proactive_rl.streaming.batch import Batcher

TOL = 1e-5
QWEN_TURN = "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>frame {t}<|im_end|>\n<|im_start|>assistant\n"
LLAVA_TURN = "[INST] <image>\nframe {t} [/INST]"


# The toy's chat template: Qwen's turns, without a default system prompt.
TOY_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}{% for c in message['content'] %}"
    "{% if c['type'] == 'image' or 'image' in c %}<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif 'text' in c %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def build_toy(size: str, seed: int = 0, state_tokens: bool = True):
    """The toy's tiny builder: a tiny Qwen2.5-VL's weights and processor under the toy's name and template."""
    model, processor = build_tiny("qwen2_5_vl", size, seed=seed, state_tokens=state_tokens)
    model.config.model_type = "toy_vl"
    processor.chat_template = TOY_TEMPLATE
    return model, processor


class ToyVLFamily(ModelFamily):
    """A Qwen2.5-VL model under another name, its positions computed here (not by the model)."""

    model_types = ("toy_vl",)
    image_key = "image_grid_thw"
    tiny_arch = "toy_vl"

    @classmethod
    def build_tiny(cls, size, seed=0, state_tokens=True):
        return build_toy(size, seed, state_tokens)

    @property
    def image_delimiters(self):
        return self.config.vision_start_token_id, self.config.vision_end_token_id

    def token_types(self, input_ids):
        return (input_ids == self.image_token_id).long()

    def pixel_rows(self, grids):
        return int(grids.prod(-1).sum())

    def positions(self, input_ids, grids, start=0):
        # text: one position on all three axes; an image: (start, start + row, start + column) over its merged
        # patch grid, after which the count resumes at start + max(rows, columns)
        merge = self.config.vision_config.spatial_merge_size
        ids, out, pos, image, i = input_ids.tolist(), [], start, 0, 0
        while i < len(ids):
            if ids[i] != self.image_token_id:
                out.append((pos, pos, pos))
                pos, i = pos + 1, i + 1
                continue
            t, h, w = (int(x) for x in grids[image])
            h, w = h // merge, w // merge
            out += [(pos, pos + r, pos + c) for _ in range(t) for r in range(h) for c in range(w)]
            pos, i, image = pos + max(h, w), i + t * h * w, image + 1
        return torch.tensor(out, dtype=torch.long).T.reshape(3, -1)

    def image_features(self, pixel_values, grids):
        feats = self.core.get_image_features(pixel_values, grids, return_dict=True)
        return [ImageFeatures(grids[i], feats.pooler_output[i], None, type(feats)) for i in range(len(grids))]


@pytest.fixture
def toy(monkeypatch):
    """The registry as the library leaves it; the toy registered here is gone after the test."""
    monkeypatch.setattr(families, "FAMILIES", dict(families.FAMILIES))
    monkeypatch.setattr(families, "TINY_ARCHS", dict(families.TINY_ARCHS))
    return build_toy("xs", seed=0)


def play(session: StreamingSession, processor, turn: str, stop: int, n_turns: int, seed: int = 0) -> list:
    """Append `n_turns` user turns, one frame each, and decode a greedy turn after each; the frames."""
    rng, frames = np.random.default_rng(seed), []
    for t in range(n_turns):
        frames.append(rng.integers(0, 255, size=(32 + 8 * (t % 2), 40, 3), dtype=np.uint8))
        session.append(turn.format(t=t), [frames[-1]])
        session.generate(SamplingParams(max_new_tokens=3, stop_token_ids=[stop]))
    return frames


def full_logits(model, processor, ids: list[int], frames: list, image_key: str) -> torch.Tensor:
    """The model's own forward over the whole dialogue (the Qwen-VL models also take the image-token mask)."""
    ids_t = torch.tensor([ids])
    vision = processor.image_processor(images=frames, return_tensors="pt")
    kwargs = {"pixel_values": vision["pixel_values"], image_key: vision[image_key]}
    if image_key == "image_grid_thw":
        kwargs["mm_token_type_ids"] = (ids_t == model.config.image_token_id).long()
    with torch.no_grad():
        return model(input_ids=ids_t, **kwargs).logits[0]


def test_a_toy_family_added_through_its_adapter_streams_like_its_full_forward(toy):
    model, processor = toy
    with pytest.raises(TypeError, match="no registered model family"):
        StreamingSession(model, processor)
    with pytest.raises(ValueError, match="unknown tiny-model arch 'toy_vl'"):
        build_tiny("toy_vl")
    register_family(ToyVLFamily)  # the one step outside the family's own code
    assert isinstance(family_of(model), ToyVLFamily)
    model, processor = build_tiny("toy_vl", "xs", seed=0)  # through the registry
    assert model.config.model_type == "toy_vl" and processor.chat_template == TOY_TEMPLATE
    assert isinstance(family_of(model), ToyVLFamily)
    assert generation_prompt_ids(processor) == processor.tokenizer("<|im_start|>assistant\n")["input_ids"]
    session = StreamingSession(model, processor, record_logits=True)
    stop = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    frames = play(session, processor, QWEN_TURN, stop, n_turns=5)
    reference = full_logits(model, processor, session.token_ids()[:-1], frames, "image_grid_thw")
    assert session.logits().shape == reference.shape
    assert (session.logits() - reference).abs().max().item() <= TOL
    with pytest.raises(ValueError, match="already served"):
        register_family(type("Other", (ToyVLFamily,), {}))
    with pytest.raises(ValueError, match="tiny arch 'toy_vl' is already built by ToyVLFamily"):
        register_family(type("Other", (ToyVLFamily,), {"model_types": ("other_vl",)}))


@pytest.mark.parametrize(
    "arch, turn, image_key",
    [
        ("qwen2_5_vl", QWEN_TURN, "image_grid_thw"),
        ("qwen3_vl", QWEN_TURN, "image_grid_thw"),
        ("llava_next", LLAVA_TURN, "image_sizes"),
    ],
)
def test_every_family_streams_like_its_full_forward_alone_and_batched(arch, turn, image_key):
    """Four turns, at most two frames kept: two appended to the cache, two re-prefills that evict the oldest."""
    model, processor = build_tiny(arch, "xs", seed=0)
    model.eval()
    tokenizer = processor.tokenizer
    stop = tokenizer.eos_token_id if arch == "llava_next" else tokenizer.convert_tokens_to_ids("<|im_end|>")
    session = StreamingSession(model, processor, max_frames=2, record_logits=True)
    frames = play(session, processor, turn, stop, n_turns=4)
    assert session.n_rebuilds == 2
    reference = full_logits(model, processor, session.token_ids()[:-1], frames[-2:], image_key)
    assert (session.logits() - reference).abs().max().item() <= TOL
    batched = Batcher(model, processor).session(max_frames=2, record_logits=True)
    play(batched, processor, turn, stop, n_turns=4)
    assert batched.token_ids() == session.token_ids()
    assert (batched.logits() - session.logits()).abs().max().item() <= TOL


def test_each_family_names_its_vision_tower_for_freezing():
    """`freeze_vision_tower` freezes what the family names: Qwen-VL's vision transformer but not its merger(s),
    LLaVA-NeXT's CLIP encoder but not its projector or image-newline row; the language model stays trainable. A
    family that names none is refused."""
    from proactive_rl.errors import InputError
    from proactive_rl.training import freeze_vision_tower

    for arch, tower, kept in [("qwen3_vl", "visual", ("merger",)), ("llava_next", "vision_tower", ())]:
        model, _ = build_tiny(arch, "xs", seed=0)
        assert freeze_vision_tower(model) > 0
        frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
        encoder = {n for n, _ in model.named_parameters() if f".{tower}." in n and not any(k in n for k in kept)}
        assert frozen == encoder, arch
    model, _ = build_tiny("qwen2_5_vl", "xs", seed=0)
    model.config.model_type = "toy_vl"
    with pytest.raises(InputError, match="no registered model family"):
        freeze_vision_tower(model)
