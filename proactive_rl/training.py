"""What every trainer shares: the model a recipe names, the frozen vision tower, and the end of a run.

The trainers (`proactive_rl.sft`, `proactive_rl.grpo.streaming`, `proactive_rl.grpo.suggestion`) differ in data and
loss; loading the model and saving the result are the same code.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from proactive_rl.models.spec import load_model_spec


def load_for_training(model_args, seed: int = 0, state_tokens: bool = True):
    """Model (in train mode) and processor named by ``model_args.model_name_or_path`` (`load_model_spec`)."""
    model, processor = load_model_spec(
        model_args.model_name_or_path,
        dtype=model_args.dtype,
        attn_implementation=model_args.attn_implementation,
        state_tokens=state_tokens,
        seed=seed,
    )
    return model.train(), processor


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
