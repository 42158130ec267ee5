"""Shared by every benchmark: append a result line, with its command, machine and date, to RESULTS.md.

Benchmarks measure ratios within one run (these machines are noisy); a result line states the ratio
and the absolute numbers it came from.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shlex
import sys
from pathlib import Path

RESULTS = Path(__file__).with_name("RESULTS.md")


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


def record(section: str, line: str, command: str | None = None, dry: bool = False) -> None:
    """Print `line` and append it under `section` in RESULTS.md with the command, machine and date.

    With ``dry=True`` (a benchmark's ``--no-record``) the line is printed under its section and nothing is written.
    """
    if dry:
        print(f"[{section}] {line}")
        return
    command = command or "python " + " ".join(shlex.quote(a) for a in sys.argv)
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    print(line)
    with RESULTS.open("a") as f:
        f.write(f"\n### {section}\n- {line}\n- command: `{command}`\n- machine: {machine()}; {stamp}\n")
