"""A trainer's command line: ``--config RECIPE.yaml [--field value ...]`` checked before TRL's parser reads it.

- ``--config`` names a file here or a shipped recipe (``tiny/sft.yaml``; `proactive_rl.shipped.resolve_recipe`);
- every recipe key and ``--flag`` must be a field of the trainer's dataclasses, else an `InputError` naming the file,
  the key and the closest field (``did you mean `learning_rate`?``) instead of TRL's "Unknown arguments" traceback;
- what the dataclasses reject while parsing (a bad value) becomes an `InputError` prefixed with the recipe's path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import yaml

from proactive_rl.errors import InputError, MissingInput, did_you_mean
from proactive_rl.shipped import resolve_recipe


def config_path(argv: Sequence[str]) -> str | None:
    """The ``--config`` value of `argv` (``--config X`` or ``--config=X``), else `None`."""
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--config="):
            return arg.split("=", 1)[1]
    return None


def resolve_config(argv: Sequence[str]) -> list[str]:
    """`argv` with its ``--config`` resolved to a file (a local one, else the shipped recipe of that name)."""
    argv = list(argv)
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            argv[i + 1] = resolve_recipe(argv[i + 1])
        elif arg.startswith("--config="):
            argv[i] = "--config=" + resolve_recipe(arg.split("=", 1)[1])
    return argv


def field_names(parser) -> set[str]:
    """The fields a recipe may set: every init field of the parser's dataclasses, and TRL's ``env`` block."""
    return {f.name for cls in parser.dataclass_types for f in dataclasses.fields(cls) if f.init} | {"env"}


def check_keys(parser, argv: Sequence[str]) -> None:
    """Raise `InputError` for a recipe key or a ``--flag`` that no dataclass of `parser` has, naming the closest."""
    valid = field_names(parser)
    path = config_path(argv)
    if path is not None:
        try:
            with open(path) as f:
                recipe = yaml.safe_load(f)
        except FileNotFoundError:
            raise MissingInput(f"{path}: no such recipe file") from None
        except (OSError, yaml.YAMLError) as err:
            raise InputError(f"{path}: cannot read the recipe: {' '.join(str(err).split())}") from None
        if not isinstance(recipe, dict):
            raise InputError(f"{path}: expected a YAML mapping of fields, got {type(recipe).__name__}")
        for key in recipe:
            if key not in valid:
                raise InputError(f"{path}: unknown key `{key}`;{did_you_mean(key, valid) or _see(parser)}")
    flags = [a[2:].split("=", 1)[0] for a in argv if a.startswith("--") and len(a) > 2]
    for flag in flags:
        name = flag.replace("-", "_")
        if flag not in ("config", "help") and name not in valid and not (name.startswith("no_") and name[3:] in valid):
            hint = did_you_mean(name, valid).replace("`", "`--", 1) or _see(parser)
            raise InputError(f"command line: unknown flag `--{flag}`;{hint}")


def _see(parser) -> str:
    return f" not a field of {', '.join(cls.__name__ for cls in parser.dataclass_types)}"


def parse_recipe(parser, argv: Sequence[str]) -> tuple:
    """``parser.parse_args_and_config(argv)`` after `check_keys`; a rejected value is an `InputError` with its file."""
    check_keys(parser, argv)
    where = config_path(argv) or "command line"

    def error(message: str):  # argparse's own (usage + message, exit 2) for a value it cannot convert
        raise InputError(f"{where}: {message}")

    parser.error = error
    try:
        return parser.parse_args_and_config(list(argv))
    except InputError:
        raise
    except (ValueError, TypeError) as err:  # the dataclasses' __post_init__ checks of the recipe's values
        raise InputError(f"{where}: {err}") from err


def located(err: BaseException, path: str | None) -> BaseException:
    """`err` with ``PATH: `` in front of its message when it does not name the recipe yet (for `report`)."""
    if path is None or str(err).startswith((path, "command line:")):
        return err
    try:  # keep the type (a MissingInput stays a FileNotFoundError)
        return type(err)(f"{path}: {err}")
    except TypeError:
        return InputError(f"{path}: {err}")
