"""What every trainer shares: the model a recipe names, the frozen vision tower, and the end of a run.

The trainers (`proactive_rl.sft`, `proactive_rl.grpo.streaming`, `proactive_rl.grpo.suggestion`) differ in data and
loss; loading the model and saving the result are the same code.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from proactive_rl.chat.messages import DEFAULT_SYSTEM_PROMPT, TIMESTAMP_FORMAT
from proactive_rl.data.mixture import DatasetSource, check_source, parse_mixture
from proactive_rl.errors import InputError, MissingInput, input_errors, report
from proactive_rl.evaluation import ProactiveEvalCallback
from proactive_rl.evaluation.config import EvalCallbackConfig
from proactive_rl.evaluation.shutdown import exit_launched
from proactive_rl.models.families import family_of
from proactive_rl.models.spec import check_model_source, load_model_spec, parse_tiny_spec
from proactive_rl.models.tokenizer import STATE_TOKENS
from proactive_rl.preemption import REQUEUE_EXIT_CODE, Preempted
from proactive_rl.recipe_args import check_output_dir, config_path, located, parse_recipe, resolve_config

PRIVATE_TOUCHES = {
    "_tied_weights_keys": "transformers 5.25.0: PreTrainedModel._tied_weights_keys, keys a checkpoint may omit "
    "(load_checkpoint_weights)",
}


def run_entry_point(make_parser, main, argv: list[str] | None = None) -> int:
    """Every trainer's ``train_main``: parse ``--config RECIPE.yaml`` (a file, or a shipped recipe by name) and flag
    overrides with the trainer's ``TrlParser``, then ``main(script_args, training_args, model_args)``.

    A run stopped by a pre-emption signal (`proactive_rl.preemption`) saved a checkpoint and exits with
    ``REQUEUE_EXIT_CODE`` (75).

    An error about the input (an unknown recipe key, a bad value, a missing data file or model folder) is printed as
    one line naming the recipe, and the exit status is 2 (`proactive_rl.errors.report`; `proactive_rl.recipe_args`).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    path = config_path(argv)
    try:
        argv = resolve_config(argv)
        path = config_path(argv)
        args = parse_recipe(make_parser(), argv)
        check_inputs(*args)  # data, tasks and the model source, before any model loads
        main(*args)
    except input_errors() as err:
        return report("proactive-rl train", located(err, path, argv))
    except Preempted as stop:  # a checkpoint was saved on SIGTERM / SIGUSR1: the launcher requeues the run
        logging.getLogger(__name__).warning("%s", stop)
        return exit_launched(REQUEUE_EXIT_CODE)
    return exit_launched(0)  # under accelerate launch: the group closed, then exit here (no interpreter teardown)


def check_inputs(script_args, training_args, model_args) -> None:
    """What a run reads must exist before any model loads: every episode file of the recipe's mixtures and of its
    evaluators (`proactive_rl.data.mixture.check_source`), every environment file, a folder ``output_dir`` can be
    (`check_output_dir`), then the model (`check_model_args`)."""
    for key in ("dataset_mixture", "eval_mixture", "replay_mixture"):
        for i, src in enumerate(getattr(script_args, key, None) or []):
            if isinstance(src, DatasetSource):
                check_source(src, f"{key}[{i}]")
    for key in ("environments", "eval_environments"):  # the suggestion trainer's ProactiveBench files
        for i, spec in enumerate(getattr(script_args, key, None) or []):
            source = getattr(spec, "source", "synthetic")
            if source != "synthetic" and not Path(source).exists():
                raise MissingInput(f"{key}[{i}]: no such file {source!r} (paths are relative to {Path.cwd()})")
    check_output_dir(training_args.output_dir)
    config = getattr(script_args, "eval_callback", None)
    for i, evaluator in enumerate(getattr(config, "evaluators", None) or []):
        for key in ("episodes", "baseline_episodes"):
            raw, where = getattr(evaluator, key, None), f"eval_callback.evaluators[{i}].{key}"
            if isinstance(raw, list):
                for src in (s if isinstance(s, DatasetSource) else parse_mixture(s, where)[0] for s in raw):
                    check_source(src, where)
    check_model_args(model_args)


