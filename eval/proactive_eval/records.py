"""Reading and validating JSON / JSONL records, shared by every loader in the package (docs/spec.md §1).

Every loader (episodes, the converters, ProactiveBench records and environments, predictions) reads its file
with these helpers, so a bad record is reported the same way everywhere: an `EpisodeError` naming the file,
the record id and the field. ``on_error="skip"`` drops bad records instead and keeps their errors.

The one JSON reading path (`read_json`, `read_records`, `iter_jsonl`) trusts nothing in a file: a file over
`MAX_FILE_BYTES` is refused before it is read, nesting deeper than `MAX_DEPTH` is refused (the parser would
overflow its stack on deeper input, and the code that copies or writes records would on deep input that parsed),
and invalid or truncated JSON is an `EpisodeError` naming the file and the line. ``NaN`` / ``Infinity`` literals,
which Python's parser accepts but JSON does not, are refused by `read_json`; the record readers keep them for
`check_record`, which refuses a non-finite number anywhere in a record naming its field (so ``on_error="skip"``
drops that record alone). Values shown in errors are cut short (`shown`), so an error about a megabyte string is
still one short line.
"""

from __future__ import annotations

import json
import logging
import math
import re
import reprlib
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from proactive_eval.errors import InputError

logger = logging.getLogger(__name__)

#: Larger files are refused unread: the largest public annotation files are tens of MB, so this is a wrong path.
MAX_FILE_BYTES = 1 << 30
#: Deeper JSON is refused: no record of docs/spec.md §1 nests past a few levels.
MAX_DEPTH = 64
#: Longer paths (a video, an image template) or path components are refused: joined to their folder they would pass
#: the file systems' limits (PATH_MAX 4096, NAME_MAX 255), where looking one up raises instead of saying it is missing.
MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255

_SHOWN = reprlib.Repr()
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 60
_SHOWN.maxlevel, _SHOWN.maxlist, _SHOWN.maxdict = 2, 4, 4
# a JSON string, or a non-finite constant outside strings (to find the line of one in a whole document)
_CONSTANT = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)')


def shown(value: Any) -> str:
    """`repr(value)`, cut to about 60 characters (an error about a huge or deep value stays one short line).

    >>> shown("x" * 1000) == repr("x" * 27 + "..." + "x" * 28)
    True
    """
    return _SHOWN.repr(value)


def _shown_path(path: str) -> str:
    return path if len(path) <= 200 else path[:100] + "..." + path[-97:]


#: ``fail(field, message) -> EpisodeError`` for one record (see :func:`check_record`).
Fail = Callable[[str, str], "EpisodeError"]


