"""The generation backend of suggestion GRPO: TRL's vLLM path where vLLM and a CUDA GPU are there, else transformers."""

from __future__ import annotations

import importlib.util
import logging

from trl import GRPOConfig

logger = logging.getLogger(__name__)


def vllm_status() -> tuple[bool, str]:
    """``(available, reason)``: vLLM is importable and a CUDA GPU is visible."""
    # deferred: keeps torch/transformers out of light import paths

    import torch

    if importlib.util.find_spec("vllm") is None:
        return False, "vLLM is not installed (pip install -e '.[vllm]')"
    if not torch.cuda.is_available():
        return False, "no CUDA GPU is visible"
    return True, "vLLM is installed and a CUDA GPU is visible"


def resolve_generation_backend(backend: str, training_args: GRPOConfig) -> str:
    """Set ``training_args.use_vllm`` from the requested backend and what this machine has; returns the backend.

    ``use_vllm: true`` in a recipe counts as ``generation_backend: vllm``. Never claims vLLM when it is absent.
    """
    if training_args.use_vllm and backend == "auto":
        backend = "vllm"
    available, reason = vllm_status()
    if backend == "vllm" and not available:
        raise RuntimeError(
            f"generation_backend=vllm (or use_vllm=true) but {reason}; "
            "set generation_backend: auto or transformers to generate with transformers"
        )
    use = backend == "vllm" or (backend == "auto" and available)
    training_args.use_vllm = use
    chosen = f"vllm ({training_args.vllm_mode})" if use else "transformers"
    logger.info("generation backend: %s (%s)", chosen, reason if backend == "auto" else f"requested {backend}")
    return "vllm" if use else "transformers"
