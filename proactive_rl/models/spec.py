"""One model spec for every entry point: ``tiny:<arch>:<size>``, a hub id, or a local folder.

`load_model_spec` is what the trainers, `proactive-rl eval` and the demo call; ``tiny:`` builds the embedded tiny
model locally (no download), anything else goes through `load_model` (state tokens added when asked). A spec that
names a local folder which does not exist fails at once (`check_model_path`), before any network call.
"""

from __future__ import annotations

import os
from pathlib import Path

from proactive_rl.errors import InputError, MissingInput, NotAFolder

TINY_PREFIX = "tiny:"
TINY_DEFAULTS = ("qwen2_5_vl", "xs")
# First path parts that name the project's own output folders, never a hub organisation.
LOCAL_ROOTS = ("outputs", "output", "checkpoints", "runs", "demo_out")
# Seconds the Hub has to answer whether a model id exists before a run says it cannot reach it.
HUB_TIMEOUT_S = 10
MISSING_FOLDER_FIX = "run recipes/tiny/sft.yaml first, or pass --model_name_or_path tiny:qwen2_5_vl:xs"
PRIVATE_TOUCHES = {
    "_hf_deepspeed_config_weak_ref": "transformers 5.25.0: integrations.deepspeed's weak ref to the active "
    "HfDeepSpeedConfig (None outside ZeRO-3 init), read by build_unpartitioned",
}


def looks_local(name: str) -> bool:
    """Whether a model spec names a local folder rather than a hub id (``owner/name``).

    >>> [looks_local(n) for n in ("./m", "/abs/m", "~/m", "outputs/tiny-sft", "a/b/c", "m/", "Qwen/Qwen3-VL-4B")]
    [True, True, True, True, True, True, False]
    """
    if name.startswith(("/", "./", "../", "~", ".\\")) or name.endswith(("/", os.sep)):
        return True
    parts = name.replace(os.sep, "/").split("/")
    return len(parts) > 2 or (len(parts) == 2 and (parts[0] in LOCAL_ROOTS or Path(parts[0]).is_dir()))


def check_model_path(name: str, field: str = "model_name_or_path", fix: str = MISSING_FOLDER_FIX) -> None:
    """Fail at once, naming the field, the path and the fix, when `name` names a local folder that does not exist.

    Without this check ``from_pretrained`` takes a missing ``outputs/tiny-sft`` for a hub id and retries the
    network for half a minute before an unrelated connection error.
    """
    if parse_tiny_spec(name) is not None or not looks_local(name):
        return
    path = Path(name).expanduser()
    if not path.exists():
        raise MissingInput(
            f"{field}: no model folder at {name!r} ({path.resolve()}): it names a local folder that does not exist "
            f"(yet); {fix}"
        )
    if not path.is_dir():
        raise NotAFolder(f"{field}: {name!r} is a file; expected a model folder (save_pretrained output)")


def check_model_source(
    name: str, field: str = "model_name_or_path", flag: str = "--model_name_or_path", fix: str = MISSING_FOLDER_FIX
) -> None:
    """Fail in seconds, naming `field`, the model and the fix, when `name` cannot be loaded from here.

    A local folder must exist (`check_model_path`). A hub id must be in the local Hugging Face cache, or the Hub must
    answer within seconds: with ``HF_HUB_OFFLINE=1`` or an unreachable Hub, ``from_pretrained`` would retry for minutes
    and end in a traceback; an id the Hub does not know is named at once.
    """
    # deferred: keeps --help / light imports fast
    check_model_path(name, field, fix)
    if parse_tiny_spec(name) is not None or looks_local(name) or Path(name).expanduser().is_dir():
        return
    import huggingface_hub
    from huggingface_hub import constants

    if isinstance(huggingface_hub.try_to_load_from_cache(name, "config.json"), str):
        return
    offline_fix = f"download it first where the Hub is reachable (hf download {name}), or pass {flag} a local folder"
    if constants.is_offline_mode() or os.environ.get("TRANSFORMERS_OFFLINE", "0").lower() in ("1", "true", "yes"):
        raise InputError(
            f"{field}: {name!r} is not in the local Hugging Face cache and HF_HUB_OFFLINE is set; {offline_fix}"
        )
    try:
        huggingface_hub.model_info(name, timeout=HUB_TIMEOUT_S)
    except huggingface_hub.errors.GatedRepoError:
        return  # it exists; from_pretrained says which token it needs
    except huggingface_hub.errors.RepositoryNotFoundError:
        raise InputError(
            f"{field}: no model {name!r} on the Hugging Face Hub (or it is private: log in with hf auth login); "
            f"check the id, or pass {flag} a local model folder"
        ) from None
    except huggingface_hub.errors.HfHubHTTPError:
        return  # the Hub answered (a gated model, a server error): from_pretrained says what it needs
    except Exception as err:  # no answer in time: a connection error or a timeout
        raise InputError(
            f"{field}: cannot reach the Hugging Face Hub to download {name!r} ({type(err).__name__}); {offline_fix}"
        ) from None


