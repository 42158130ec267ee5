"""Reading and validating JSON / JSONL records, shared by every loader in the package (docs/spec.md §1).

Every loader (episodes, the converters, ProactiveBench records and environments, predictions) reads its file
with these helpers, so a bad record is reported the same way everywhere: an `EpisodeError` naming the file,
the record id and the field. ``on_error="skip"`` drops bad records instead and keeps their errors.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from proactive_eval.errors import InputError

logger = logging.getLogger(__name__)

#: ``fail(field, message) -> EpisodeError`` for one record (see :func:`check_record`).
Fail = Callable[[str, str], "EpisodeError"]


class EpisodeError(InputError):
    """A record that breaks docs/spec.md §1, located by file, record id and field."""

    def __init__(self, message: str, *, file: str | None = None, record: str | None = None, field: str | None = None):
        self.file, self.record, self.field, self.reason = file, record, field, message
        where = []
        if file is not None:
            where.append(str(file))
        if record is not None:
            where.append(f"record {record!r}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(": ".join(where + [message]) if where else message)


class EpisodeList(list):
    """A list of loaded items that also remembers what was skipped (``on_error="skip"``)."""

    def __init__(self, episodes=(), skipped: list[EpisodeError] | None = None):
        super().__init__(episodes)
        self.skipped: list[EpisodeError] = skipped or []


def read_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of `path`, or an `EpisodeError` naming it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise EpisodeError(f"cannot read {what}: {err}", file=str(path)) from None


def iter_jsonl(text: str, path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` for every non-blank line of JSONL `text`; invalid JSON names file and line."""
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                yield lineno, json.loads(line)
            except json.JSONDecodeError as err:
                raise EpisodeError(f"line {lineno}: invalid JSON: {err}", file=str(path)) from None


def read_records(path: str | Path, list_keys: tuple[str, ...] = ("episodes", "data")) -> list:
    """Records of a JSONL file (by suffix) or a JSON list (or ``{key: [...]}`` for a key in `list_keys`)."""
    path = Path(path)
    text = read_text(path)
    if path.suffix == ".jsonl":
        return [record for _, record in iter_jsonl(text, path)]
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise EpisodeError(f"invalid JSON: {err}", file=str(path)) from None
    if isinstance(data, dict):
        for key in list_keys:
            if isinstance(data.get(key), list):
                return data[key]
    if not isinstance(data, list):
        raise EpisodeError(f"expected a list of records (or {{{list_keys[0]!r}: [...]}})", file=str(path))
    return data


def collect(
    records: Iterable, path: str | Path, parse: Callable[[Any, int], Any], on_error: str = "raise"
) -> EpisodeList:
    """Parse every record with ``parse(record, index)`` into items with an ``id``; ids must be unique.

    With ``on_error="skip"`` a bad record is dropped and its `EpisodeError` kept in ``.skipped`` (and logged);
    with ``"raise"`` the first one is raised. An error that names no record is given the record's position.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    out, skipped, seen, total = [], [], set(), 0
    for index, record in enumerate(records):
        total += 1
        try:
            item = parse(record, index)
            if item.id in seen:
                raise EpisodeError("duplicate id", file=str(path), record=item.id, field="id")
            seen.add(item.id)
            out.append(item)
        except EpisodeError as err:
            if err.record is None:
                err = EpisodeError(err.reason, file=str(path), record=f"#{index}", field=err.field)
            if on_error == "raise":
                raise err from None
            skipped.append(err)
    if skipped:
        reasons = "; ".join(str(e) for e in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
        logger.warning("%s: skipped %d of %d records: %s", path, len(skipped), total, reasons)
    return EpisodeList(out, skipped)


def check_record(
    record: Any, file: str | None, required: Iterable[str] = (), id_keys: tuple[str, ...] = ("id",)
) -> tuple[str | None, Fail]:
    """Check that `record` is an object holding every `required` field; return ``(record id, fail)``.

    The id is the first of `id_keys` present (as a string); when that field is required it must be a non-empty
    string or integer. ``fail(field, message)`` builds the `EpisodeError` naming `file`, the id and `field`.
    """
    if not isinstance(record, dict):
        raise EpisodeError(f"expected a JSON object, got {type(record).__name__}", file=file)
    rid = next((record[k] for k in id_keys if record.get(k) is not None), None)
    rid_str = str(rid) if rid is not None else None

    def fail(field: str, message: str) -> EpisodeError:
        return EpisodeError(message, file=file, record=rid_str, field=field)

    for name in required:
        if name not in record:
            raise fail(name, f"missing required field (present: {', '.join(sorted(record)) or 'none'})")
    if id_keys[0] in required and (isinstance(rid, bool) or not isinstance(rid, (str, int)) or rid_str == ""):
        raise fail(id_keys[0], "must be a non-empty string")
    return rid_str, fail


def number(value, fail: Callable[[str], EpisodeError]) -> float:
    """A finite float, or ``fail(message)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(f"must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise fail(f"must be finite, got {value}")
    return value


def integer(value, fail: Callable[[str], EpisodeError], low: int = 0) -> int:
    """An integer ``>= low`` (booleans are not integers), or ``fail(message)``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise fail(f"must be an integer >= {low}, got {value!r}")
    return value


def span(
    value, fail: Callable[[str], EpisodeError], allow_empty: bool = False, nonnegative: bool = True
) -> tuple[float, float]:
    """A finite ``[start, end]`` pair with ``start < end`` (``<=`` when `allow_empty`), or ``fail(message)``.

    With `nonnegative` (the default) the start must be ``>= 0`` too.
    """
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise fail(f"must be a [start, end] pair, got {value!r}")
    a, b = (number(x, fail) for x in value)
    if nonnegative and a < 0:
        raise fail(f"start {a} is negative")
    if not (a <= b if allow_empty else a < b):
        raise fail(f"must have start < end, got [{a}, {b}]")
    return a, b
