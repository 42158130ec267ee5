"""Whole dialogues as model inputs: ids, label mask, frames, and truncation by whole frame steps (docs/spec.md §2)."""

from __future__ import annotations

import logging
from functools import partial

import torch

from proactive_rl.chat.messages import TRUNCATION
from proactive_rl.chat.render import _items, _renderer

logger = logging.getLogger(__name__)


def encode_dialogue(
    processor,
    messages: list[dict],
    max_length: int | None = None,
    truncation: str = "drop_frames",
    *,
    episode_id: str | None = None,
    process_images: bool = True,
    frames_resized: bool = False,
) -> dict[str, torch.Tensor]:
    """Tokenise a state-token dialogue with labels on the assistant turns only (docs/spec.md §2).

    Equal to ``processor(text=processor.apply_chat_template(messages), images=frames)`` with labels added, but
    rendered turn by turn with caching.

    Args:
        processor (`ProcessorMixin`): the processor of a registered model family, with a chat template.
        messages (`list[dict]`): from `build_messages` (a system message, then user/assistant turns).
        max_length (`int`, *optional*): the token budget. Longer dialogues are truncated or rejected.
        truncation (`str`, *optional*, defaults to `"drop_frames"`): `"drop_frames"` drops whole early frame
            steps (user and assistant turn), never part of a frame's vision tokens, and moves the instruction
            to the first kept user turn; `"error"` raises. Either way a dialogue whose system turn and last
            step do not fit raises a `ValueError` naming the episode.
        episode_id (`str`, *optional*): for error messages (default: the system message's ``"episode_id"``).
        process_images (`bool`, *optional*, defaults to `True`): with `False` the frames are not processed (no
            ``pixel_values``): ids, labels and truncation depend only on each frame's size, so placeholder frames of
            the right size give the exact token count (`proactive_rl.data.lazy` measures episodes so).
        frames_resized (`bool`, *optional*, defaults to `False`): the frames are already at the processor's size
            (`proactive_rl.data.frames.frame_resizer`): tokens are counted from that size and the processor skips
            its resize, which gives the ids and ``pixel_values`` of the full-size frames.

    Returns:
        `dict` of 1-D `input_ids`, `attention_mask`, `labels` (-100 outside assistant content and end-of-turn),
        `mm_token_type_ids` (1 on image tokens; the model needs it for its 3-D rope positions), and
        `pixel_values` and the family's per-image field (`ModelFamily.image_key`: `image_grid_thw` for Qwen-VL) for
        the kept frames (absent when there are none).
    """
    if truncation not in TRUNCATION:
        raise ValueError(f"unknown truncation {truncation!r}; expected one of {', '.join(TRUNCATION)}")
    if not messages:
        raise ValueError("encode_dialogue got no messages")
    if episode_id is None:
        episode_id = messages[0].get("episode_id")
    renderer = _renderer(processor)
    head = [messages[0]] if messages[0]["role"] == "system" else []
    steps = _steps(messages[len(head) :])
    head_turns = [renderer.turn(m, frames_resized) for m in head]
    step_turns = [[renderer.turn(m, frames_resized) for m in step] for step in steps]

    first = 0
    if max_length is not None:
        turn = partial(renderer.turn, resized=frames_resized)
        first, step_turns = _truncate(turn, head_turns, steps, step_turns, max_length, truncation, episode_id)
    turns = head_turns + [t for step in step_turns[first:] for t in step]
    input_ids = [i for t in turns for i in t.input_ids]
    labels = [i for t in turns for i in t.labels]
    images = [image for t in turns for image in t.images]
    ids = torch.tensor(input_ids, dtype=torch.long)
    out = {
        "input_ids": ids,
        "attention_mask": torch.ones_like(ids),
        "labels": torch.tensor(labels, dtype=torch.long),
        "mm_token_type_ids": (ids == renderer.image_token_id).long(),
    }
    pixel_values, grid = renderer.process_images(images, frames_resized) if process_images else (None, None)
    if pixel_values is not None:
        family = renderer.image_family()
        tokens = family.tokens_per_image(processor, grid)
        if tokens is not None and int(tokens.sum()) != int(out["mm_token_type_ids"].sum()):
            raise RuntimeError("image placeholders and processed frames disagree; the processor changed its sizing")
        out["pixel_values"], out[family.image_key] = pixel_values, grid
    return out


def _steps(messages: list[dict]) -> list[list[dict]]:
    """Group turns into frame steps: each user turn with the turns that follow it up to the next user turn."""
    steps: list[list[dict]] = []
    for message in messages:
        if message["role"] == "user" or not steps:
            steps.append([message])
        else:
            steps[-1].append(message)
    return steps


def _truncate(turn, head_turns, steps, step_turns, max_length, truncation, episode_id):
    """The first kept step, and the step turns (the first kept user turn re-rendered with the instruction)."""
    head_len = sum(len(t.input_ids) for t in head_turns)
    lengths = [sum(len(t.input_ids) for t in step) for step in step_turns]
    total = head_len + sum(lengths)
    if total <= max_length:
        return 0, step_turns
    name = f"episode {episode_id!r}" if episode_id is not None else "dialogue"
    if truncation == "error":
        raise ValueError(
            f"{name}: {total} tokens over max_length={max_length} ({len(steps)} frame steps); raise max_length, "
            "sample fewer frames, or use truncation='drop_frames'"
        )
    instruction = [i for i in _items(steps[0][0]) if i.get("instruction")] if steps[0][0]["role"] == "user" else []
    suffix = total - head_len
    for first in range(1, len(steps)):
        suffix -= lengths[first - 1]
        if head_len + suffix > max_length:
            continue
        step = steps[first]
        if not instruction or step[0]["role"] != "user":
            new_first = step_turns[first]
        else:
            moved = dict(step[0], content=instruction + [i for i in _items(step[0]) if not i.get("instruction")])
            new_first = [turn(moved)] + step_turns[first][1:]
        if head_len + suffix - lengths[first] + sum(len(t.input_ids) for t in new_first) <= max_length:
            logger.debug(
                "%s: dropped the first %d of %d frame steps to fit max_length=%d", name, first, len(steps), max_length
            )
            return first, step_turns[:first] + [new_first] + step_turns[first + 1 :]
    raise ValueError(
        f"{name}: even the system turn and the last frame step ({head_len + lengths[-1]} tokens) exceed "
        f"max_length={max_length}; raise max_length or use fewer/smaller frames"
    )
