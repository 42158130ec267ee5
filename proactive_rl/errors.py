"""Errors about the user's input, and how the commands report them: one line, exit status 2, no traceback.

`InputError` is raised for what the user wrote or pointed at (a recipe's keys and values, a data file, a model
path); its message names the file, the key or record, and the fix or the closest valid name (`did_you_mean`). The
episode readers' `EpisodeError` and `VideoError` (`proactive_eval`) are input errors too. ``proactive-rl`` and every
trainer entry point print such an error as one line and exit with status 2 (`report`); ``PROACTIVE_RL_DEBUG=1`` (or
``proactive-rl --debug ...``) shows the traceback instead.
"""

from __future__ import annotations

import difflib
import os
import sys
from collections.abc import Iterable

from proactive_eval.records import EpisodeError
from proactive_eval.video import VideoError

DEBUG_ENV = "PROACTIVE_RL_DEBUG"


class InputError(ValueError):
    """The user's input is wrong (recipe key or value, data file, model path); the message says where and the fix."""


class MissingInput(InputError, FileNotFoundError):
    """A file or folder the input names does not exist."""


class NotAFolder(InputError, NotADirectoryError):
    """The input names a file where a folder is expected."""


def input_errors() -> tuple[type[Exception], ...]:
    """The exception types reported in one line: `InputError` and the episode readers' record and video errors."""
    return InputError, EpisodeError, VideoError


def did_you_mean(name: str, valid: Iterable[str], cutoff: float = 0.6) -> str:
    """`` did you mean `learning_rate`?`` for the closest valid name, or ``""``.

    Example:

    >>> did_you_mean("learnin_rate", ["learning_rate", "max_steps"])
    ' did you mean `learning_rate`?'
    """
    close = difflib.get_close_matches(str(name), list(valid), n=1, cutoff=cutoff)
    return f" did you mean `{close[0]}`?" if close else ""


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
