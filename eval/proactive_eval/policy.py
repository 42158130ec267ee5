"""The interface every streaming model meets at: one decision per frame step (docs/architecture.md).

Implemented by the HF engine (`proactive_rl.streaming`), by the OpenAI-compatible chat client
(`proactive_eval.common.openai_policy`) and by scripted policies in tests. The streaming evaluator and the
GRPO rollouts both drive it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass
class Observation:
    """What a policy sees at one decision step (P³I Algorithm 1).

    Args:
        episode_id (`str`): the episode being streamed.
        step (`int`): 0-based index of the decision step.
        time (`float`): the time of this step's frame, in seconds.
        frames (`list`): the new frame(s) of this step, as ``H×W×3`` uint8 arrays.
        instruction (`str`): the episode's instruction; a policy puts it in the first user turn.
        user_text (`str`, *optional*): scheduled user text that joins this turn (docs/spec.md §1).
        meta (`dict`, *optional*): task-specific extras (e.g. the question of a `pvqa` episode).
    """

    episode_id: str
    step: int
    time: float
    frames: list
    instruction: str
    user_text: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def first(self) -> bool:
        return self.step == 0


@runtime_checkable
class StreamingPolicy(Protocol):
    """A model that watches a stream. `reset` starts an episode; `step` returns the assistant turn's text
    (``</Silence>``, ``</Response> ...`` or the model's own silence signal, stripped by the evaluator)."""

    def reset(self, episode) -> None: ...

    def step(self, observation: Observation) -> str: ...
