"""``python tests/rl/interrupted_eval.py eval ...``: the ``proactive-rl`` command, with a log of what it plays and
a kill switch, for the resume tests (`tests/rl/test_eval_resume.py`). Runs under ``accelerate launch`` too.

Environment:
    PLAYED_LOG: a file every rank appends ``<rank> <mcqa|oeg> <item id>`` to as it starts an item.
    KILL_AT: ``<mcqa|oeg>:<k>``: rank ``KILL_RANK`` (default 0) SIGKILLs itself as it is about to start its k-th
        item of that kind, so exactly k - 1 are finished (and stored) when it dies.
    PID_DIR: every rank writes its process id to ``<PID_DIR>/rank<r>.pid`` (for a test to kill it from outside).
"""

from __future__ import annotations

import os
import signal
import sys

import proactive_eval.benchmarks.proactivebench.environments as environments
import proactive_eval.benchmarks.proactivebench.oeg as oeg
import proactive_rl.evaluation.proactivebench as proactivebench
from proactive_rl.cli import main


def _rank() -> int:
    return int(os.environ.get("RANK", "0"))


def _hook(module, name: str, kind: str) -> None:
    """Wrap ``module.name(env, ...)`` (the call that starts one item of `kind`), wherever the evaluator reads it."""
    real, started = getattr(module, name), [0]
    kill_kind, _, kill_k = os.environ.get("KILL_AT", ":").partition(":")
    kill_here = kill_kind == kind and _rank() == int(os.environ.get("KILL_RANK", "0"))

    def hooked(env, *args, **kwargs):
        started[0] += 1
        if kill_here and started[0] == int(kill_k):
            os.kill(os.getpid(), signal.SIGKILL)
        if os.environ.get("PLAYED_LOG"):
            with open(os.environ["PLAYED_LOG"], "a") as log:
                log.write(f"{_rank()} {kind} {env.id}\n")
        return real(env, *args, **kwargs)

    for where in (module, proactivebench):
        if hasattr(where, name):
            setattr(where, name, hooked)


if __name__ == "__main__":  # hooks only when run (pytest's doctest collection imports this file too)
    _hook(environments, "run_environment", "mcqa")  # one call per MCQA environment played
    _hook(oeg, "oeg_valid_answers", "oeg")  # the first call of each OEG environment's answer
    if os.environ.get("PID_DIR"):
        with open(os.path.join(os.environ["PID_DIR"], f"rank{_rank()}.pid"), "w") as f:
            f.write(str(os.getpid()))
    sys.exit(main(sys.argv[1:]))
