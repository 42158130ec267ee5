"""Per-turn rendering through the model's own chat template, with caches (docs/spec.md §2, §9).

Each message is rendered alone (in the context of a system message) and tokenised alone, which equals
rendering and tokenising the whole dialogue because the Qwen templates are turn-separable and every turn
boundary falls on a special token; this is checked once per processor on a probe dialogue. What depends on the
model family (the processor's per-image field, the tokens of a resized frame) is asked of the processor's family
(`proactive_rl.models.families.family_of_processor`).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import torch

from proactive_rewards.parsing import RESPONSE_TOKEN, SILENCE_TOKEN
from proactive_rl.chat.messages import DEFAULT_SYSTEM_PROMPT, IGNORE_INDEX, TIMESTAMP_FORMAT, user_content
from proactive_rl.models.families import family_of_processor

PRIVATE_TOUCHES = {
    "_get_num_multimodal_tokens": "transformers 5.25.0: ProcessorMixin._get_num_multimodal_tokens(image_sizes=...)"
    "['num_image_tokens'], the placeholders the processor expands an image of that size to",
}


@dataclass
class RenderedTurn:
    """The model inputs of one or more turns.

    Args:
        input_ids (`list[int]`): token ids, vision placeholders expanded.
        labels (`list[int]`): the ids on supervised positions (assistant content and end-of-turn), else -100.
        images (`list[np.ndarray]`): the turn's frames, in order.
        pixel_values (`torch.Tensor`, *optional*): the processed frames (``None`` without frames).
        image_grid_thw (`torch.Tensor`, *optional*): the frames' rows of the family's per-image field
            (`ModelFamily.image_key`: ``(n_images, 3)`` patch grids for Qwen-VL; ``None`` without frames).
    """

    input_ids: list[int]
    labels: list[int]
    images: list = field(default_factory=list)
    pixel_values: torch.Tensor | None = None
    image_grid_thw: torch.Tensor | None = None


class _Renderer:
    """Per-processor rendering state: the template's turn wrappers and caches of rendered/tokenised turns."""

    def __init__(self, processor):
        # deferred: keeps torch/transformers out of light import paths
        from transformers.utils.chat_template_utils import render_jinja_template

        self.processor = processor
        self.tokenizer = getattr(processor, "tokenizer", processor)
        self.template = processor.chat_template
        if not self.template:
            raise ValueError(f"{type(processor).__name__} has no chat template; set processor.chat_template")
        self._render_jinja = render_jinja_template
        self.kwargs = dict(self.tokenizer.special_tokens_map)
        self.image_token = getattr(processor, "image_token", "<|image_pad|>")
        self.image_token_id = self.tokenizer.convert_tokens_to_ids(self.image_token)
        vocab = self.tokenizer.get_vocab()
        self.end_of_turn = "<|im_end|>" if "<|im_end|>" in vocab else self.tokenizer.eos_token
        self._base = [{"role": "system", "content": [{"type": "text", "text": "S"}]}]
        self._base_text = self._render(self._base)
        self.header = self._render(self._base, add_generation_prompt=True)[len(self._base_text) :]
        self.segment = lru_cache(maxsize=8192)(self._segment)
        self.encode = lru_cache(maxsize=8192)(self._encode)
        self.tokens_per_image = lru_cache(maxsize=256)(self._tokens_per_image)
        self.family = family_of_processor(processor)
        self._check_separable()

    def _render(self, messages, add_generation_prompt=False) -> str:
        rendered, _ = self._render_jinja(
            conversations=[messages],
            chat_template=self.template,
            add_generation_prompt=add_generation_prompt,
            **self.kwargs,
        )
        return rendered[0]

    def _segment(self, key: tuple) -> str:
        """The text of one message (given as a hashable key), rendered in the context of a system message."""
        message = _unkey(key)
        if message["role"] == "system":
            return self._render([message])
        text = self._render(self._base + [message])
        if not text.startswith(self._base_text):
            raise ValueError("the chat template does not render a conversation turn by turn; cannot render per turn")
        return text[len(self._base_text) :]

    def _encode(self, text: str, supervise: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Token ids of one rendered message, and labels (assistant content and end-of-turn, if `supervise`)."""
        enc = self.tokenizer(text, add_special_tokens=False, return_offsets_mapping=supervise)
        ids = tuple(enc["input_ids"])
        if not supervise:
            return ids, (IGNORE_INDEX,) * len(ids)
        start = len(self.header) if text.startswith(self.header) else 0
        end = text.find(self.end_of_turn, start)
        end = len(text) if end < 0 else end + len(self.end_of_turn)
        labels = tuple(i if s < end and e > start else IGNORE_INDEX for i, (s, e) in zip(ids, enc["offset_mapping"]))
        return ids, labels

    def _tokens_per_image(self, height: int, width: int) -> int:
        return int(self.processor._get_num_multimodal_tokens(image_sizes=[(height, width)])["num_image_tokens"][0])

    def _tokens_per_resized_image(self, height: int, width: int) -> int:
        """Vision tokens of a frame already at the processor's size (its family's rule)."""
        return self.image_family().tokens_per_resized_frame(self.processor, height, width)

    def image_family(self):
        """The processor's `ModelFamily` (class), which knows its image rules; an error for a processor of none."""
        if self.family is None:
            raise TypeError(
                f"{type(self.processor).__name__} is the processor of no registered model family, so its frames "
                "cannot be rendered; add one with proactive_rl.models.families.register_family (docs/architecture.md, "
                "'A new model family')"
            )
        return self.family

    def turn(self, message: dict, resized: bool = False) -> RenderedTurn:
        """Render one message: ids with image placeholders expanded, labels, and its images (not yet processed).
        With `resized`, the images are already at the processor's size (`proactive_rl.data.frames.frame_resizer`)."""
        images = [item["image"] for item in _items(message) if _is_image(item)]
        text = self.segment(_key(message))
        ids, labels = self.encode(text, message["role"] == "assistant")
        if not images:
            return RenderedTurn(list(ids), list(labels))
        count = self._tokens_per_resized_image if resized else self.tokens_per_image
        counts = iter(count(*_hw(image)) for image in images)
        out_ids, out_labels = [], []
        for i, label in zip(ids, labels):
            if i == self.image_token_id:
                n = next(counts, None)
                if n is None:
                    raise ValueError("the rendered turn has more image placeholders than images")
                out_ids.extend([i] * n)
                out_labels.extend([IGNORE_INDEX] * n)
            else:
                out_ids.append(i)
                out_labels.append(label)
        return RenderedTurn(out_ids, out_labels, images=images)

    def process_images(self, images: list, resized: bool = False) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        if not images:
            return None, None
        key = self.image_family().image_key
        skip = {"do_resize": False} if resized else {}  # resized once already, by the processor's own rule
        out = self.processor.image_processor(images=list(images), return_tensors="pt", **skip)
        return out["pixel_values"], out[key]

    def _check_separable(self) -> None:
        """Per-turn rendering must equal the template's rendering of the whole dialogue (checked on a probe)."""
        image = np.zeros((32, 32, 3), dtype=np.uint8)
        probe = [
            {"role": "system", "content": [{"type": "text", "text": "probe"}]},
            {"role": "user", "content": user_content(0.0, [image], instruction="do")},
            {"role": "assistant", "content": [{"type": "text", "text": SILENCE_TOKEN}]},
            {"role": "user", "content": user_content(1.0, [image], user_text="now")},
            {"role": "assistant", "content": [{"type": "text", "text": f"{RESPONSE_TOKEN} 1"}]},
        ]
        full = self._render(_strip_images(probe))
        if "".join(self.segment(_key(m)) for m in probe) != full:
            raise ValueError(
                f"the chat template of {type(self.processor).__name__} is not turn-separable (rendering a dialogue "
                "differs from rendering its turns one by one); proactive_rl.chat supports Qwen-style templates"
            )


