"""``proactive-rl recipes``: list the shipped recipes and launch configs, or copy one out to edit.

    proactive-rl recipes                               # every recipe with its first line (the command that runs it)
    proactive-rl recipes cp tiny/sft.yaml my_sft.yaml  # then: proactive-rl train --config my_sft.yaml
    proactive-rl recipes cp launch/single_gpu.yaml launch/single_gpu.yaml

A ``--config`` that names no file here is looked up among the shipped recipes anyway (`proactive_rl.shipped`).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from proactive_rl.errors import InputError
from proactive_rl.shipped import closest_hint, first_line, shipped_names, shipped_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", default="ls", choices=("ls", "cp"), help="ls (default) or cp")
    parser.add_argument("names", nargs="*", metavar="NAME", help="cp: the shipped recipe and where to write it")
    parser.add_argument("--force", action="store_true", help="cp: overwrite an existing file")


def _list() -> int:
    names = shipped_names()
    width = max(len(n) for n in names)
    for name in names:
        print(f"{name:<{width}}  {first_line(shipped_path(name))}")
    print()
    print("launch configs (accelerate --config_file; copy them next to the recipe to use its command as written):")
    for name in shipped_names("launch"):
        print(f"  {name}")
    print()
    print("Copy one to edit: proactive-rl recipes cp tiny/sft.yaml my_sft.yaml")
    print("Run one as shipped: proactive-rl train --config tiny/sft.yaml")
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
            raise InputError("ls takes no names (cp NAME DEST copies one)")
        return _list()
    return _copy(args.names, args.force)
