"""Shared by every benchmark: append a result, with its command, commit, machine and date, to results.jsonl.

Benchmarks measure ratios within one run (these machines are noisy); a result line states the ratio and the absolute
numbers it came from. One JSON object per line: ``benchmark`` (the section), ``result`` (the line), ``values`` (the
key numbers, where the script names them), ``command``, ``commit``, ``machine``, ``date``. ``python -m
benchmarks.results`` writes RESULTS.md, the latest record of each benchmark, from it (``make bench`` does).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import shlex
import subprocess
import sys
from pathlib import Path

RESULTS = Path(__file__).with_name("results.jsonl")
ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    """A one-line machine description: CPU count, platform, Python, torch (if present)."""
    parts = [f"{os.cpu_count()} CPUs", platform.machine(), f"Python {platform.python_version()}"]
    try:
        import torch

        parts.append(f"torch {torch.__version__}")
        if torch.cuda.is_available():
            parts.append(torch.cuda.get_device_name(0))
    except ImportError:
        pass
    return ", ".join(parts)


def commit() -> str:
    """The checkout's short commit hash, ``+dirty`` when tracked files differ from it; ``unknown`` outside git."""
    try:
        git = ["git", "-C", str(ROOT)]
        head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True)
        dirty = subprocess.run([*git, "diff", "--quiet", "HEAD"], capture_output=True).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty else "")


def command_line() -> str:
    """How this process was started, as a user would type it (``python -m benchmarks.<name> ...``)."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    head = ["python", "-m", spec.name] if spec is not None else ["python", sys.argv[0]]
    return " ".join(shlex.quote(a) for a in [*head, *sys.argv[1:]])


def record(section: str, line: str, command: str | None = None, dry: bool = False, values: dict | None = None) -> dict:
    """Print `line` and append it as one JSON record of benchmark `section` to results.jsonl.

    Args:
        section (`str`): the benchmark's name: RESULTS.md shows the latest record of each.
        line (`str`): the result, with the ratio and the absolute numbers it came from.
        command (`str`, *optional*): the command that measured it; defaults to this process's.
        dry (`bool`, *optional*, defaults to `False`): print under the section and write nothing (``--no-record``).
        values (`dict`, *optional*): the key numbers by name, for a reader of the file.

    Returns:
        `dict`: the record.
    """
    entry = {
        "benchmark": section,
        "result": line,
        "values": values or {},
        "command": command or command_line(),
        "commit": commit(),
        "machine": machine(),
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }
    if dry:
        print(f"[{section}] {line}")
        return entry
    print(line)
    with RESULTS.open("a") as f:
        f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return entry
