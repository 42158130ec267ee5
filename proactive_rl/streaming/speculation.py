"""Speculative silence: decide most frames in the call that appends them (docs/spec.md §9).

A proactive model is silent at most frames, and a silent turn is a known token sequence: the draft
``</Silence><|im_end|>`` (`silent_draft`: exactly what the chat template renders between the assistant header and
the text after the end-of-turn token). `StreamingSession.speculate` feeds each frame's chunk with the draft
appended, in the same language-model call, and keeps the logits before every draft token. `resolve` then checks the
draft token by token against the model's own choice (`choose_tokens` with ``draft=``: greedy keeps it when it is the
argmax; sampling keeps it with its probability and otherwise draws from the residual, so every turn has exactly the
distribution of frame-by-frame decoding). A kept draft is the whole turn: one call for the frame instead of a
chunk call plus a decoding call per token. At the first token a row rejects, the cache is rolled back to it and the
turn is decoded as usual from the model's choice there.

With several frames known in advance (recorded video: offline evaluation, GRPO rollouts), K chunks and their drafts
go in one call. Causal attention makes each frame's logits depend only on what precedes it, so every frame up to the
first one with a rejected draft is exactly what the frame-by-frame engine computes; the frames after it are dropped
(the cache rolled back) and appended again later. `Lookahead` sizes K: it doubles after a block whose drafts all
held and falls back to 1 after a rejection, so a model that often speaks wastes little.
"""

from __future__ import annotations

from dataclasses import dataclass

from proactive_rewards.parsing import SILENCE_TOKEN
from proactive_rl.chat import generation_prompt_ids, render_assistant_turn

from .chunks import Chunk


def silent_draft(processor, silence: str = SILENCE_TOKEN) -> list[int]:
    """The token ids of a silent assistant turn as the chat template renders it, from after the generation prompt
    (``<|im_start|>assistant\\n``) through the end-of-turn token: ``</Silence><|im_end|>`` for Qwen."""
    tokenizer = getattr(processor, "tokenizer", processor)
    ids = render_assistant_turn(processor, silence).input_ids
    header = generation_prompt_ids(processor)
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>" if "<|im_end|>" in tokenizer.get_vocab() else "</s>")
    if ids[: len(header)] != header or stop not in ids[len(header) :]:
        raise ValueError(
            f"the chat template does not render the silent turn {silence!r} as header + text + end-of-turn"
        )
    body = ids[len(header) :]
    return body[: body.index(stop) + 1]


@dataclass
class Block:
    """K chunks laid out with a draft after each, as one sequence to feed.

    Args:
        ids (`list[int]`): chunk 1, draft, chunk 2, draft, ...
        spans (`list[tuple]`): the image spans of every chunk, offset into `ids` (see `chunks.image_spans`).
        ends (`list[int]`): per chunk, the offset of its draft's first token (the turn start).
        keep (`list[int]`): the offsets whose logits decide the draft tokens (the token before each).
        n_images (`list[int]`): images per chunk.
    """

    ids: list[int]
    spans: list[tuple]
    ends: list[int]
    keep: list[int]
    n_images: list[int]


def lay_out(chunks: list[Chunk], draft: list[int], spans_of) -> Block:
    """The `Block` of `chunks`, each followed by `draft`; ``spans_of(chunk)`` gives a chunk's image spans."""
    block = Block([], [], [], [], [])
    for chunk in chunks:
        offset = len(block.ids)
        block.spans += [(a + offset, z + offset, r) for a, z, r in spans_of(chunk)]
        block.ids += [int(t) for t in chunk.input_ids]
        block.ends.append(len(block.ids))
        block.keep += range(len(block.ids) - 1, len(block.ids) - 1 + len(draft))
        block.ids += draft
        block.n_images.append(chunk.n_images)
    return block


def check_draft(draft: list[int], stops: list[int]) -> None:
    """A draft is a whole turn: it ends with a stop token, and only there."""
    if not draft or draft[-1] not in stops or any(t in stops for t in draft[:-1]):
        raise ValueError(f"a draft must be a whole turn ending with one stop token of {stops}, got {draft}")


class Lookahead:
    """How many frames to speculate on next: doubles after a block whose drafts all held (up to `limit`), 1 after
    a rejection.

    Args:
        limit (`int`): the most frames per call (K); 1 is live mode.
    """

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"lookahead must be >= 1, got {limit}")
        self.limit = limit
        self.size = limit

    def update(self, fed: int, all_held: bool) -> None:
        """After a block of `fed` frames: whether every draft in it held."""
        self.size = min(self.limit, 2 * fed) if all_held else 1