def check_model_args(model_args) -> None:
    """What a recipe's model block names must exist and be loadable here; checked before any data or model loads.

    A local ``model_name_or_path`` that does not exist fails naming the field and the fix (`check_model_path`);
    ``load_in_4bit`` / ``load_in_8bit`` (QLoRA, bitsandbytes) needs a CUDA GPU, the bitsandbytes package, a real
    checkpoint and ``use_peft: true``, and is refused with the flag's name otherwise (never silently ignored).
    """
    # deferred: keeps torch/transformers out of light import paths

    import torch

    check_model_source(model_args.model_name_or_path)
    flag = next((f for f in ("load_in_4bit", "load_in_8bit") if getattr(model_args, f, False)), None)
    if flag is None:
        return
    if not torch.cuda.is_available():
        raise InputError(
            f"{flag}: QLoRA (bitsandbytes k-bit quantization) needs a CUDA GPU and none is available here; set "
            f"{flag}: false (use_peft: true alone trains LoRA adapters in full precision) or run on a GPU"
        )
    if parse_tiny_spec(model_args.model_name_or_path) is not None:
        raise InputError(f"{flag}: the tiny models are built in full precision and cannot be quantized")
    if not getattr(model_args, "use_peft", False):
        raise InputError(f"{flag}: a quantized model only trains adapters; set use_peft: true")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ImportError(f"{flag}: needs the bitsandbytes package (pip install bitsandbytes)")


def load_for_training(model_args, seed: int = 0, state_tokens: bool = True):
    """Model (in train mode) and processor named by ``model_args.model_name_or_path`` (`load_model_spec`).

    ``load_in_4bit`` / ``load_in_8bit`` load the checkpoint quantized (QLoRA) on the local GPU (`check_model_args`).
    """
    # deferred: keeps torch/transformers out of light import paths
    from trl import get_quantization_config

    check_model_args(model_args)
    quantization = get_quantization_config(model_args)
    extra = {}
    if quantization is not None:  # bitsandbytes places the quantized weights on this process's GPU
        from accelerate import PartialState

        extra = {"quantization_config": quantization, "device_map": {"": PartialState().local_process_index}}
    model, processor = load_model_spec(
        model_args.model_name_or_path,
        dtype=model_args.dtype,
        attn_implementation=model_args.attn_implementation,
        state_tokens=state_tokens,
        seed=seed,
        **extra,
    )
    return model.train(), processor


def peft_config_for(model_args, model, processor, state_tokens: bool = True):
    """TRL's LoRA config of ``model_args`` (None without ``use_peft``), with the state-token rows trainable.

    A LoRA on the attention projections leaves the embedding rows frozen, so ``</Silence>`` / ``</Response>``
    (new tokens, docs/spec.md §2) could never move apart. When the tokenizer holds the state tokens their rows of the
    input embedding (and of an untied output embedding) are trained as well, through PEFT's
    ``trainable_token_indices`` (only those rows, not the whole matrix). A recipe that sets
    ``trainable_token_indices`` or saves the embeddings whole (``lora_modules_to_save``) keeps its choice; a trainer
    whose outputs carry no state tokens (single-turn MCQA) passes ``state_tokens=False``.
    """
    # deferred: keeps torch/transformers out of light import paths
    from trl import get_peft_config

    config = get_peft_config(model_args)
    if not state_tokens or config is None or getattr(config, "trainable_token_indices", None) is not None:
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


