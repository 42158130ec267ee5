"""Models: tiny local VLMs (Qwen-VL, LLaVA-NeXT), real-checkpoint loading, and the state tokens (docs/spec.md §2).

- `build_tiny(arch, size, seed)`: a Qwen2.5-VL / Qwen3-VL / LLaVA-NeXT-Mistral model and processor built locally
  (tests, demo).
- `load_model(name_or_path, ...)`: a hub id or a local directory, with the state tokens added.
- `add_state_tokens(model, processor)`: ``</Silence>`` / ``</Response>`` as single special tokens.
"""

from proactive_rl.models.loading import ATTN_IMPLEMENTATIONS, add_state_tokens, check_attn_implementation, load_model
from proactive_rl.models.tiny import ARCHS, SIZES, build_tiny
from proactive_rl.models.tokenizer import STATE_TOKENS, build_tokenizer

__all__ = [
    "ARCHS",
    "ATTN_IMPLEMENTATIONS",
    "SIZES",
    "STATE_TOKENS",
    "add_state_tokens",
    "build_tiny",
    "build_tokenizer",
    "check_attn_implementation",
    "load_model",
]
