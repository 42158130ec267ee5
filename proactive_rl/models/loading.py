"""Load a real checkpoint (hub id or local directory) with its processor, and give it the state tokens.

One function for every entry point (trainer, evaluator, demo): `load_model` takes a hub id such as
``Qwen/Qwen3-VL-4B-Instruct`` or a directory written by `save_pretrained` (a tiny model included), adds
``</Silence>`` / ``</Response>`` as single non-special added tokens when missing (docs/spec.md §2; non-special so
that ``skip_special_tokens=True`` decoding keeps them), and resizes the embeddings. The tokens live in the tokenizer, so saving the processor beside the model records them and
a checkpoint reloads with them.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

import torch

from proactive_rl.errors import InputError, did_you_mean
from proactive_rl.models.tokenizer import STATE_TOKENS, plain_state_tokens

logger = logging.getLogger(__name__)

ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2", "flash_attention_3", "flex_attention")
_DTYPES = {
    "auto": "auto",
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
}


def load_model(
    name_or_path: str | Path,
    dtype: str | torch.dtype | None = None,
    attn_implementation: str | None = None,
    *,
    torch_dtype: str | torch.dtype | None = None,
    state_tokens: bool = True,
    processor_kwargs: dict | None = None,
    **model_kwargs,
):
    """Load a vision-language model and its processor from a hub id or a local path.

    Args:
        name_or_path (`str` or `Path`): a hub id or a directory holding a model and processor (`save_pretrained`).
        dtype (`str` or `torch.dtype`, *optional*): `"bfloat16"`, `"float16"`, `"float32"`, `"auto"` (the
            checkpoint's) or a torch dtype. Defaults to the checkpoint's dtype (`"auto"`).
        attn_implementation (`str`, *optional*, defaults to `"sdpa"`): one of `ATTN_IMPLEMENTATIONS`.
            `"flash_attention_2"` needs the `flash-attn` package (``pip install -e ".[gpu]"``).
        torch_dtype (`str` or `torch.dtype`, *optional*): alias of `dtype` (the pre-v5 transformers name).
        state_tokens (`bool`, *optional*, defaults to `True`): add the state tokens when missing (`add_state_tokens`).
        processor_kwargs (`dict`, *optional*): passed to `AutoProcessor.from_pretrained` (e.g. ``min_pixels``).
        **model_kwargs: passed to `AutoModelForImageTextToText.from_pretrained` (``revision``, ``device_map``, ...);
            ``revision``, ``cache_dir``, ``token``, ``trust_remote_code`` and ``local_files_only`` go to the processor too.

    Returns:
        `(model, processor)`.
    """
    # deferred: keeps torch/transformers out of light import paths
    from transformers import AutoModelForImageTextToText, AutoProcessor

    if dtype is not None and torch_dtype is not None and dtype != torch_dtype:
        raise ValueError(f"load_model got dtype={dtype!r} and torch_dtype={torch_dtype!r}; pass only one")
    resolved_dtype = _resolve_dtype(dtype if dtype is not None else torch_dtype)
    attn = check_attn_implementation(attn_implementation)
    name = str(name_or_path)
    if name.startswith(("/", "./", "../", "~")) and not Path(name).expanduser().exists():
        raise FileNotFoundError(f"load_model: no model directory at {name!r}")
    # Where to find the files applies to the processor too.
    shared = {
        k: model_kwargs[k]
        for k in ("revision", "cache_dir", "token", "trust_remote_code", "local_files_only")
        if k in model_kwargs
    }
    processor = AutoProcessor.from_pretrained(str(name_or_path), **shared, **(processor_kwargs or {}))
    model = AutoModelForImageTextToText.from_pretrained(
        str(name_or_path), dtype=resolved_dtype, attn_implementation=attn, **model_kwargs
    )
    plain_state_tokens(processor.tokenizer if hasattr(processor, "tokenizer") else processor)
    if state_tokens:
        add_state_tokens(model, processor)
    return model, processor


def check_attn_implementation(attn_implementation: str | None) -> str:
    """Validate an attention implementation name (default `"sdpa"`); flash-attention must be installed to be used."""
    # deferred: keeps torch/transformers out of light import paths
    attn = attn_implementation or "sdpa"
    if attn not in ATTN_IMPLEMENTATIONS:
        raise InputError(
            f"attn_implementation: unknown {attn!r};{did_you_mean(attn, ATTN_IMPLEMENTATIONS)} expected one of "
            f"{', '.join(ATTN_IMPLEMENTATIONS)}"
        )
    if attn in ("flash_attention_2", "flash_attention_3"):
        problem = attn_problem(attn)
        if problem:
            raise InputError(f"attn_implementation: {attn} {problem}; pass --attn_implementation sdpa")
    return attn


def attn_problem(attn: str) -> str | None:
    """Why attention implementation `attn` cannot run here (flash-attention without its package or a CUDA GPU)."""
    # deferred: keeps torch/transformers out of light import paths
    from transformers.utils import is_flash_attn_2_available, is_flash_attn_3_available

    if attn == "flash_attention_2" and not is_flash_attn_2_available():
        return "needs the flash-attn package and a CUDA GPU (pip install -e '.[gpu]'), not usable here"
    if attn == "flash_attention_3" and not is_flash_attn_3_available():
        return "needs flash-attn 3 and a Hopper GPU, not usable here"
    return None


def add_state_tokens(model, processor) -> dict[str, int]:
    """Add ``</Silence>`` and ``</Response>`` as single non-special tokens when missing, and fit the embeddings.

    docs/spec.md §2. The tokens are *added* tokens (matched whole in any text) but not *special* ones, so that
    decoding with ``skip_special_tokens=True`` (TRL, vLLM) keeps them; a tokenizer that holds them as special
    tokens (an older checkpoint) has them re-registered (`plain_state_tokens`, ids unchanged). When the embedding
    matrix has no room for new ids it is resized; when it already has spare rows (released Qwen checkpoints pad
    their vocabulary) they are used. Either way each new row (input and output embeddings) starts at the mean row of
    the pieces its word is made of (``Silence``, ``Response``), so the two tokens start apart and near meaningful
    words rather than tied at one vocabulary mean. Idempotent.

    Args:
        model (`PreTrainedModel`): the model whose input (and output) embeddings to fit.
        processor (`ProcessorMixin` or tokenizer): the processor (its `tokenizer` is modified) or a tokenizer.

    Returns:
        `dict[str, int]`: the id of each state token.
    """
    # deferred: keeps torch/transformers out of light import paths
    from tokenizers import AddedToken

    tokenizer = getattr(processor, "tokenizer", processor)
    plain_state_tokens(tokenizer)
    old_len = len(tokenizer)
    missing = [t for t in STATE_TOKENS if not _is_single_token(tokenizer, t)]
    if missing:
        tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in missing])
        new_ids = [tokenizer.convert_tokens_to_ids(t) for t in missing]
        rows = model.get_input_embeddings().weight.shape[0]
        if len(tokenizer) > rows:
            model.resize_token_embeddings(len(tokenizer), pad_to_multiple_of=64, mean_resizing=False)
        _init_rows(model, tokenizer, {t: i for t, i in zip(missing, new_ids) if i >= old_len}, old_len)
        logger.info("added state tokens %s (ids %s)", missing, new_ids)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in STATE_TOKENS}
    for token in STATE_TOKENS:
        if not _is_single_token(tokenizer, token) or token in tokenizer.all_special_tokens:
            raise RuntimeError(f"could not make {token!r} a single non-special token of {type(tokenizer).__name__}")
    return ids


def _is_single_token(tokenizer, token: str) -> bool:
    ids = tokenizer(token, add_special_tokens=False)["input_ids"]
    return len(ids) == 1 and tokenizer.convert_ids_to_tokens(ids[0]) == token


def state_row_sources(tokenizer, tokens) -> dict[str, list[int]]:
    """Per state token, the ids of its word's pieces (``Silence`` for ``</Silence>``) that its row starts from."""
    return {t: tokenizer(t.strip("</>"), add_special_tokens=False)["input_ids"] for t in tokens}


def _init_rows(model, tokenizer, new: dict[str, int], old_len: int) -> None:
    # deferred: keeps torch/transformers out of light import paths
    if not new:
        return
    from transformers.integrations import is_deepspeed_zero3_enabled

    sources = state_row_sources(tokenizer, new)
    weights = [model.get_input_embeddings().weight]
    out = model.get_output_embeddings()
    if out is not None and out.weight is not weights[0]:
        weights.append(out.weight)
    if is_deepspeed_zero3_enabled():  # the weights are partitioned: gather them to modify them
        import deepspeed

        context = deepspeed.zero.GatheredParameters(weights, modifier_rank=0)
    else:
        context = contextlib.nullcontext()
    with context, torch.no_grad():
        for weight in weights:
            mean = weight[:old_len].float().mean(0)
            for token, row in new.items():
                pieces = [i for i in sources[token] if i < old_len]
                start = weight[pieces].float().mean(0) if pieces else mean
                weight[row] = start.to(weight.dtype)


def _resolve_dtype(dtype):
    if dtype is None:
        return "auto"
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in _DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; expected one of {', '.join(_DTYPES)} or a torch.dtype")
    return _DTYPES[dtype]
