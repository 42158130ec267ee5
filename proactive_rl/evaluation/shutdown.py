"""The end of a process started by ``accelerate launch``: every rank reaches the end, the process group is closed,
and the process exits with its code -- without the interpreter's teardown.

Why not a normal exit: torch's ``DistributedDataParallel`` (torch 2.14.1) keeps Python references to its gloo
process group that ``del model; gc.collect()`` does not release (10 of them, measured), and under ZeRO-3 DeepSpeed
(0.19.8) keeps a second gloo group of its own; so after ``destroy_process_group`` each such group's C++ threads (two
``pt_gloo_runloop`` workers and a ``gloo_tcp_loop``) are still running when Python finalizes: measured at exit, one
live group in a DDP run, two under ZeRO-3, none in ``proactive-rl eval`` (its group is freed by
``destroy_process_group``). Such a group is then torn down with the interpreter (module globals and reference
cycles are cleared there), and now and then a rank aborted there with ``terminate called without an active
exception`` (SIGABRT) after all its outputs were written, so a complete run exited non-zero. The references are
held inside those libraries, out of this project's reach, so the run ends before the teardown instead: what a
normal exit does first is done here (the ``atexit`` handlers, where trackers such as wandb finish and ``logging``
flushes its handlers; then stdout and stderr are flushed), and the process leaves with ``os._exit``.
"""

from __future__ import annotations

import sys
from atexit import _run_exitfuncs  # CPython's own: runs (and clears) the registered exit handlers
from os import _exit  # documented: leave the process at once, without the interpreter's teardown


def end_process_group() -> None:
    """Under `accelerate launch`, let every rank reach the end, then close the process group (call after success
    only: a rank that raised never reaches the barrier). A rank exiting with a live gloo/NCCL group while another
    is still in a collective aborts ("terminate called without an active exception")."""
    # deferred: keeps torch/transformers out of light import paths
    from accelerate import PartialState

    state = PartialState()
    if state.use_distributed:
        state.wait_for_everyone()
        state.destroy_process_group()


def exit_launched(code: int = 0) -> int:
    """The last call of a successful entry point: returns `code` in a plain process; under a distributed launch it
    ends the process group (`end_process_group`), runs the ``atexit`` handlers, flushes stdout and stderr and exits
    the process with `code` (module docstring) -- it does not return there.

    A script of your own that trains under ``accelerate launch`` ends the same way: ``sys.exit(exit_launched(0))``.
    """
    # deferred: keeps torch/transformers out of light import paths
    from accelerate import PartialState

    if not PartialState().use_distributed:
        return code
    end_process_group()
    _run_exitfuncs()  # what the interpreter would run first at exit (logging.shutdown, trackers)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more can reach it
            pass
    _exit(code)
