"""Models: tiny local VLMs (Qwen-VL, LLaVA-NeXT), real-checkpoint loading, and the state tokens (docs/spec.md §2).

- `build_tiny(arch, size, seed)`: a Qwen2.5-VL / Qwen3-VL / LLaVA-NeXT-Mistral model and processor built locally
  (tests, demo), by the family that registered the arch.
- `proactive_rl.models.families`: one folder per model family (its adapter, processor rules, tiny builder and chat
  template) and the registry that finds them.
- `load_model(name_or_path, ...)`: a hub id or a local directory, with the state tokens added.
- `add_state_tokens(model, processor)`: ``</Silence>`` / ``</Response>`` as single non-special added tokens.

The names are imported on first use, so `proactive_rl.models.spec.check_model_path` (run before a recipe's trainer
is even imported) does not pay for torch and transformers.
"""

from importlib import import_module

_WHERE = {
    "ATTN_IMPLEMENTATIONS": "loading",
    "add_state_tokens": "loading",
    "check_attn_implementation": "loading",
    "load_model": "loading",
    "ARCHS": "tiny",
    "SIZES": "tiny",
    "build_tiny": "tiny",
    "STATE_TOKENS": "tokenizer",
    "build_tokenizer": "tokenizer",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'proactive_rl.models' has no attribute {name!r}")
    value = getattr(import_module(f"proactive_rl.models.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
