"""What every trainer shares: the model a recipe names, the frozen vision tower, and the end of a run.

The trainers (`proactive_rl.sft`, `proactive_rl.grpo.streaming`, `proactive_rl.grpo.suggestion`) differ in data and
loss; loading the model and saving the result are the same code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proactive_rl.models.spec import check_model_path, load_model_spec, parse_tiny_spec
from proactive_rl.models.tokenizer import STATE_TOKENS


def check_model_args(model_args) -> None:
    """What a recipe's model block names must exist and be loadable here; checked before any data or model loads.

    A local ``model_name_or_path`` that does not exist fails naming the field and the fix (`check_model_path`);
    ``load_in_4bit`` / ``load_in_8bit`` (QLoRA, bitsandbytes) needs a CUDA GPU, the bitsandbytes package, a real
    checkpoint and ``use_peft: true``, and is refused with the flag's name otherwise (never silently ignored).
    """
    import importlib.util

    import torch

    check_model_path(model_args.model_name_or_path)
    flag = next((f for f in ("load_in_4bit", "load_in_8bit") if getattr(model_args, f, False)), None)
    if flag is None:
        return
    if not torch.cuda.is_available():
        raise ValueError(
            f"{flag}: QLoRA (bitsandbytes k-bit quantization) needs a CUDA GPU and none is available here; set "
            f"{flag}: false (use_peft: true alone trains LoRA adapters in full precision) or run on a GPU"
        )
    if parse_tiny_spec(model_args.model_name_or_path) is not None:
        raise ValueError(f"{flag}: the tiny models are built in full precision and cannot be quantized")
    if not getattr(model_args, "use_peft", False):
        raise ValueError(f"{flag}: a quantized model only trains adapters; set use_peft: true")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError(f"{flag}: needs the bitsandbytes package (pip install bitsandbytes)")


def load_for_training(model_args, seed: int = 0, state_tokens: bool = True):
    """Model (in train mode) and processor named by ``model_args.model_name_or_path`` (`load_model_spec`).

    ``load_in_4bit`` / ``load_in_8bit`` load the checkpoint quantized (QLoRA) on the local GPU (`check_model_args`).
    """
    from trl import get_kbit_device_map, get_quantization_config

    check_model_args(model_args)
    quantization = get_quantization_config(model_args)
    extra = {"quantization_config": quantization, "device_map": get_kbit_device_map()} if quantization else {}
    model, processor = load_model_spec(
        model_args.model_name_or_path,
        dtype=model_args.dtype,
        attn_implementation=model_args.attn_implementation,
        state_tokens=state_tokens,
        seed=seed,
        **extra,
    )
    return model.train(), processor


def peft_config_for(model_args, model, processor):
    """TRL's LoRA config of ``model_args`` (None without ``use_peft``), with the state-token rows trainable.

    A LoRA on the attention projections leaves the embedding rows frozen, so ``</Silence>`` / ``</Response>``
    (new tokens, docs/spec.md §2) could never move apart. When the tokenizer holds the state tokens their rows of the
    input embedding (and of an untied output embedding) are trained as well, through PEFT's
    ``trainable_token_indices`` (only those rows, not the whole matrix). A recipe that sets
    ``trainable_token_indices`` or saves the embeddings whole (``lora_modules_to_save``) keeps its choice.
    """
    from trl import get_peft_config

    config = get_peft_config(model_args)
    if config is None or getattr(config, "trainable_token_indices", None) is not None:
        return config
    tokenizer = getattr(processor, "tokenizer", processor)
    vocab = tokenizer.get_vocab()
    ids = [vocab[t] for t in STATE_TOKENS if t in vocab]
    if not ids:
        return config
    names = {id(module): name.rsplit(".", 1)[-1] for name, module in model.named_modules()}
    inputs, outputs = model.get_input_embeddings(), model.get_output_embeddings()
    saved = set(config.modules_to_save or [])
    if names[id(inputs)] in saved:
        return config
    indices = {names[id(inputs)]: ids}
    if outputs is not None and outputs.weight is not inputs.weight and names[id(outputs)] not in saved:
        indices[names[id(outputs)]] = ids
    config.trainable_token_indices = indices
    return config


def eval_callback_config(raw, where: str = "eval_callback"):
    """A recipe's ``eval_callback`` block validated (`EvalCallbackConfig`) when the recipe is parsed; None stays None."""
    if raw is None:
        return None
    from proactive_rl.evaluation.config import EvalCallbackConfig

    return EvalCallbackConfig.from_dict(raw, where)


def attach_eval_callback(trainer, config):
    """Evaluate the live model on save / every N steps (`ProactiveEvalCallback`, ZeRO-3-safe); None: nothing."""
    if config is None:
        return None
    from proactive_rl.evaluation import ProactiveEvalCallback

    return ProactiveEvalCallback(config).attach(trainer)


def freeze_vision_tower(model) -> int:
    """Freeze the vision encoder but not its merger(s) (P³I Appendix C); returns the number of frozen tensors."""
    visual = getattr(getattr(model, "model", model), "visual", None)
    if visual is None:
        raise ValueError(f"freeze_vision_tower: {type(model).__name__} has no `model.visual` vision tower")
    frozen = 0
    for name, param in visual.named_parameters():
        if "merger" not in name:
            param.requires_grad_(False)
            frozen += 1
    return frozen


def finish(trainer, output_dir: str, reports: dict[str, Any] | None = None):
    """Save the model, the trainer state (log history) and the processor (with its state tokens) to ``output_dir``.

    Args:
        reports (`dict[str, Any]`, *optional*): ``file name -> JSON-able payload`` written beside the model by the
            main process (e.g. an end-of-run evaluation).
    """
    trainer.save_model(output_dir)
    trainer.save_state()  # trainer_state.json: the per-step log history
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(output_dir)
        for name, payload in (reports or {}).items():
            Path(output_dir, name).write_text(json.dumps(payload, indent=2) + "\n")
    return trainer
