"""Errors about the user's input, and how the commands report them: one line, exit status 2, no traceback.

`InputError` is raised for what the user wrote or pointed at (a recipe's keys and values, a data file, a model
path); its message names the file, the key or record, and the fix or the closest valid name (`did_you_mean`). It
is `proactive_eval.errors.InputError` itself (one class for the project), which the episode readers' `EpisodeError`
and `VideoError` subclass, so one ``except`` catches every input error of both packages. ``proactive-rl``, ``proactive-eval`` and every trainer entry
point print such an error as one line and exit with status 2 (`report`); ``PROACTIVE_RL_DEBUG=1`` (or
``proactive-rl --debug ...``) shows the traceback instead.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from proactive_eval.errors import DEBUG_ENV, InputError, debug, report

__all__ = ["DEBUG_ENV", "InputError", "MissingInput", "NotAFolder", "debug", "did_you_mean", "input_errors", "report"]


class MissingInput(InputError, FileNotFoundError):
    """A file or folder the input names does not exist."""


class NotAFolder(InputError, NotADirectoryError):
    """The input names a file where a folder is expected."""


def input_errors() -> tuple[type[Exception], ...]:
    """The exception types reported in one line: `InputError` (with its subclasses, the episode readers'
    `EpisodeError` and `VideoError`)."""
    return (InputError,)


def did_you_mean(name: str, valid: Iterable[str], cutoff: float = 0.6) -> str:
    """`` did you mean `learning_rate`?`` for the closest valid name, or ``""``.

    Example:

    >>> did_you_mean("learnin_rate", ["learning_rate", "max_steps"])
    ' did you mean `learning_rate`?'
    """
    close = difflib.get_close_matches(str(name), list(valid), n=1, cutoff=cutoff)
    return f" did you mean `{close[0]}`?" if close else ""
