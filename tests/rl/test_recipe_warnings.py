"""The shipped training recipes parse without transformers' FutureWarning about ``gradient_checkpointing`` (a
deprecated alias of ``activation_checkpointing``, which TRL's configs default to ``True``: a recipe that names neither
warned on every run)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import yaml

from proactive_rl.trainers import trainer_module

ROOT = Path(__file__).resolve().parents[2]
TRAINING = [p for p in sorted(ROOT.glob("recipes/*/*.yaml")) if "output_dir" in yaml.safe_load(p.read_text())]
ON_CPU = ["--bf16", "false", "--use_cpu", "true", "--tf32", "false"]  # GPU recipes, parsed here


@pytest.mark.parametrize("path", TRAINING, ids=lambda p: str(p.relative_to(ROOT / "recipes")))
def test_recipe_names_activation_checkpointing_and_does_not_warn(path):
    raw = yaml.safe_load(path.read_text())
    assert "activation_checkpointing" in raw and "gradient_checkpointing" not in raw
    parser = trainer_module(raw.get("trainer", "sft")).make_parser()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, training_args, _ = parser.parse_args_and_config(
            ["--config", str(path), *(ON_CPU if raw.get("bf16") else [])]
        )
    assert not [w for w in caught if "checkpointing" in str(w.message)], [str(w.message) for w in caught]
    assert training_args.activation_checkpointing is raw["activation_checkpointing"]
