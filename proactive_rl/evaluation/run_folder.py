"""Where `proactive-rl eval --model` writes: a folder of its own for every run, never over another run's results.

- By default ``<model>/eval/<data>-<YYYYmmdd-HHMMSS>/`` for a local model folder (``eval/<data>-<stamp>/`` in the
  working directory for a hub id or a ``tiny:`` spec), ``<data>`` the recipe's file name or the first episode
  file's. The training callback's own files in ``<checkpoint>/eval/`` (``results.json``, its evaluators' folders) and
  ``<output_dir>/eval/history.jsonl`` are never written.
- A run of the same model and data that was killed there (no ``results.json``, its process gone) is resumed instead
  (`proactive_rl.evaluation.resume`: finished episodes are not played again); ``--fresh`` starts a new folder.
- ``--out DIR`` writes where it says. The same model and evaluators again continue the run there (finished items
  are reused, the rest played: a killed run, or episodes whose videos were missing); a ``DIR`` holding the
  ``results.json`` of another run (another model or other evaluators, e.g. the training callback's
  ``<checkpoint>/eval``) is refused unless ``--overwrite``, and one that a live run is writing is always refused.

The main process chooses; ``<folder>/eval_run.json`` records the model, the data and the process writing it.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import socket
from pathlib import Path

from proactive_rl.errors import InputError
from proactive_rl.evaluation.run import RESULTS_NAME

RUN_NAME = "eval_run.json"


def data_name(config: str | None, episodes: list[str] | None) -> str:
    """The data part of a run folder's name: the recipe's file name, or the first episode file's (``+N`` more).

    Example:

    >>> data_name("recipes/p3i_bench/prs.yaml", None), data_name(None, ["data/val.json", "data/test.json"])
    ('prs', 'val+1')
    """
    if episodes:
        name = Path(episodes[0]).stem + (f"+{len(episodes) - 1}" if len(episodes) > 1 else "")
    else:
        name = Path(config or "eval").stem
    return re.sub(r"[^\w.+-]+", "_", name)[:60] or "eval"


def choose_folder(
    model: str,
    out: str | None,
    name: str,
    evaluators: list[str],
    fresh: bool = False,
    overwrite: bool = False,
) -> tuple[Path, str]:
    """``(folder, what to say about it)`` for a run of `model` with `evaluators` (their names) on data `name`; an
    `InputError` for an ``--out`` that holds another run's results (without `overwrite`) or that a live run is
    writing."""
    if out is not None:
        folder = Path(out)
        busy = _writer(folder)
        if busy:
            raise InputError(
                f"--out {folder}: another proactive-rl eval is writing there ({busy}); pass another --out"
            )
        other = _other_run(folder / RESULTS_NAME, model, evaluators)
        if other and not overwrite:
            raise InputError(
                f"--out {folder}: holds the results of another run ({other}); pass another --out (or none: a new "
                "folder per run), or --overwrite to replace them"
            )
        return folder, f"this run writes to {folder}"
    base = Path(model) / "eval" if Path(model).is_dir() else Path("eval")
    if not fresh:
        for folder in sorted(base.glob(f"{name}-*"), reverse=True):  # the latest first (the names sort by time)
            if _unfinished_run_of(folder, model, name):
                return folder, f"resuming the unfinished run in {folder} (--fresh starts a new folder)"
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    folder, n = base / f"{name}-{stamp}", 2
    while folder.exists():  # two runs within a second
        folder, n = base / f"{name}-{stamp}-{n}", n + 1
    return folder, f"this run writes to {folder}"


def claim(folder: Path, model: str, name: str) -> None:
    """Record (main process) that this process writes `folder`, for `model` on data `name`."""
    folder.mkdir(parents=True, exist_ok=True)
    record = {"model": model, "data": name, "host": socket.gethostname(), "pid": os.getpid()}
    (folder / RUN_NAME).write_text(json.dumps(record) + "\n")


def _record(folder: Path) -> dict:
    try:
        record = json.loads((folder / RUN_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _writer(folder: Path) -> str | None:
    """``host pid N`` of a live process writing `folder` and not done yet, else `None` (a process on another
    host counts as live: it cannot be asked)."""
    record = _record(folder)
    if not record or (folder / RESULTS_NAME).is_file() or record.get("pid") == os.getpid():
        return None
    if record.get("host") == socket.gethostname():
        try:
            os.kill(int(record["pid"]), 0)
        except ProcessLookupError:
            return None
        except (PermissionError, KeyError, TypeError, ValueError):
            pass
    return f"{record.get('host')} pid {record.get('pid')}"


def _unfinished_run_of(folder: Path, model: str, name: str) -> bool:
    """A run folder of `model` on `name` that was stopped before its results were written, and is not running."""
    if not re.fullmatch(rf"{re.escape(name)}-\d{{8}}-\d{{6}}(-\d+)?", folder.name) or not folder.is_dir():
        return False
    record = _record(folder)
    return (
        record.get("model") == model
        and record.get("data") == name
        and _writer(folder) is None
        and not (folder / RESULTS_NAME).is_file()
    )


def _other_run(results: Path, model: str, evaluators: list[str]) -> str | None:
    """What the results at `results` are of, when they are not of `model` with `evaluators`; `None` when there are
    none, or they are of this same run (run again, it continues)."""
    if not results.is_file():
        return None
    try:
        found = json.loads(results.read_text())
    except (OSError, ValueError):
        found = None
    if not isinstance(found, dict):
        return "an unreadable results.json"
    names = sorted(found.get("evaluators") or {})
    if found.get("checkpoint") == model and names == sorted(evaluators):
        return None
    what = found.get("checkpoint") or (
        f"the training callback, step {found.get('step')}" if "trigger_dir" in found else "?"
    )
    written = f", written {found['created']}" if found.get("created") else ""
    return f"{what} with {', '.join(names) or 'no evaluator'}{written}"