def parse_tiny_spec(name: str) -> tuple[str, str] | None:
    """``(arch, size)`` of a ``tiny:<arch>:<size>`` spec (missing parts default to ``qwen2_5_vl``, ``xs``), else None.

    >>> parse_tiny_spec("tiny:qwen3_vl:s"), parse_tiny_spec("tiny:"), parse_tiny_spec("Qwen/Qwen2.5-VL-3B-Instruct")
    (('qwen3_vl', 's'), ('qwen2_5_vl', 'xs'), None)
    """
    if not name.startswith(TINY_PREFIX):
        return None
    parts = name[len(TINY_PREFIX) :].split(":")
    arch = parts[0] if parts and parts[0] else TINY_DEFAULTS[0]
    size = parts[1] if len(parts) > 1 and parts[1] else TINY_DEFAULTS[1]
    return arch, size


def load_model_spec(
    name: str | None,
    *,
    dtype: str | None = None,
    attn_implementation: str | None = None,
    state_tokens: bool = True,
    seed: int = 0,
    **model_kwargs,
):
    """``(model, processor)`` named by a model spec.

    Args:
        name (`str`): ``tiny:<arch>:<size>``, a hub id or a local directory (``model_name_or_path``).
        dtype (`str`, *optional*): for real checkpoints (``bfloat16``, ``float32``, ``auto``...).
        attn_implementation (`str`, *optional*): ``sdpa`` by default; checked before anything loads.
        state_tokens (`bool`, *optional*, defaults to `True`): add ``</Silence>`` / ``</Response>`` to a real
            checkpoint (the tiny tokenizer always has them).
        seed (`int`, *optional*, defaults to `0`): weight seed of a tiny model.
        **model_kwargs: passed to `load_model` for a real checkpoint (``quantization_config``, ``device_map``).
    """
    # deferred: keeps --help / light imports fast
    if not name:
        raise InputError("model_name_or_path: required (a hub id, a local directory, or tiny:<arch>:<size>)")
    from proactive_rl.models.loading import check_attn_implementation, load_model
    from proactive_rl.models.tiny import build_tiny

    check_model_path(name)
    tiny = parse_tiny_spec(name)
    if tiny is None:
        return load_model(
            name, dtype=dtype, attn_implementation=attn_implementation, state_tokens=state_tokens, **model_kwargs
        )
    if model_kwargs.get("quantization_config") is not None:
        raise InputError(f"{name}: a tiny model is built in full precision and cannot be quantized (load_in_4bit)")
    attn = check_attn_implementation(attn_implementation)
    model, processor = build_unpartitioned(build_tiny, *tiny, seed)
    if attn != "sdpa":
        model.set_attn_implementation(attn)
    return model, processor


def build_unpartitioned(build, *args):
    """Build a tiny model outside ``deepspeed.zero.Init``: ZeRO-3 partitions it at wrap time instead.

    A model built from a config under ZeRO-3 init is partitioned before its weights are initialised, which the
    Qwen-VL initialisers do not support; a tiny model fits everywhere, so it is built whole.
    """
    # deferred: keeps --help / light imports fast
    from transformers.integrations import deepspeed as hf_ds

    config = hf_ds._hf_deepspeed_config_weak_ref() if hf_ds._hf_deepspeed_config_weak_ref else None
    if config is None:
        return build(*args)
    hf_ds.unset_hf_deepspeed_config()
    try:
        return build(*args)
    finally:
        hf_ds.set_hf_deepspeed_config(config)