class EpisodeError(InputError):
    """A record that breaks docs/spec.md §1, located by file, record id and field."""

    def __init__(self, message: str, *, file: str | None = None, record: str | None = None, field: str | None = None):
        self.file, self.record, self.field, self.reason = file, record, field, message
        where = []
        if file is not None:
            where.append(_shown_path(str(file)))
        if record is not None:
            where.append(f"record {shown(record)}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(": ".join(where + [message]) if where else message)


class EpisodeList(list):
    """A list of loaded items that also remembers what was skipped (``on_error="skip"``)."""

    def __init__(self, episodes=(), skipped: list[EpisodeError] | None = None):
        super().__init__(episodes)
        self.skipped: list[EpisodeError] = skipped or []


def read_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of `path`, or an `EpisodeError` naming it (unreadable, not UTF-8, over `MAX_FILE_BYTES`)."""
    try:
        size = Path(path).stat().st_size
        text = Path(path).read_text(encoding="utf-8") if size <= MAX_FILE_BYTES else None
    except OSError as err:  # the message without the path, which may be huge
        reason = err.strerror or type(err).__name__
        raise EpisodeError(f"cannot read {what}: {reason}", file=str(path)) from None
    except UnicodeDecodeError as err:
        raise EpisodeError(f"cannot read {what}: not UTF-8 text (byte {err.start})", file=str(path)) from None
    except ValueError as err:  # a NUL byte in the path
        raise EpisodeError(f"cannot read {what}: not a valid path ({err})", file=repr(str(path))) from None
    if text is None:
        limit = MAX_FILE_BYTES >> 20
        raise EpisodeError(
            f"{what} is {size >> 20} MiB, over the {limit} MiB limit: is it the right file?", file=str(path)
        )
    return text


class _NonFinite(Exception):
    """A ``NaN`` / ``Infinity`` literal met by the parser."""


def _refuse_constant(token: str):
    raise _NonFinite(token)


def _too_deep(data: Any, limit: int) -> bool:
    """Whether `data` nests more than `limit` lists / objects (breadth first: no recursion)."""
    level, depth = [data], 0
    while level:
        depth += 1
        if depth > limit:
            return True
        nested = []
        for item in level:
            values = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
            nested += [v for v in values if isinstance(v, (dict, list))]
        level = nested
    return False


def parse_json(text: str, path: str | Path, line: int | None = None, nonfinite: bool = False) -> Any:
    """Parse the JSON `text` of `path` (the whole file, or its JSONL line `line`) by the rules of the module
    docstring; an `EpisodeError` names the file and the line. ``NaN`` / ``Infinity`` are refused unless
    `nonfinite` (then the caller validates every number, as `check_record` does)."""
    at = f"line {line}: " if line is not None else ""
    try:
        data = json.loads(text, parse_constant=None if nonfinite else _refuse_constant)
    except _NonFinite as err:
        if line is None:
            found = next((m for m in _CONSTANT.finditer(text) if m.group(1)), None)
            line = text.count("\n", 0, found.start()) + 1 if found is not None else None
        at = f"line {line}: " if line is not None else ""
        raise EpisodeError(
            f"{at}{err} is not a JSON number; write a finite number (or null where the field is optional)",
            file=str(path),
        ) from None
    except json.JSONDecodeError as err:
        lineno = line if line is not None else err.lineno
        cut = err.pos >= len(text.rstrip()) or err.msg.startswith("Unterminated string")
        ends = " (the text ends early: a truncated file?)" if cut else ""
        raise EpisodeError(
            f"invalid JSON at line {lineno}, column {err.colno}: {err.msg}{ends}", file=str(path)
        ) from None
    except RecursionError:  # the parser's own stack: far deeper than MAX_DEPTH
        raise EpisodeError(f"{at}JSON nested deeper than {MAX_DEPTH} levels: not a record", file=str(path)) from None
    except ValueError as err:  # e.g. an integer of more than 4300 digits
        raise EpisodeError(f"{at}invalid JSON: {str(err)[:120]}", file=str(path)) from None
    if _too_deep(data, MAX_DEPTH):
        raise EpisodeError(f"{at}JSON nested deeper than {MAX_DEPTH} levels: not a record", file=str(path))
    return data


def read_json(path: str | Path, what: str = "file") -> Any:
    """The JSON document of `path`, read and parsed by the rules of the module docstring."""
    text = read_text(path, what)
    if not text.strip():
        raise EpisodeError(f"{what} is empty: expected a JSON document", file=str(path))
    return parse_json(text, path)


def iter_jsonl(text: str, path: str | Path) -> Iterator[tuple[int, Any]]:
    """``(line number, record)`` for every non-blank line of JSONL `text`; invalid JSON names file and line."""
    for lineno, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield lineno, parse_json(line, path, lineno, nonfinite=True)


def read_records(path: str | Path, list_keys: tuple[str, ...] = ("episodes", "data")) -> list:
    """Records of a JSONL file (by suffix) or a JSON list (or ``{key: [...]}`` for a key in `list_keys`)."""
    path = Path(path)
    text = read_text(path)
    if not text.strip():  # an empty file holds no records (the loaders say so, naming the file)
        return []
    if path.suffix == ".jsonl":
        return [record for _, record in iter_jsonl(text, path)]
    data = parse_json(text, path, nonfinite=True)
    if isinstance(data, dict):
        for key in list_keys:
            if isinstance(data.get(key), list):
                return data[key]
    if not isinstance(data, list):
        raise EpisodeError(f"expected a list of records (or {{{list_keys[0]!r}: [...]}})", file=str(path))
    return data


def nonempty(items: list, path: str | Path, what: str, fix: str) -> list:
    """`items`, or an `EpisodeError` naming `path` when it holds none (`what`: e.g. ``"episodes"``; `fix`: what
    to write). Items skipped as bad (``.skipped``) are counted and the first one's error shown."""
    if items:
        return items
    skipped = getattr(items, "skipped", [])
    if skipped:
        first = skipped[0]
        where = [f"{k} {shown(v)}" for k, v in (("record", first.record), ("field", first.field)) if v]
        reason = ": ".join([", ".join(where), first.reason] if where else [first.reason])
        message = f"no {what}: all {len(skipped)} records were skipped as bad (first: {reason})"
    else:
        message = f"no {what}: the file is empty or holds an empty list; {fix}"
    raise EpisodeError(message, file=str(path))


def is_file(path: str | Path) -> bool:
    """Whether `path` is a file; `False` (not an `OSError`) for a path too long or invalid to look up."""
    try:
        return Path(path).is_file()
    except (OSError, ValueError):
        return False


def media_path(value: Any, fail: Callable[[str], EpisodeError]) -> str:
    """A non-empty path string of at most `MAX_PATH_CHARS` characters (`MAX_NAME_CHARS` per name) without NUL bytes,
    or ``fail(message)``."""
    if not isinstance(value, str) or not value:
        raise fail(f"must be a non-empty path string, got {shown(value)}")
    longest = max(len(part) for part in re.split(r"[/\\]", value))
    if len(value) > MAX_PATH_CHARS or longest > MAX_NAME_CHARS or "\x00" in value:
        problem = "a NUL byte" if "\x00" in value else f"{len(value)} characters, a name of {longest}"
        raise fail(
            f"is not a usable path ({problem}; at most {MAX_PATH_CHARS}, names {MAX_NAME_CHARS}): {shown(value)}"
        )
    return value


def collect(
    records: Iterable, path: str | Path, parse: Callable[[Any, int], Any], on_error: str = "raise"
) -> EpisodeList:
    """Parse every record with ``parse(record, index)`` into items with an ``id``; ids must be unique.

    With ``on_error="skip"`` a bad record is dropped and its `EpisodeError` kept in ``.skipped`` (and logged when
    some records were kept); with ``"raise"`` the first one is raised. An error that names no record is given the record's position.
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
    if skipped and out:  # none kept: the caller's error says so (`nonempty`), in one line
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
    raw = next((record[k] for k in id_keys if record.get(k) is not None), None)
    rid = None if isinstance(raw, (dict, list)) else raw  # never an id: it would read as its text, "[1]"
    rid_str = str(rid) if rid is not None else None

    def fail(field: str, message: str) -> EpisodeError:
        return EpisodeError(message, file=file, record=rid_str, field=field)

    for name in required:
        if name not in record:
            present = ", ".join(k if len(k) <= 60 else shown(k) for k in sorted(record)[:30]) or "none"
            raise fail(name, f"missing required field (present: {present})")
    bad = nonfinite_field(record)
    if bad is not None:
        raise fail(bad, "must be a finite number, got NaN or Infinity")
    if id_keys[0] in required and (isinstance(rid, bool) or not isinstance(rid, (str, int)) or rid_str == ""):
        raise fail(id_keys[0], f"must be a non-empty string or integer, got {shown(raw)}")
    return rid_str, fail


def nonfinite_field(value: Any) -> str | None:
    """The field path (``targets[0].time``) of the first NaN / infinite number in `value`, else `None`."""
    stack = [(value, "")]
    while stack:
        item, where = stack.pop()
        if isinstance(item, float) and not math.isfinite(item):
            return where
        if isinstance(item, dict):
            named = [
                (v, f"{where}.{k}".lstrip(".") if len(k) <= 60 else f"{where}.{shown(k)}") for k, v in item.items()
            ]
            stack += reversed(named)
        elif isinstance(item, list):
            stack += reversed([(v, f"{where}[{i}]") for i, v in enumerate(item)])
    return None


def number(value, fail: Callable[[str], EpisodeError]) -> float:
    """A finite float, or ``fail(message)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(f"must be a number, got {shown(value)}")
    try:
        value = float(value)
    except OverflowError:  # an integer past the float range
        value = math.inf
    if not math.isfinite(value):
        raise fail(f"must be finite, got {shown(value)}")
    return value


def integer(value, fail: Callable[[str], EpisodeError], low: int = 0, high: int | None = None) -> int:
    """An integer ``>= low`` (and ``<= high`` when given; booleans are not integers), or ``fail(message)``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        bounds = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise fail(f"must be an integer {bounds}, got {shown(value)}")
    return value


def span(
    value, fail: Callable[[str], EpisodeError], allow_empty: bool = False, nonnegative: bool = True
) -> tuple[float, float]:
    """A finite ``[start, end]`` pair with ``start < end`` (``<=`` when `allow_empty`), or ``fail(message)``.

    With `nonnegative` (the default) the start must be ``>= 0`` too.
    """
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise fail(f"must be a [start, end] pair, got {shown(value)}")
    a, b = (number(x, fail) for x in value)
    if nonnegative and a < 0:
        raise fail(f"start {a} is negative")
    if not (a <= b if allow_empty else a < b):
        raise fail(f"must have start < end, got [{a}, {b}]")
    return a, b
