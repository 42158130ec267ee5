"""The trainer table: a recipe's ``trainer`` field names one of these, and everything that runs a trainer reads it.

Each entry is a module with ``make_parser() -> TrlParser``, ``main(script_args, training_args, model_args)`` and
``train_main(argv) -> int``. `proactive-rl train`, the demo and the tests dispatch through `trainer_module`; a new
trainer is one package plus one line here (docs/architecture.md).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType

from proactive_rl.errors import InputError, did_you_mean
from proactive_rl.models.spec import check_model_path
from proactive_rl.recipe_args import config_path, flag_value, located, resolve_config
from proactive_rl.shipped import read_recipe, resolve_recipe

TRAINERS = {
    "sft": "proactive_rl.sft.main",
    "grpo_streaming": "proactive_rl.grpo.streaming.main",
    # the credit study's variants of grpo_streaming (docs/grpo_credit.md)
    "grpo_streaming_experimental": "proactive_rl.experimental.main",
    "grpo_suggestion": "proactive_rl.grpo.suggestion.main",
}


def trainer_module(name: str) -> ModuleType:
    """The entry-point module of trainer ``name``; a clear error listing the valid names otherwise."""
    if name not in TRAINERS:
        raise InputError(
            f"trainer: unknown {name!r};{did_you_mean(name, TRAINERS)} expected one of {', '.join(TRAINERS)}"
        )
    return importlib.import_module(TRAINERS[name])


def recipe_trainer(argv: Sequence[str]) -> str:
    """The ``trainer`` named by the ``--config`` recipe (default ``sft``); a ``--trainer`` flag is not accepted."""
    path = config_path(argv)
    if path is None:
        return "sft"
    path = resolve_recipe(path)
    recipe = read_recipe(path) or {}
    trainer = recipe.get("trainer", "sft") if isinstance(recipe, dict) else "sft"
    if trainer not in TRAINERS:
        raise InputError(
            f"{path}: field 'trainer': unknown {trainer!r};{did_you_mean(trainer, TRAINERS)} "
            f"expected one of {', '.join(TRAINERS)}"
        )
    return trainer


def recipe_model(argv: Sequence[str]) -> str | None:
    """The ``model_name_or_path`` a run will load: the command line's, else the ``--config`` recipe's."""
    model, path = flag_value(argv, "--model_name_or_path"), config_path(argv)
    if model is not None or path is None:
        return model
    try:
        recipe = read_recipe(resolve_recipe(path)) or {}
    except InputError:  # an unknown or unreadable recipe
        return None  # recipe_trainer reports the unreadable recipe
    return recipe.get("model_name_or_path") if isinstance(recipe, dict) else None


def run_train(argv: Sequence[str]) -> int:
    """``proactive-rl train --config RECIPE [--field value ...]``: hand the arguments to the recipe's trainer.

    ``--config`` names a file or a shipped recipe (``tiny/sft.yaml``, `proactive_rl.shipped`). A recipe whose local
    model folder does not exist fails here, before torch or the trainer is imported (`MissingInput`, which
    ``proactive-rl`` prints in one line).
    """
    argv = resolve_config(argv)
    trainer = recipe_trainer(argv)
    model = recipe_model(argv)
    if isinstance(model, str) and model:
        try:
            check_model_path(model)
        except InputError as err:  # the message names the field, the path and the fix
            raise located(err, config_path(argv), argv) from None
    return trainer_module(trainer).train_main(list(argv))