_RENDERERS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _renderer(processor) -> _Renderer:
    renderer = _RENDERERS.get(processor)
    if renderer is None or renderer.template != processor.chat_template:
        renderer = _RENDERERS[processor] = _Renderer(processor)
    return renderer


def _items(message: dict) -> list:
    content = message["content"]
    return [{"type": "text", "text": content}] if isinstance(content, str) else content


def _is_image(item: dict) -> bool:
    return item.get("type") == "image" or "image" in item


def _key(message: dict) -> tuple:
    """A hashable form of a message for the render cache (images reduced to a placeholder)."""
    items = tuple(
        ("image", "") if _is_image(i) else (i.get("type", "text"), i.get("text", "")) for i in _items(message)
    )
    return message["role"], items


def _unkey(key: tuple) -> dict:
    role, items = key
    return {"role": role, "content": [{"type": "image"} if t == "image" else {"type": t, "text": s} for t, s in items]}


def _strip_images(messages: list[dict]) -> list[dict]:
    return [_unkey(_key(m)) for m in messages]


def _hw(image) -> tuple[int, int]:
    shape = np.shape(image)
    if len(shape) != 3 or shape[-1] != 3:
        raise ValueError(f"a frame must be an H×W×3 array, got shape {shape}")
    return int(shape[0]), int(shape[1])


