"""Reading the OVO-Bench and StreamingBench files safely, and telling the two benchmarks' files apart.

Every annotation and results file of ``proactive-eval score|run --benchmark`` is read by `read_json`: a missing
file, a folder, an unreadable or truncated file, JSON nested deeper than `MAX_DEPTH` (the official files are 4
deep) or a number too large to parse is an `InputError` naming the file, never a traceback. `other_benchmark`
names the benchmark a file looks like, so a file given to the wrong ``--benchmark`` is said to be one.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from proactive_eval import records
from proactive_eval.errors import InputError

MAX_DEPTH = records.MAX_DEPTH
#: the longest time a benchmark file may name (a time stamp, a probe's ``realtime``): 24 h, in seconds
MAX_SECONDS = 24 * 3600
MAX_PATH = 4096  # longer ``video`` names are not paths (PATH_MAX on Linux)
OVO_CATEGORIES = ("backward", "realtime", "forward")


def shown(value: Any, limit: int = 200) -> str:
    """`value` as text, cut to `limit` characters (an error message stays one readable line)."""
    text = str(value)
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} characters)"


def _check_tree(data: Any) -> str | None:
    """What is wrong with parsed JSON `data` (too deep; a string that is not Unicode text), walked without
    recursion; None when nothing is."""
    stack = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate escape ("\\ud800"): cannot be written or printed
                return f"holds a string that is not valid Unicode: {shown(ascii(value), 60)}"
        elif isinstance(value, (list, dict)):
            if depth > MAX_DEPTH:
                return f"JSON nested too deeply (over {MAX_DEPTH} levels)"
            items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
    return None


def read_json(path: str | Path, what: str) -> Any:
    """The parsed JSON of `path` (`what`: "--annotations", "--predictions", ...), or an `InputError` naming it.

    Raises:
        `InputError`: the file is missing, a folder, unreadable, not UTF-8, not JSON, nested deeper than
            `MAX_DEPTH`, or holds a string that is not Unicode text (a lone surrogate escape).
    """
    name = shown(path)
    try:
        folder = Path(path).is_dir()
    except (OSError, ValueError):
        folder = False
    if folder:
        raise InputError(f"{what}: {name} is a folder; name the JSON file in it")
    if not records.is_file(path):
        raise InputError(f"{what}: file not found: {name}")
    data = records.read_json(path, what)  # the one JSON reading path: size, depth, NaN, truncation
    problem = _check_tree(data)
    if problem:
        raise InputError(f"{what}: {name}: {problem}")
    return data


def other_benchmark(data: Any) -> str | None:
    """The benchmark (and kind of file) `data` looks like, for an error message; None when it looks like neither.

    OVO-Bench annotations are a list of records with ``task``; its results an object of ``backward`` /
    ``realtime`` / ``forward`` lists; a StreamingBench file (questions or results) a list of entries with
    ``questions``.
    """
    if isinstance(data, dict) and any(k in data for k in OVO_CATEGORIES):
        return "an OVO-Bench results file"
    first = next((x for x in data if isinstance(x, dict)), None) if isinstance(data, list) else None
    if first is None:
        return None
    if "questions" in first and "task" not in first:
        return "a StreamingBench file"
    if "task" in first and "questions" not in first:
        return "an OVO-Bench annotation file"
    return None


def seconds(value: Any) -> bool:
    """Whether `value` is a time a benchmark file may name: a finite number (not a bool) in [0, `MAX_SECONDS`]."""
    return (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and 0 <= value <= MAX_SECONDS
    )


def is_id(value: Any) -> bool:
    """Whether `value` can be an OVO-Bench id: an integer (not a bool) or a string, of at most 200 characters."""
    if isinstance(value, str):
        return len(value) <= 200
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**200


def path_text(value: Any) -> bool:
    """Whether `value` can name a video: a non-empty string of at most `MAX_PATH` characters without a NUL."""
    return isinstance(value, str) and 0 < len(value) <= MAX_PATH and "\0" not in value
