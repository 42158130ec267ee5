"""The mode of the result files the atomic writers create: the one ``open()`` would give (``0o666`` less the umask).

``tempfile.mkstemp`` creates its file ``0o600`` whatever the umask, so a results file written through a temporary
file and a rename was unreadable by the rest of a group on a shared cluster, even under umask 022. The writers
(`proactive_eval.predictions.atomic_write_text`, `proactive_eval.commands.report.save_figure`) give their temporary file
`default_file_mode` before renaming it.
"""

from __future__ import annotations

import os
import threading

_PROC_STATUS = "/proc/self/status"  # Linux >= 4.7 reports the umask there: read without changing it
_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask, read without a window in which it is looser than it is."""
    try:
        with open(_PROC_STATUS, encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    with _UMASK_LOCK:  # two probes at once would read each other's 0o077
        # os.umask only reads by setting: 0o077 meanwhile makes a file another thread creates private, never open
        mask = os.umask(0o077)
        os.umask(mask)
    return mask


def default_file_mode() -> int:
    """``0o666 & ~umask``: ``0o644`` under umask 022, ``0o600`` under umask 077."""
    return 0o666 & ~current_umask()
