"""Episodes as state-token dialogues, rendered through the model's own chat template (docs/spec.md §2).

One decision step per sampled frame (P³I Algorithm 1). A dialogue is::

    system     the role, and when to stay silent
    user       [instruction, first turn only] <t=0.0s> <frame> [scheduled user text]
    assistant  </Silence>
    user       <t=1.0s> <frame>
    assistant  </Response> Warning
    ...

`build_messages` makes the HF multimodal chat messages; `encode_dialogue` turns them into model inputs
with `labels` on the assistant turns only (state token, content, end-of-turn token). The incremental
helpers `render_user_turn` / `render_assistant_turn` give exactly the token ids the full rendering gives
for that turn, so the streaming engine (docs/spec.md §9) can append one turn at a time to its KV cache.

Rendering is per turn (`proactive_rl.chat.render`): each message is rendered alone through the chat
template (in the context of a system message) and tokenised alone, which equals rendering and tokenising the whole dialogue because the
Qwen templates are turn-separable and every turn boundary falls on a special token. This is checked once
per processor on a probe dialogue, and the tests compare with the processor's own full rendering.
Rendered and tokenised turns are cached (``</Silence>`` turns and repeated timestamps cost nothing).
"""

from proactive_rl.chat.encode import encode_dialogue
from proactive_rl.chat.messages import (
    DEFAULT_SYSTEM_PROMPT,
    IGNORE_INDEX,
    RESPONSE_JOIN,
    TIMESTAMP_FORMAT,
    TRUNCATION,
    build_messages,
    ground_truth_texts,
    timestamp_text,
    user_content,
)
from proactive_rl.chat.render import (
    RenderedTurn,
    generation_prompt_ids,
    render_assistant_turn,
    render_observation,
    render_system_turn,
    render_text,
    render_user_turn,
    turn_markers,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "IGNORE_INDEX",
    "RESPONSE_JOIN",
    "TIMESTAMP_FORMAT",
    "TRUNCATION",
    "RenderedTurn",
    "build_messages",
    "encode_dialogue",
    "generation_prompt_ids",
    "ground_truth_texts",
    "render_assistant_turn",
    "render_observation",
    "render_system_turn",
    "render_text",
    "render_user_turn",
    "timestamp_text",
    "turn_markers",
    "user_content",
]