def load_checkpoint_weights(trainer, resume_from_checkpoint: str, model=None) -> bool:
    """Copy a plain checkpoint's weights into the trainer's model through ``from_pretrained``; False when the
    checkpoint is not one (PEFT, FSDP, DeepSpeed or sharded: the Trainer's own loader takes it).

    A trainer's ``_load_from_checkpoint`` override calls this (transformers 5.25.0): the Trainer loads
    ``model.safetensors`` with a raw ``load_state_dict``, but ``save_pretrained`` writes Qwen-VL weights in the hub's
    key layout (``visual.*``, ``model.layers.*``), so a resume would silently keep the *initial* weights;
    ``from_pretrained`` maps the keys. A checkpoint that does not match the model is an error naming it.
    """
    # deferred: keeps torch/transformers out of light import paths

    from transformers.utils import SAFE_WEIGHTS_NAME

    target = trainer.accelerator.unwrap_model(model if model is not None else trainer.model)
    plain = os.path.isfile(os.path.join(resume_from_checkpoint, SAFE_WEIGHTS_NAME))
    if not plain or trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled or hasattr(target, "peft_config"):
        return False
    dtype = next(target.parameters()).dtype
    loaded = type(target).from_pretrained(resume_from_checkpoint, dtype=dtype)
    missing, unexpected = target.load_state_dict(loaded.state_dict(), strict=False)
    tied = getattr(target, "_tied_weights_keys", None) or {}  # transformers' default is None
    if unexpected or [k for k in missing if k not in tied]:
        raise InputError(
            f"{resume_from_checkpoint}: checkpoint does not match the model (missing {missing[:5]}, "
            f"unexpected {unexpected[:5]}); resume_from_checkpoint must name a checkpoint of this recipe's model"
        )
    return True


def eval_callback_config(raw, where: str = "eval_callback"):
    """A recipe's ``eval_callback`` block validated (`EvalCallbackConfig`) when the recipe is parsed; None stays None."""
    if raw is None:
        return None

    return EvalCallbackConfig.from_dict(raw, where)


def attach_eval_callback(trainer, config):
    """Evaluate the live model on save / every N steps (`ProactiveEvalCallback`, ZeRO-3-safe); None: nothing."""
    if config is None:
        return None

    return ProactiveEvalCallback(config).attach(trainer)


def freeze_vision_tower(model) -> int:
    """Freeze the vision encoder but not what maps its features into the language model (Qwen-VL's merger(s); P³I
    Appendix C), as its model family names them (`ModelFamily.vision_tower_parameters`); returns the number of frozen
    tensors."""
    try:
        family = family_of(model)
    except TypeError as err:  # of no registered family
        raise InputError(f"freeze_vision_tower: {err}") from None
    tower = family.vision_tower_parameters()
    if not tower:
        raise InputError(f"freeze_vision_tower: the model family of {type(model).__name__} names no vision tower")
    for _, param in tower:
        param.requires_grad_(False)
    return len(tower)


def finish(trainer, output_dir: str, reports: dict[str, Any] | None = None, model_args=None):
    """Save the model, the trainer state (log history), the processor (with its state tokens) and a model card.

    ``README.md`` (`model_card`) says what the folder is: base model, recipe, the state tokens and how to prompt the
    model, and the latest evaluation. With ``push_to_hub: true`` the whole folder (model, processor, card) is
    uploaded at the end, so the hub copy carries the processor with its state tokens.

    Args:
        reports (`dict[str, Any]`, *optional*): ``file name -> JSON-able payload`` written beside the model by the
            main process (e.g. an end-of-run evaluation).
        model_args (`trl.ModelConfig`, *optional*): the recipe's model block, for the card's base model.
    """
    # _internal_call: Trainer.save_model would push (and TRL write its own card) before ours exists; pushed below
    trainer.save_model(output_dir, _internal_call=True)
    trainer.save_state()  # trainer_state.json: the per-step log history
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(output_dir)
        for name, payload in (reports or {}).items():
            Path(output_dir, name).write_text(json.dumps(payload, indent=2) + "\n")
        Path(output_dir, "README.md").write_text(model_card(trainer, output_dir, reports, model_args))
        if getattr(trainer.args, "push_to_hub", False):
            push_folder(trainer, output_dir)
    return trainer


def push_folder(trainer, output_dir: str) -> None:
    """Upload ``output_dir`` (model, processor with its state tokens, card) to the run's hub repository."""
    # deferred: keeps torch/transformers out of light import paths
    import huggingface_hub

    repo = getattr(trainer, "hub_model_id", None)
    if repo is None:  # the Trainer creates the repository at start-up; a run that did not gets it here
        name = trainer.args.hub_model_id or Path(output_dir).name
        repo = huggingface_hub.create_repo(name, token=trainer.args.hub_token, exist_ok=True).repo_id
    huggingface_hub.upload_folder(
        repo_id=repo,
        folder_path=output_dir,
        commit_message="End of training (proactive_rl)",
        token=trainer.args.hub_token,
        ignore_patterns=["checkpoint-*", "_*", "runs/*"],
    )


