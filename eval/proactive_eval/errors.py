"""Errors about the user's input, and how every command reports them: one line, exit status 2, no traceback.

`InputError` is raised for what the user wrote or pointed at (a flag, a recipe's keys and values, an episodes file,
a video, a model path); its message names the file, the key or record, and the fix. The episode readers'
`EpisodeError` and `VideoError` are input errors too. It is the project's one such class (`proactive_rl.errors`
re-exports it). ``proactive-eval`` and ``proactive-rl`` print such an error as one line and exit with status 2
(`report`); ``PROACTIVE_RL_DEBUG=1`` shows the traceback instead.
"""

from __future__ import annotations

import os
import sys

DEBUG_ENV = "PROACTIVE_RL_DEBUG"


class InputError(ValueError):
    """The user's input is wrong (a flag, a file, a record, a key or value); the message says where and the fix."""


def debug() -> bool:
    """Whether errors show their traceback (``PROACTIVE_RL_DEBUG=1``)."""
    return os.environ.get(DEBUG_ENV, "").strip().lower() not in ("", "0", "false", "no")


def report(prog: str, err: BaseException) -> int:
    """Print `err` as one line ``PROG: error: MESSAGE`` on stderr and return 2 (re-raise it under `debug`)."""
    if debug():
        raise err
    message = " ".join(str(err).split("\n")).strip()
    print(f"{prog}: error: {message} (traceback: {DEBUG_ENV}=1)", file=sys.stderr, flush=True)
    return 2
