"""A trainer's command line: ``--config RECIPE.yaml [--field value ...]`` checked before TRL's parser reads it.

- ``--config`` names a file here or a shipped recipe (``tiny/sft.yaml``; `proactive_rl.shipped.resolve_recipe`);
- the recipe is read once (`proactive_rl.shipped.read_recipe`): a folder, a file that is not YAML or a key set twice
  is an `InputError`, as is an ``output_dir`` that is a file, before the trainer's imports;
- every recipe key and ``--flag`` must be a field of the trainer's dataclasses, else an `InputError` naming the file,
  the key and the closest field (``did you mean `learning_rate`?``) instead of TRL's "Unknown arguments" traceback,
  or the trainer that has it when a dataclass lists it in ``MOVED_FIELDS`` (a knob moved to another trainer);
  a value must have its field's type (`proactive_rl.recipe_types`);
- what the dataclasses reject while parsing (a bad value) becomes an `InputError` prefixed with the recipe's path.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from proactive_rl.errors import InputError, NotAFolder, did_you_mean
from proactive_rl.recipe_types import check_types
from proactive_rl.shipped import read_recipe, resolve_recipe


def flag_value(argv: Sequence[str], flag: str) -> str | None:
    """The value of ``flag`` in `argv`, spelt ``--flag X`` or ``--flag=X`` (the last one, as argparse reads it).

    Example:

    >>> flag_value(["--config", "a.yaml", "--config=b.yaml"], "--config"), flag_value(["--max_steps", "2"], "--config")
    ('b.yaml', None)
    """
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg.split("=", 1)[1]
    return value


def config_path(argv: Sequence[str]) -> str | None:
    """The ``--config`` value of `argv` (``--config X`` or ``--config=X``), else `None`: the one reader of it."""
    return flag_value(argv, "--config")


def resolve_config(argv: Sequence[str]) -> list[str]:
    """`argv` with its ``--config`` resolved to a file (a local one, else the shipped recipe of that name), given as
    ``--config FILE`` (the form TRL's parser reads). The file is read once here (`read_recipe`), so a recipe that is a
    folder, not YAML, or sets a key twice is an `InputError` before anything else reads it (TRL's parser would keep
    the last of two values silently)."""
    path = config_path(argv)
    if path is None:
        return list(argv)
    path = resolve_recipe(path)
    recipe = read_recipe(path)
    try:  # here, before the trainer's imports (seconds)
        check_output_dir(setting(argv, recipe if isinstance(recipe, dict) else {}, "output_dir")[0])
    except InputError as err:
        raise located(err, path, argv) from None
    rest, skip = [], False
    for i, arg in enumerate(argv):
        if skip:
            skip = False
        elif arg == "--config" and i + 1 < len(argv):
            skip = True
        elif not arg.startswith("--config="):
            rest.append(arg)
    return ["--config", path, *rest]


def check_output_dir(output_dir: str | None) -> None:
    """``output_dir`` must be a folder or a path one can be made at: a file there (or in the way of one of its
    parents) is a `NotAFolder` naming it, not the Trainer's ``FileExistsError`` after the model has loaded."""
    if not isinstance(output_dir, str):  # null: the Trainer's default; another type: `check_types` reports it
        return
    if not output_dir.strip():
        raise InputError("output_dir: empty; pass --output_dir a folder")
    path = Path(output_dir)
    try:
        blocker = next((p for p in (path, *path.parents) if p.exists() and not p.is_dir()), None)
    except OSError as err:  # a name too long for the file system
        raise InputError(f"output_dir: {output_dir[:80]!r}... cannot be a folder here ({err.strerror})") from None
    if blocker is not None:
        where = "is a file" if blocker == path else f"cannot be made: {blocker} is a file"
        raise NotAFolder(
            f"output_dir: {output_dir!r} {where}; pass --output_dir a folder (a new one, or the run's to resume it)"
        )


def field_names(parser) -> set[str]:
    """The fields a recipe may set: every init field of the parser's dataclasses, and TRL's ``env`` block."""
    return {f.name for cls in parser.dataclass_types for f in dataclasses.fields(cls) if f.init} | {"env"}


def check_keys(parser, argv: Sequence[str]) -> dict:
    """Raise `InputError` for a recipe key or a ``--flag`` that no dataclass of `parser` has, naming the closest;
    returns the recipe (``{}`` without ``--config``)."""
    valid = field_names(parser)
    path = config_path(argv)
    recipe = {}
    if path is not None:
        recipe = read_recipe(path)
        if not isinstance(recipe, dict):
            raise InputError(f"{path}: expected a YAML mapping of fields, got {type(recipe).__name__}")
        for key in recipe:
            if key not in valid:
                if moved := _moved(parser, key):
                    raise InputError(f"{path}: `{key}` {moved}")
                raise InputError(f"{path}: unknown key `{key}`;{did_you_mean(key, valid) or _see(parser)}")
    flags = [a[2:].split("=", 1)[0] for a in argv if a.startswith("--") and len(a) > 2]
    for flag in flags:
        name = flag.replace("-", "_")
        if flag not in ("config", "help") and name not in valid and not (name.startswith("no_") and name[3:] in valid):
            if moved := _moved(parser, name):
                raise InputError(f"command line: `--{flag}` {moved}")
            hint = did_you_mean(name, valid).replace("`", "`--", 1) or _see(parser)
            raise InputError(f"command line: unknown flag `--{flag}`;{hint}")
    return recipe


def _moved(parser, key: str) -> str:
    """What to do about `key` when a dataclass of `parser` lists it in its ``MOVED_FIELDS`` (``{field: trainer}``, e.g.
    `proactive_rl.grpo.streaming.config.StreamingGRPOConfig`'s: the credit study's knobs), else ``""``."""
    for cls in parser.dataclass_types:
        trainer = getattr(cls, "MOVED_FIELDS", {}).get(key)
        if trainer:
            return f"is a field of trainer `{trainer}`, not of this one: set `trainer: {trainer}` in the recipe"
    return ""


def _see(parser) -> str:
    return f" not a field of {', '.join(cls.__name__ for cls in parser.dataclass_types)}"


def parse_recipe(parser, argv: Sequence[str]) -> tuple:
    """``parser.parse_args_and_config(argv)`` after `check_keys` and `check_devices`, then `check_values`; a rejected
    value is an `InputError` naming where it was set (the recipe's path, or ``command line`` for a flag)."""
    argv = negative_values_joined(argv)
    recipe = check_keys(parser, argv)
    check_types(parser, recipe, config_path(argv))
    check_devices(argv, recipe)
    where = config_path(argv) or "command line"

    flags = {a[2:].split("=", 1)[0] for a in argv if a.startswith("--")}

    def error(message: str):  # argparse's own (usage + message, exit 2) for a value it cannot convert
        named = re.search(r"argument --([\w-]+)", message)
        raise InputError(f"{'command line' if named and named.group(1) in flags else where}: {message}")

    parser.error = error
    try:
        parsed = parser.parse_args_and_config(list(argv))
    except InputError:
        raise
    except (ValueError, TypeError) as err:  # the dataclasses' __post_init__ checks of the recipe's values
        raise InputError(f"{where}: {err}") from err
    check_values(parsed, argv)
    return parsed


def negative_values_joined(argv: Sequence[str]) -> list[str]:
    """``--flag -1e-3`` as ``--flag=-1e-3``: argparse takes ``-1e-3`` (unlike ``-1`` or ``-0.5``) for an option.

    >>> negative_values_joined(["--learning_rate", "-1e-3", "--max_steps", "-1"])
    ['--learning_rate=-1e-3', '--max_steps=-1']
    """
    out = []
    for arg in argv:
        if out and out[-1].startswith("--") and "=" not in out[-1] and _is_negative_number(arg):
            out[-1] = f"{out[-1]}={arg}"
        else:
            out.append(arg)
    return out


def _is_negative_number(text: str) -> bool:
    try:
        return text.startswith("-") and float(text) <= 0
    except ValueError:
        return False


def setting(argv: Sequence[str], recipe: dict, key: str) -> tuple[Any, str]:
    """``(value, where)`` of field `key`: a ``--key`` flag's (``where`` is ``on the command line``; a bare boolean
    flag is ``True``), else the recipe's (``in the recipe``), else ``(None, "")``."""
    flag = f"--{key}"
    value = flag_value(argv, flag)
    if value is not None and not (value.startswith("--") and flag in argv):
        return value, "on the command line"
    if flag in argv:
        return True, "on the command line"
    if key in recipe:
        return recipe[key], "in the recipe"
    return None, ""


def truthy(value: Any) -> bool:
    """A boolean field's value as the parser reads it (``true``, ``yes``, ``1``, ``True``)."""
    return value is True or str(value).strip().lower() in ("true", "yes", "y", "1", "t")


def check_devices(argv: Sequence[str], recipe: dict) -> None:
    """bf16 / fp16 and flash-attention asked for on a machine without them: one `InputError` naming each setting,
    where it was set and the override to pass (before transformers rejects bf16 in its own words, or flash-attn
    fails at model load)."""
    # deferred: keeps torch/transformers out of light import paths
    import torch
    from transformers.utils import is_torch_bf16_gpu_available

    problems = []
    bf16, where = setting(argv, recipe, "bf16")
    use_cpu = truthy(setting(argv, recipe, "use_cpu")[0])
    if truthy(bf16) and not use_cpu and not is_torch_bf16_gpu_available():
        problems.append(f"bf16: true ({where}) needs a GPU with bf16 and there is none here; pass --bf16 false")
    fp16, where = setting(argv, recipe, "fp16")
    if truthy(fp16) and not torch.cuda.is_available():
        problems.append(f"fp16: true ({where}) needs a CUDA GPU and there is none here; pass --fp16 false")
    from proactive_rl.models.loading import attn_problem

    attn, where = setting(argv, recipe, "attn_implementation")
    if attn is not None and attn_problem(attn):
        problems.append(f"attn_implementation: {attn} ({where}) {attn_problem(attn)}; pass --attn_implementation sdpa")
    if problems:
        raise InputError(f"{config_path(argv) or 'command line'}: " + "; ".join(problems))


def check_values(parsed: tuple, argv: Sequence[str]) -> None:
    """Values that TRL / transformers would only reject at the first step (or never): `InputError` naming the field,
    where it was set and the value."""
    path = config_path(argv) or "command line"
    flags = {a[2:].split("=", 1)[0].replace("-", "_") for a in argv if a.startswith("--")}
    for args in parsed:
        for key, ok, rule in VALUE_RULES:
            value = getattr(args, key, None)
            number = value is not None and not isinstance(value, bool) and isinstance(value, (int, float))
            if number and not (math.isfinite(value) and ok(value)):  # nan and inf pass no rule
                where = "command line" if key in flags else path
                raise InputError(f"{where}: {key}: must be {rule}, got {value!r}")


# (field, accepts(value), "what it must be"): training values TRL / transformers accept at parse time.
VALUE_RULES = (
    ("learning_rate", lambda v: v > 0, "> 0"),
    ("per_device_train_batch_size", lambda v: v >= 1, "an integer >= 1"),
    ("gradient_accumulation_steps", lambda v: v >= 1, "an integer >= 1"),
    ("max_steps", lambda v: v == -1 or v >= 1, "-1 (train by epochs) or an integer >= 1"),
    ("num_train_epochs", lambda v: v > 0, "> 0"),
    ("weight_decay", lambda v: v >= 0, ">= 0"),
    ("max_grad_norm", lambda v: v >= 0, ">= 0"),
    ("temperature", lambda v: v > 0, "> 0"),
    ("num_generations", lambda v: v >= 2, "an integer >= 2 (GRPO compares a group of completions)"),
    ("max_completion_length", lambda v: v >= 1, "an integer >= 1"),
    ("save_steps", lambda v: v > 0, "> 0 (steps, or a fraction of the run below 1)"),
    ("logging_steps", lambda v: v > 0, "> 0 (steps, or a fraction of the run below 1)"),
    ("lora_dropout", lambda v: 0 <= v < 1, ">= 0 and < 1"),
)


def located(err: BaseException, path: str | None, argv: Sequence[str] = ()) -> BaseException:
    """`err` with ``PATH: `` in front of its message when it does not name the recipe yet (for `report`), or
    ``command line: `` when the field it starts with (``model_name_or_path: ...``) was a flag of `argv`."""
    if path is None or str(err).startswith((path, "command line:")):
        return err
    field = re.match(r"\w+", str(err))
    if field and flag_value(argv, f"--{field.group(0)}") is not None:
        path = "command line"
    try:  # keep the type (a MissingInput stays a FileNotFoundError)
        return type(err)(f"{path}: {err}")
    except TypeError:
        return InputError(f"{path}: {err}")