def render_text(processor, message: dict) -> str:
    """The chat-template text of one message, rendered alone (images as placeholders); cached per processor."""
    return _renderer(processor).segment(_key(message))


def turn_markers(processor) -> tuple[str, str]:
    """``(header, end_of_turn)``: the text that opens an assistant turn (the generation prompt) and the end-of-turn
    token's text (``<|im_end|>`` for Qwen)."""
    renderer = _renderer(processor)
    return renderer.header, renderer.end_of_turn


def render_system_turn(processor, system_prompt: str = DEFAULT_SYSTEM_PROMPT) -> RenderedTurn:
    """The system turn's token ids (the start of every dialogue)."""
    return _renderer(processor).turn({"role": "system", "content": [{"type": "text", "text": system_prompt}]})


def render_user_turn(
    processor,
    time: float,
    frames: Sequence[np.ndarray],
    instruction: str | None = None,
    user_text: str = "",
    *,
    timestamp_format: str = TIMESTAMP_FORMAT,
    process_images: bool = True,
) -> RenderedTurn:
    """One user turn (timestamp, frame(s), scheduled text; the instruction on the first turn), exactly as
    `encode_dialogue` renders it, with its frames processed into `pixel_values` / `image_grid_thw` (the rows of the
    family's per-image field)."""
    renderer = _renderer(processor)
    message = {"role": "user", "content": user_content(time, frames, instruction, user_text, timestamp_format)}
    turn = renderer.turn(message)
    if process_images:
        turn.pixel_values, turn.image_grid_thw = renderer.process_images(turn.images)
    return turn


def render_observation(processor, observation, **kwargs) -> RenderedTurn:
    """`render_user_turn` for a `proactive_eval.policy.Observation` (the instruction goes in the first step)."""
    return render_user_turn(
        processor,
        observation.time,
        observation.frames,
        instruction=observation.instruction if observation.step == 0 else None,
        user_text=observation.user_text,
        **kwargs,
    )


def render_assistant_turn(processor, text: str) -> RenderedTurn:
    """One assistant turn (``<|im_start|>assistant\\n{text}<|im_end|>\\n`` for Qwen), labels on `text` and the
    end-of-turn token, exactly as `encode_dialogue` renders it."""
    return _renderer(processor).turn({"role": "assistant", "content": [{"type": "text", "text": text}]})


def generation_prompt_ids(processor) -> list[int]:
    """The ids that open an assistant turn (``<|im_start|>assistant\\n``): the prompt to decode a turn from."""
    renderer = _renderer(processor)
    return list(renderer.encode(renderer.header, False)[0])
