"""`accelerate launch` from the tests: one run, its exit code as it is.

A launch is run once; a rank that aborts in the interpreter's teardown after its work is done fails the test like
any other failure (the entry points end through `proactive_rl.evaluation.shutdown.exit_launched`, and the scripts
the tests launch end the same way; ``benchmarks/clean_exit.py`` runs 100 launches back to back).
"""

from __future__ import annotations

import subprocess


def launch(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    """``subprocess.run(cmd, capture_output=True, text=True, **kwargs)``."""
    return subprocess.run(cmd, capture_output=True, text=True, **kwargs)
