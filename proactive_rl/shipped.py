"""The recipes and launch configs that ship inside the package (``proactive_rl/recipes``, ``proactive_rl/launch``).

In the checkout they are the top-level ``recipes/`` and ``launch/`` folders (the package holds links to them); an
installed wheel carries them as package data, read with `importlib.resources`. So ``proactive-rl train --config
tiny/sft.yaml`` and the demo work from any folder: a ``--config`` that is no file here is looked up among the shipped
recipes (`resolve_recipe`). ``proactive-rl recipes`` lists them and copies one out to edit (`proactive_rl.recipes_cli`).
"""

from __future__ import annotations

import difflib
import functools
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
    """`name` when it is a file here, else the shipped recipe of that name; `UnknownRecipe` naming the closest, or an
    `InputError` listing the YAML files of a folder given instead of a file.

    Example:

    >>> resolve_recipe("tiny/sft.yaml").endswith("recipes/tiny/sft.yaml")
    True
    """
    try:
        if Path(name).is_file():
            return name
        if Path(name).is_dir():
            raise InputError(folder_message(name, Path(name)))
        path = shipped_path(name)
        if path is not None:
            return str(path)
        folder = shipped_root() / name.replace("\\", "/").strip("/").removeprefix("recipes/")
        if name.strip("/. ") and ".." not in Path(name).parts and folder.is_dir():  # a shipped group: `tiny`
            raise InputError(folder_message(name, folder))
    except OSError as err:  # a name too long for the file system
        raise InputError(f"{name[:80]}...: not a recipe file ({err.strerror})") from None
    raise UnknownRecipe(f"{name}: no such file here and no shipped recipe of that name; {closest_hint(name)}")


def folder_message(name: str, folder: Path) -> str:
    """``DIR: is a folder; give the recipe file (e.g. DIR/sft.yaml); its YAML files: ...`` for ``--config DIR``."""
    found = sorted(p.name for p in folder.glob("*.y*ml") if p.is_file())
    if not found:  # a folder of groups (recipes/): the files one level down
        found = sorted(p.relative_to(folder).as_posix() for p in folder.glob("*/*.y*ml") if p.is_file())
    example = (
        f"{name.rstrip('/')}/{next((f for f in found if f.endswith('sft.yaml')), found[0]) if found else 'sft.yaml'}"
    )
    listed = f"; YAML files there: {', '.join(found[:12])}{', ...' if len(found) > 12 else ''}" if found else ""
    return f"{name}: is a folder; give the recipe file (e.g. {example}){listed or '; it holds no YAML file'}"


class DuplicateKey(InputError):
    """A key written twice in one mapping of a recipe (YAML itself would keep the last value silently)."""


@functools.cache
def _loader():
    """`yaml.SafeLoader` that refuses a key repeated within one mapping, naming the key and both lines."""
    # deferred: keeps --help / light imports fast
    import yaml

    class Loader(yaml.SafeLoader):
        def construct_mapping(self, node, deep=False):
            if isinstance(node, yaml.MappingNode):
                seen: dict = {}
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *defaults`: overriding is its purpose
                        continue
                    key, line = self.construct_object(key_node, deep=True), key_node.start_mark.line + 1
                    try:
                        first = seen.get(key)
                    except TypeError:  # an unhashable key: the base class says so
                        continue
                    seen[key] = line
                    if first is not None:  # written before, on an earlier line or this one
                        lines = f"lines {first} and {line}" if first != line else f"line {line}"
                        raise DuplicateKey(
                            f"key `{key}` is set twice ({lines}); keep one (YAML would silently use the last)"
                        )
            return super().construct_mapping(node, deep)

    return Loader


def read_recipe(path: str):
    """The YAML of recipe file `path`; a missing, unreadable or malformed file (a key set twice included) is an
    `InputError` naming it. Every reader of a recipe's YAML goes through here (`proactive_rl.recipe_args`)."""
    # deferred: keeps --help / light imports fast
    import yaml

    if Path(path).is_dir():
        raise InputError(folder_message(path, Path(path)))
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_loader())  # noqa: S506 -- a SafeLoader subclass
    except FileNotFoundError:
        raise MissingInput(f"{path}: no such recipe file") from None
    except DuplicateKey as err:
        raise DuplicateKey(f"{path}: {err}") from None
    except (OSError, yaml.YAMLError, ValueError) as err:  # ValueError: not UTF-8 text
        raise InputError(f"{path}: cannot read the recipe: {' '.join(str(err).split())[:300]}") from None
    except RecursionError:
        raise InputError(f"{path}: cannot read the recipe: nested too deeply") from None


def closest_hint(name: str) -> str:
    """``did you mean `tiny/sft.yaml`? (proactive-rl recipes lists them)`` for a name that is not shipped."""
    names = shipped_names() + shipped_names("launch")
    close = difflib.get_close_matches(name.replace("recipes/", "", 1), names, n=1, cutoff=0.7)
    return (f"did you mean `{close[0]}`? " if close else "") + "(proactive-rl recipes lists them)"


def first_line(path: Path) -> str:
    """The recipe's first line without its ``#``: the command that runs it."""
    with open(path) as f:
        return f.readline().lstrip("#").strip()
