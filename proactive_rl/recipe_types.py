"""The types of a recipe's values, checked before TRL's parser reads them (`proactive_rl.recipe_args.parse_recipe`).

TRL's ``TrlParser`` hands a YAML value to its dataclass field unconverted: ``model_name_or_path: 7`` or
``lora_target_modules: {a: 1}`` would pass the parser and fail minutes later, far from the recipe, in a traceback.
`check_types` compares each value with its field's annotation and ``choices`` and raises an `InputError` naming the
recipe, the field, what it takes and what it got.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing

from proactive_rl.errors import InputError


def check_types(parser, recipe: dict, path: str | None) -> None:
    """A recipe value of the wrong type for its field (a mapping or a number where a string is expected, a list where
    a number is, ``null`` for a field that needs a value) is an `InputError` naming the field; TRL's parser passes the
    YAML's values through unconverted, so the run would fail much later, far from the recipe. A string for a number or
    a boolean is left to the parser, which converts it (``1e-5``) or rejects it in its own words."""
    fields = {}
    for cls in parser.dataclass_types:
        try:
            hints = typing.get_type_hints(cls)
        except Exception:  # an annotation this Python cannot resolve: its fields are not checked
            hints = {}
        for f in dataclasses.fields(cls):
            if f.init and f.name not in fields:
                fields[f.name] = (hints.get(f.name, typing.Any), f.default, f.metadata.get("choices"))
    for key, value in recipe.items():
        if key not in fields:
            continue
        hint, default, choices = fields[key]
        if value is None and (key in NEEDS_VALUE or (default is not None and not _accepts(hint, None))):
            raise InputError(
                f"{path}: {key}: needs a value ({_describe(hint)}), got null; remove the line for the default"
            )
        if value is not None and not _accepts(hint, value):
            shown = repr(value) if len(repr(value)) <= 60 else f"{type(value).__name__} {repr(value)[:40]}..."
            raise InputError(f"{path}: {key}: expected {_describe(hint)}, got {shown}")
        if isinstance(value, str) and choices is not None and value not in choices:  # argparse checks flags only
            shown = value if len(value) <= 60 else f"{value[:40]}..."
            raise InputError(f"{path}: {key}: expected one of {', '.join(map(str, choices))}, got {shown!r}")
        if isinstance(value, str) and key.endswith(PATH_SUFFIXES) and max(map(len, value.split("/"))) > 255:
            raise InputError(f"{path}: {key}: not a usable path: a name in it is longer than 255 characters")


# Fields that default to null but that a run needs (the model to train).
NEEDS_VALUE = ("model_name_or_path",)
# Fields holding a path: a name longer than the file system allows is refused before anything opens it.
PATH_SUFFIXES = ("_path", "_dir", "_file", "resume_from_checkpoint")


def _accepts(hint, value) -> bool:
    """Whether a YAML value can stand for a field annotated `hint` (before the parser converts strings)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is typing.Any or hint is object:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_accepts(arg, value) for arg in args)
    if origin is typing.Literal:
        return value in args
    if hint is type(None):
        return value is None
    if value is None:
        return False
    if isinstance(value, str):  # the parser converts (or rejects) a string for any scalar or list field
        return origin is not dict and hint is not dict
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return False  # a number, a boolean, a list or a mapping where a string is expected
    if origin is list or hint is list:
        item = args[0] if args else typing.Any
        return isinstance(value, list) and all(_accepts(item, v) for v in value)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return False  # YAML gives a string for an enum, handled above
    return True  # another class (a config object): its own checks


def _describe(hint) -> str:
    """``an integer``, ``a string or null``, ...: what a field annotated `hint` takes, in words."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_describe(arg) for arg in typing.get_args(hint)))
    if typing.get_origin(hint) is typing.Literal:
        return " or ".join(repr(a) for a in typing.get_args(hint))
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", type(None): "null"}
    if hint in names:
        return names[hint]
    if typing.get_origin(hint) is list or hint is list:
        return "a list"
    if typing.get_origin(hint) is dict or hint is dict:
        return "a mapping"
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return "a string"
    return getattr(hint, "__name__", str(hint))
