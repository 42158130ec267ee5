"""`HFStreamingPolicy`: a transformers Qwen-VL model as a `proactive_eval` `StreamingPolicy` (docs/spec.md §2, §9).

Every step appends one user turn to a `StreamingSession` and decodes one assistant turn. The turns are
tokenised by `proactive_rl.chat`'s per-turn helpers, the same code that renders SFT/GRPO training dialogues,
so after N steps the session holds exactly the token sequence `chat.encode_dialogue` gives for the dialogue
(system prompt, instruction in the first user turn, timestamp, frame, scheduled user text, the model's turns).

Speculative silence (`proactive_rl.streaming.speculation`) is on by default: `step` (live, one frame at a time)
feeds the frame with a silent-turn draft; `step_ahead` (recorded video, frames known in advance; called by
`proactive_eval.streaming.run_episode` for a policy with a `lookahead`) feeds up to `lookahead` frames with their
drafts in one call, after encoding them in one vision call. Both give the turns frame-by-frame decoding gives.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import AbstractContextManager

from proactive_rl.chat import (
    DEFAULT_SYSTEM_PROMPT,
    TIMESTAMP_FORMAT,
    generation_prompt_ids,
    render_assistant_turn,
    render_system_turn,
    render_user_turn,
)

from .chunks import Chunk
from .sampling import SamplingParams
from .session import StreamingSession, TurnOutput
from .speculation import Lookahead, silent_draft


@contextlib.contextmanager
def gathered_for_generation(model, accelerator=None):
    """Whole parameters for generation (every rank generates; required under ZeRO-3).

    With an `accelerate.Accelerator`, this is TRL's ``unwrap_model_for_generation`` (unwraps DDP/DeepSpeed and
    gathers ZeRO-3 shards). Without one, ZeRO-3 partitioned parameters (those carrying a ``ds_id``) are gathered
    with ``deepspeed.zero.GatheredParameters``; otherwise the model is yielded as is. Gather once around a whole
    episode or rollout group, not per step: each gather moves every parameter.
    """
    # deferred: optional extra
    if accelerator is not None:
        from trl.models import unwrap_model_for_generation

        with unwrap_model_for_generation(model, accelerator) as unwrapped:
            yield unwrapped
        return
    partitioned = [p for p in model.parameters() if hasattr(p, "ds_id")]
    if not partitioned:
        yield model
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(partitioned):
        yield model


class HFStreamingPolicy:
    """A `StreamingPolicy` (``reset(episode)`` / ``step(observation) -> str``) over the KV-cache engine.

    Args:
        model (`PreTrainedModel`): a Qwen2.5-VL / Qwen3-VL model (PEFT-wrapped is fine).
        processor (`ProcessorMixin`): its processor, with the state tokens (docs/spec.md §2) in its tokenizer.
        sampling (`SamplingParams`, *optional*): per-turn decoding; defaults to greedy with a 32-token cap and
            ``defer_capped_stop=True`` (a policy returns text only, so a capped turn's stop needs no model call).
        max_frames (`int`, *optional*): keep only the latest K frames (text stays); ``observation.meta
            ["max_frames"]`` (set by `proactive_eval.streaming.run_episode`) takes precedence.
        system_prompt (`str`, *optional*): the system turn; defaults to `proactive_rl.chat.DEFAULT_SYSTEM_PROMPT`.
        timestamp_format (`str`, *optional*, defaults to ``"<t={:.1f}s>"``): how a user turn shows its time.
        context (`Callable[[], ContextManager]`, *optional*): entered around every step, e.g.
            ``lambda: gathered_for_generation(model)`` under ZeRO-3 when the caller cannot gather once for a
            whole run.
        speculate (`bool`, *optional*, defaults to `True`): feed each frame with the silent turn as a draft and keep
            it where the model's own choice is that turn (same outputs; one model call per silent frame).
        lookahead (`int`, *optional*, defaults to `16`): the most frames `step_ahead` decides in one call (K; it
            starts there, falls back to 1 after a rejected draft and doubles back; see `speculation.Lookahead`).
        encode_ahead (`bool`, *optional*, defaults to `True`): `step_ahead` encodes all the frames it is given in
            one vision call (their features are kept until the frames are decided); otherwise one call per frame.
        batcher (`Batcher`, *optional*): play on a `proactive_rl.streaming.batch.BatchedSession` of this batcher
            (the episode runs in one of its `map` workers, in lockstep with the others; same turns). Its model is
            the one used; `context` is then entered in the worker, so gather once around the whole `map` instead.

    After each step, `last_turn` holds the decoded `TurnOutput` (tokens, log-probabilities) and `session` the
    engine state.
    """

    def __init__(
        self,
        model,
        processor,
        sampling: SamplingParams | None = None,
        max_frames: int | None = None,
        system_prompt: str = DEFAULT_SYSTEM_PROMPT,
        timestamp_format: str = TIMESTAMP_FORMAT,
        context: Callable[[], AbstractContextManager] | None = None,
        speculate: bool = True,
        lookahead: int = 16,
        encode_ahead: bool = True,
        batcher=None,
    ):
        self.model = model
        self.processor = processor
        self.sampling = sampling or SamplingParams(defer_capped_stop=True)
        self.max_frames = max_frames
        self.system_prompt = system_prompt
        self.timestamp_format = timestamp_format
        self.context = context or contextlib.nullcontext
        self.session: StreamingSession | None = None
        self.last_turn: TurnOutput | None = None
        self.episode = None
        self._header = generation_prompt_ids(processor)
        # What the chat template puts after an assistant turn's end-of-turn token (Qwen: "\n"); the decoded
        # turn stops at that token, so the next chunk starts with it.
        probe = render_assistant_turn(processor, "x").input_ids
        stop = self.processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
        self._after_stop = probe[len(probe) - probe[::-1].index(stop) :]
        self._system = render_system_turn(processor, system_prompt).input_ids
        self.draft = silent_draft(processor) if speculate else None
        self.lookahead = lookahead
        self.encode_ahead = encode_ahead
        self.batcher = batcher
        self._size = Lookahead(lookahead)
        self._chunks: dict[int, Chunk] = {}  # rendered observations not yet decided, by step

    def reset(self, episode) -> None:
        self.episode = episode
        self.session = None
        self.last_turn = None
        self._size = Lookahead(self.lookahead)
        self._chunks = {}

    def step(self, observation) -> str:
        """Decide one frame (live mode: nothing is known about the next frame)."""
        return self._decide([observation], 1)[0]

    def step_ahead(self, observations: list) -> list[str]:
        """Decide the first n >= 1 of `observations`, consecutive frames known in advance (recorded video); return
        their texts. Each text depends only on the frames up to its own: the same text `step` gives."""
        if not observations:
            raise ValueError("step_ahead() needs at least one observation")
        return self._decide(list(observations), self._size.size)

    def _decide(self, observations: list, k: int) -> list[str]:
        with self.context():
            if self.session is None:
                max_frames = observations[0].meta.get("max_frames", self.max_frames)
                if self.batcher is None:
                    self.session = StreamingSession(self.model, self.processor, max_frames=max_frames)
                else:
                    self.session = self.batcher.session(max_frames=max_frames)
                self._chunks = {}
            chunks = self._render(observations)
            if self.encode_ahead:
                self.session.encode(chunks)
            chunks = chunks[:k]
            for chunk in chunks:  # (a no-op for chunks encoded already)
                self.session.encode([chunk])
            if self.draft is None:
                turns = self.session.step(chunks, self.sampling)
            else:
                kept = self.session.n_drafts_kept
                fed = self.session.speculate(chunks, self.draft)
                turns = self.session.resolve(self.sampling)
                self._size.update(fed, self.session.n_drafts_kept - kept == fed)
        for observation in observations[: len(turns)]:
            self._chunks.pop(observation.step, None)
        self.last_turn = turns[-1]
        return [turn.texts[0] for turn in turns]

    def _render(self, observations: list) -> list[Chunk]:
        """The chunks of `observations` (each frame's user turn between the previous end-of-turn and the assistant
        header), rendering the ones not seen yet with one image-processor call for all their frames."""
        new = [o for o in observations if o.step not in self._chunks]
        turns, texts_only = [], []
        for observation in new:
            first = not self.session.tokens[0] and observation is observations[0]
            head = self._system if first else self._after_stop
            kwargs = dict(
                instruction=observation.instruction if first else None,
                user_text=observation.user_text,
                timestamp_format=self.timestamp_format,
            )
            turn = render_user_turn(
                self.processor, observation.time, observation.frames, process_images=False, **kwargs
            )
            turn.input_ids = head + turn.input_ids + self._header
            turns.append(turn)
            text_only = None
            if len(turn.images) == 1:
                # the chat module's rendering of this turn once its frame falls out of `max_frames`
                bare = render_user_turn(self.processor, observation.time, [], process_images=False, **kwargs)
                text_only = head + bare.input_ids + self._header
            texts_only.append(text_only)
        images = [image for turn in turns for image in turn.images]
        pixels = grids = None
        family = self.session.family
        if images:
            processed = family.image_inputs(self.processor, images)
            pixels, grids = processed["pixel_values"], processed[family.image_key]
        for observation, turn, text_only in zip(new, turns, texts_only):
            n = len(turn.images)
            chunk = Chunk(turn.input_ids, text_only_ids=text_only)
            if n:
                rows = family.pixel_rows(grids[:n])
                chunk.pixel_values, chunk.image_grid_thw = pixels[:rows], grids[:n]
                pixels, grids = pixels[rows:], grids[n:]
            self._chunks[observation.step] = chunk
        return [self._chunks[o.step] for o in observations]
