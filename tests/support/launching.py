"""`accelerate launch` from the tests: one run, its exit code as it is.

A launch is run once; a rank that aborts in the interpreter's teardown after its work is done fails the test like
any other failure (the entry points end through `proactive_rl.evaluation.shutdown.exit_launched`, and the scripts
the tests launch end the same way; ``benchmarks/clean_exit.py`` runs 100 launches back to back).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def launch(cmd: list[str], env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, env=env, **kwargs)`` with the repository root first on
    ``PYTHONPATH``: a launched script imports ``tests.support`` as the test process does."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, **kwargs)