def latest_evaluation(output_dir: str, reports: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The last evaluation of the run: the eval callback's ``eval/history.jsonl`` line, else the end-of-run reports."""
    history = Path(output_dir, "eval", "history.jsonl")
    if history.is_file():
        lines = [line for line in history.read_text().splitlines() if line.strip()]
        if lines:
            record = json.loads(lines[-1])
            return {"source": "eval/history.jsonl", "step": record.get("step"), "metrics": record.get("metrics", {})}
    for name, payload in (reports or {}).items():
        return {"source": name, "step": None, "metrics": payload}
    return None


def model_card(trainer, output_dir: str, reports: dict[str, Any] | None = None, model_args=None) -> str:
    """``README.md`` of a saved model folder: base model, recipe, state tokens, how to prompt, latest evaluation."""
    base = getattr(model_args, "model_name_or_path", None) or getattr(trainer.model.config, "name_or_path", "")
    recipe = config_path(sys.argv[1:])
    tokenizer = getattr(trainer.processing_class, "tokenizer", trainer.processing_class)
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in STATE_TOKENS if t in tokenizer.get_vocab()}
    hub_base = base and "/" in base and not base.startswith((".", "/", "~")) and not Path(base).exists()
    front = {"library_name": "transformers", "tags": ["proactive_rl", type(trainer).__name__, "streaming-video"]}
    if hub_base:
        front["base_model"] = base
    args = trainer.args
    knobs = {
        k: getattr(args, k)
        for k in ("learning_rate", "max_steps", "per_device_train_batch_size", "num_generations", "seed")
        if getattr(args, k, None) is not None
    }
    lines = ["---", yaml.safe_dump(front, sort_keys=False).strip(), "---", "", f"# {Path(output_dir).name}", ""]
    lines += [f"Trained with proactive_rl (`{type(trainer).__name__}`) from `{base or 'unknown'}`."]
    lines += ["", "## Recipe", ""]
    lines += [f"- recipe: `{recipe}`" if recipe else "- recipe: built in code (no `--config`)"]
    lines += [f"- command: `{' '.join(sys.argv)}`"] + [f"- {k}: `{v}`" for k, v in knobs.items()]
    lines += [f"- steps trained: {trainer.state.global_step}", "", "## State tokens and how to prompt", ""]
    if ids:
        lines += [", ".join(f"`{t}` (id {i})" for t, i in ids.items()) + " are single, non-special added tokens of"]
        lines += ["the saved tokenizer (kept by `skip_special_tokens=True` decoding; docs/spec.md §2). The model"]
        lines += ["watches a stream one frame per user turn and answers every turn with `</Silence>` or"]
        lines += ["`</Response> <answer>`. The system turn it was trained with:", "", f"> {DEFAULT_SYSTEM_PROMPT}", ""]
        example = TIMESTAMP_FORMAT.format(5.0)
        lines += [
            f"Each frame's user turn starts with its timestamp (`{example}`), the first one carries the request."
        ]
        lines += ["", "```python", "from proactive_rl.models import load_model"]
        lines += ["from proactive_rl.streaming import HFStreamingPolicy  # frame-by-frame decoding, KV cache kept"]
        lines += ["", f'model, processor = load_model("{output_dir}")', "```"]
    else:
        lines += [
            "Single-turn multiple-choice model: the prompt is the question with lettered options (no state tokens)."
        ]
    lines += ["", "## Evaluation", ""]
    latest = latest_evaluation(output_dir, reports)
    if latest is None:
        lines += ["No evaluation during this run (add an `eval_callback` block to the recipe)."]
    else:
        where = f"step {latest['step']}" if latest["step"] is not None else "end of run"
        lines += [f"Latest ({where}, from `{latest['source']}`):", "", "| metric | value |", "|---|---|"]
        lines += [f"| {k} | {_fmt(v)} |" for k, v in _flat(latest["metrics"]).items()]
    return "\n".join(lines) + "\n"


def _flat(metrics: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(metrics, dict):
        return {prefix.rstrip("/"): metrics}
    out: dict[str, Any] = {}
    for k, v in metrics.items():
        out.update(_flat(v, f"{prefix}{k}/") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _fmt(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
