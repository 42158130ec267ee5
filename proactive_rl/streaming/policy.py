"""`HFStreamingPolicy`: a transformers Qwen-VL model as a `proactive_eval` `StreamingPolicy` (docs/spec.md §2, §9).

Every step appends one user turn to a `StreamingSession` and decodes one assistant turn. The turns are
tokenised by `proactive_rl.chat`'s per-turn helpers, the same code that renders SFT/GRPO training dialogues,
so after N steps the session holds exactly the token sequence `chat.encode_dialogue` gives for the dialogue
(system prompt, instruction in the first user turn, timestamp, frame, scheduled user text, the model's turns).
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

from .sampling import SamplingParams
from .session import StreamingSession, TurnOutput


@contextlib.contextmanager
def gathered_for_generation(model, accelerator=None):
    """Whole parameters for generation (every rank generates; required under ZeRO-3).

    With an `accelerate.Accelerator`, this is TRL's ``unwrap_model_for_generation`` (unwraps DDP/DeepSpeed and
    gathers ZeRO-3 shards). Without one, ZeRO-3 partitioned parameters (those carrying a ``ds_id``) are gathered
    with ``deepspeed.zero.GatheredParameters``; otherwise the model is yielded as is. Gather once around a whole
    episode or rollout group, not per step: each gather moves every parameter.
    """
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

    def reset(self, episode) -> None:
        self.episode = episode
        self.session = None
        self.last_turn = None

    def step(self, observation) -> str:
        with self.context():
            first = self.session is None
            if first:
                max_frames = observation.meta.get("max_frames", self.max_frames)
                self.session = StreamingSession(self.model, self.processor, max_frames=max_frames)
            head = self._system if first else self._after_stop
            instruction = observation.instruction if first else None
            kwargs = dict(
                instruction=instruction, user_text=observation.user_text, timestamp_format=self.timestamp_format
            )
            turn = render_user_turn(self.processor, observation.time, observation.frames, **kwargs)
            text_only = None
            if len(turn.images) == 1:
                # the chat module's rendering of this turn once its frame falls out of `max_frames`
                bare = render_user_turn(self.processor, observation.time, [], process_images=False, **kwargs)
                text_only = head + bare.input_ids + self._header
            self.session.append_tokens(
                head + turn.input_ids + self._header, turn.pixel_values, turn.image_grid_thw, text_only_ids=text_only
            )
            self.last_turn = self.session.generate(self.sampling)
        return self.last_turn.texts[0]
