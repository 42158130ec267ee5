"""The recipes and launch configs that ship inside the package (``proactive_rl/recipes``, ``proactive_rl/launch``).

In the checkout they are the top-level ``recipes/`` and ``launch/`` folders (the package holds links to them); an
installed wheel carries them as package data, read with `importlib.resources`. So ``proactive-rl train --config
tiny/sft.yaml`` and the demo work from any folder: a ``--config`` that is no file here is looked up among the shipped
recipes (`resolve_recipe`). ``proactive-rl recipes`` lists them and copies one out to edit (`proactive_rl.recipes_cli`).
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path

from proactive_rl.errors import InputError, MissingInput

KINDS = ("recipes", "launch")


class UnknownRecipe(MissingInput):
    """A ``--config`` that is neither a file here nor a shipped recipe; the message names the closest ones."""


def shipped_root(kind: str = "recipes") -> Path:
    """The folder of the shipped recipes (or launch configs, ``kind="launch"``) as a file-system path."""
    return Path(str(resources.files("proactive_rl") / kind))


def shipped_names(kind: str = "recipes") -> list[str]:
    """Every shipped recipe as ``group/name.yaml`` (launch configs: ``launch/name``), sorted."""
    root = shipped_root(kind)
    if kind == "launch":
        return sorted(f"launch/{p.name}" for p in root.iterdir() if p.is_file())
    return sorted(p.relative_to(root).as_posix() for p in root.glob("*/*.yaml"))


def shipped_path(name: str) -> Path | None:
    """The shipped file ``name`` (``tiny/sft.yaml``, ``recipes/tiny/sft.yaml`` or ``launch/zero3.yaml``), else `None`."""
    name = name.replace("\\", "/").lstrip("./")
    kind = "launch" if name.startswith("launch/") else "recipes"
    relative = name.split("/", 1)[1] if name.startswith(f"{kind}/") else name
    path = shipped_root(kind) / relative
    return path if relative and ".." not in relative.split("/") and path.is_file() else None


def resolve_recipe(name: str) -> str:
    """`name` when it is a file here, else the shipped recipe of that name; `UnknownRecipe` naming the closest.

    Example:

    >>> resolve_recipe("tiny/sft.yaml").endswith("recipes/tiny/sft.yaml")
    True
    """
    if Path(name).is_file():
        return name
    path = shipped_path(name)
    if path is not None:
        return str(path)
    raise UnknownRecipe(f"{name}: no such file here and no shipped recipe of that name; {closest_hint(name)}")


def read_recipe(path: str):
    """The YAML of recipe file `path`; a missing or unreadable file is an `InputError` naming it."""
    # deferred: keeps --help / light imports fast
    import yaml

    try:
        with open(path) as f:
            return yaml.safe_load(f)
    except FileNotFoundError:
        raise MissingInput(f"{path}: no such recipe file") from None
    except (OSError, yaml.YAMLError) as err:
        raise InputError(f"{path}: cannot read the recipe: {' '.join(str(err).split())}") from None


def closest_hint(name: str) -> str:
    """``did you mean `tiny/sft.yaml`? (proactive-rl recipes lists them)`` for a name that is not shipped."""
    names = shipped_names() + shipped_names("launch")
    close = difflib.get_close_matches(name.replace("recipes/", "", 1), names, n=1, cutoff=0.7)
    return (f"did you mean `{close[0]}`? " if close else "") + "(proactive-rl recipes lists them)"


def first_line(path: Path) -> str:
    """The recipe's first line without its ``#``: the command that runs it."""
    with open(path) as f:
        return f.readline().lstrip("#").strip()
