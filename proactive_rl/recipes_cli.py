"""``proactive-rl recipes``: list the shipped recipes and launch configs, copy one out to edit, or print its path.

    proactive-rl recipes                               # every recipe with the command that runs it, from any folder
    proactive-rl recipes cp tiny/sft.yaml my_sft.yaml  # then: proactive-rl train --config my_sft.yaml
    proactive-rl recipes path launch/zero3.yaml        # the installed file, for accelerate launch --config_file

A ``--config`` that names no file here is looked up among the shipped recipes anyway (`proactive_rl.shipped`), but
``accelerate launch --config_file`` reads its file itself: the listing writes it as
``--config_file $(proactive-rl recipes path launch/zero3.yaml)``, which works from any folder (`launch_line`).
"""

from __future__ import annotations

import argparse
import re
import shutil
from pathlib import Path

from proactive_rl.errors import InputError
from proactive_rl.shipped import closest_hint, first_line, shipped_names, shipped_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action", nargs="?", default="ls", choices=("ls", "cp", "path"), help="ls (default), cp or path"
    )
    parser.add_argument(
        "names", nargs="*", metavar="NAME", help="cp: the shipped recipe and where to write it; path: a shipped file"
    )
    parser.add_argument("--force", action="store_true", help="cp: overwrite an existing file")


# The trainer modules a recipe's first line may launch; `proactive-rl train` dispatches on the recipe's `trainer`.
_TRAINER_MODULES = r"proactive_rl\.(?:sft|grpo\.streaming|grpo\.suggestion)(?:\.main)?"


def launch_line(line: str) -> str:
    """A recipe's first line as it runs from any folder, in the spelling of docs/training.md: a trainer module
    launched as ``-m proactive_rl.cli train`` (``proactive-rl train`` without accelerate), the recipe by its shipped
    name, a launch config by its installed path (``$(proactive-rl recipes path launch/X.yaml)``).

    Example:

    >>> launch_line("accelerate launch --config_file launch/zero3.yaml -m proactive_rl.grpo.streaming --config "
    ...             "recipes/tiny/x.yaml").split(" -m ")[1]
    'proactive_rl.cli train --config tiny/x.yaml'
    >>> launch_line("accelerate launch --config_file launch/zero3.yaml -m proactive_rl.cli train").split(" -m ")[0]
    'accelerate launch --config_file $(proactive-rl recipes path launch/zero3.yaml)'
    >>> launch_line("python -m proactive_rl.grpo.suggestion --config recipes/tiny/grpo_suggestion.yaml")
    'proactive-rl train --config tiny/grpo_suggestion.yaml'
    """
    line = re.sub(rf"^python -m (?:{_TRAINER_MODULES}|proactive_rl\.cli train)\b", "proactive-rl train", line)
    line = re.sub(rf"-m {_TRAINER_MODULES}(?=\s)", "-m proactive_rl.cli train", line)
    line = re.sub(r"(--config_file) (launch/\S+)", r"\1 $(proactive-rl recipes path \2)", line)
    return re.sub(r"(--config) recipes/(\S+)", r"\1 \2", line)


def _list() -> int:
    names = shipped_names()
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {launch_line(first_line(shipped_path(name)))}")
    print()
    print(
        "launch configs (accelerate launch --config_file $(proactive-rl recipes path launch/NAME), from any folder):"
    )
    for name in shipped_names("launch"):
        print(f"  {name}")
    print()
    print("Copy one to edit: proactive-rl recipes cp tiny/sft.yaml my_sft.yaml")
    print("Run one as shipped: proactive-rl train --config tiny/sft.yaml")
    return 0


def _path(names: list[str]) -> int:
    if len(names) != 1:
        raise InputError("path: expected one NAME, e.g. path launch/zero3.yaml")
    source = shipped_path(names[0])
    if source is None:
        raise InputError(
            f"path: {names[0]}: no shipped recipe or launch config of that name; {closest_hint(names[0])}"
        )
    print(source.resolve())
    return 0


def run_command(source: Path, dest: Path) -> str:
    """How to run the copied recipe: ``proactive-rl eval`` for an evaluation recipe, else ``proactive-rl train``."""
    if " eval " in f" {first_line(source)} ":
        return f"proactive-rl eval --config {dest} --model CHECKPOINT"
    return f"proactive-rl train --config {dest}"


def _copy(names: list[str], force: bool) -> int:
    if len(names) not in (1, 2):
        raise InputError("cp: expected NAME [DEST], e.g. cp tiny/sft.yaml my_sft.yaml")
    source = shipped_path(names[0])
    if source is None:
        raise InputError(f"cp: {names[0]}: no shipped recipe of that name; {closest_hint(names[0])}")
    dest = Path(names[1] if len(names) == 2 else source.name)
    if dest.is_dir():
        dest = dest / source.name
    if dest.exists() and not force:
        raise InputError(f"cp: {dest} exists; pass --force to overwrite it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    if source.parent.name == "launch":
        print(f"{dest}: copied from {names[0]}; pass it to accelerate launch --config_file {dest}")
    else:
        print(f"{dest}: copied from {names[0]}; run it with: {run_command(source, dest)}")
    return 0


def run(args: argparse.Namespace) -> int:
    if args.action == "ls":
        if args.names:
            raise InputError("ls takes no names (cp NAME DEST copies one, path NAME prints where one is)")
        return _list()
    if args.action == "path":
        return _path(args.names)
    return _copy(args.names, args.force)
