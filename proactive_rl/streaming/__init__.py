"""The streaming inference engine (docs/spec.md §9): KV-cache sessions over vision-language models and the HF streaming policy.

- `StreamingSession`: append user turns, decode assistant turns, `fork(G)` for a GRPO group, `max_frames` eviction;
  `speculate` / `resolve`: frames decided from a silent-turn draft (`silent_draft`), K per call on recorded video.
- `HFStreamingPolicy`: a `proactive_eval` `StreamingPolicy` rendering turns with `proactive_rl.chat`.
- `gathered_for_generation`: whole parameters for generation under ZeRO-3.
"""

from .chunks import Chunk
from .policy import HFStreamingPolicy, gathered_for_generation
from .sampling import SamplingParams, choose_tokens
from .session import StreamingSession, TurnOutput
from .speculation import silent_draft

__all__ = [
    "Chunk",
    "HFStreamingPolicy",
    "SamplingParams",
    "StreamingSession",
    "TurnOutput",
    "choose_tokens",
    "gathered_for_generation",
    "silent_draft",
]
