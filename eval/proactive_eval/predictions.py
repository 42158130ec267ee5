"""Predictions files: what a model said, and when (docs/spec.md §1, §2).

The project's form is JSONL, one line per episode::

    {"id": "ego4d_0001", "responses": [{"time": 12.0, "text": "1"}, {"time": 41.0, "text": "2"}]}

The official ProactiveVideoQA / MMDuet form is read too (one line per video)::

    {"question_id": "...", "model_response_list": [{"time": 3.0, "content": "...", "role": "assistant"}]}

(user turns in ``model_response_list`` are ignored, as the official scorer does). Only the id and the responses'
times and texts are read: nothing else in a predictions file (targets, durations, tasks) is ever used, since the
truth comes from the episodes alone. A repeated id is not scored twice: its first record is kept and the others
are counted (`Predictions.duplicates`); ids that match no episode are counted by the scorer. Each stored text is classified
by the one turn classifier of `proactive_rewards` (docs/spec.md §13) as a *stored response*: bare text is a
response (its state token was stripped when it was stored), ``</Silence>`` or empty text is silence, a text that
still holds state tokens is judged by the strict rule. A record ``{"time", "text", "malformed": true}`` is a
malformed output (written by the streaming loop for a turn that broke the state-token protocol): it counts as an
output in PRS and earns nothing. Other models' silence signals (``NO REPLY``) are a per-model setting.

:class:`PredictionWriter` appends one line per finished episode (or one record, `PredictionWriter.write_record`)
and flushes it to disk, so an interrupted run loses at most the episode in progress; re-opening the file repairs a
torn last line.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from proactive_eval.file_modes import default_file_mode
from proactive_eval.records import EpisodeError, iter_jsonl, number, parse_json, read_text, shown
from proactive_rewards import Response, as_response
from proactive_rewards.turns import MALFORMED, SILENCE, classify_turn

logger = logging.getLogger(__name__)

#: Silence signals of other streaming models (``NO REPLY`` is MMDuet2's). Never applied unless declared
#: (``silence_signals`` / ``--silence``); a run whose outputs hold them undeclared is warned about.
OTHER_SILENCE_SIGNALS = ("Silence", "</silence>", "NO REPLY")


def turn_output(time: float, text, silence_signals: Iterable[str] = (), plain: bool = False) -> Response | None:
    """One assistant turn as the output PRS scores: `None` when silent, else a `Response` (flagged ``malformed``
    when it broke the protocol), by the one turn classifier (docs/spec.md §13).

    Example:

    ```python
    >>> turn_output(1.0, "</Response> 3"), turn_output(2.0, "</Silence>"), turn_output(3.0, "3")
    (Response(time=1.0, text='3', malformed=False), None, Response(time=3.0, text='3', malformed=True))

    ```
    """
    state, content = classify_turn(text, silence_signals, plain=plain)
    if state == SILENCE:
        return None
    return Response(float(time), content, state == MALFORMED)


def warn_undeclared_silence(outputs: Iterable[Response], where: str) -> None:
    """Log once when outputs read like another model's silence signal that was not declared."""
    found: dict[str, int] = {}
    for r in outputs:
        if r.text in OTHER_SILENCE_SIGNALS:
            found[r.text] = found.get(r.text, 0) + 1
    if found:
        listed = ", ".join(f"{n} × {t!r}" for t, n in found.items())
        logger.warning(
            "%s: outputs %s are scored as outputs; if that is the model's silence signal, declare it "
            "(--silence / silence_signals)",
            where,
            listed,
        )


class Predictions(dict):
    """What `load_predictions` returns: episode id → outputs, plus ``duplicates``, the ids of the records that
    repeated an earlier record's id (one entry per ignored record)."""

    def __init__(self, outputs=(), duplicates: list[str] | None = None):
        super().__init__(outputs)
        self.duplicates: list[str] = list(duplicates or [])


def load_predictions(path: str | Path, silence_signals: Iterable[str] = ()) -> Predictions:
    """Read a predictions file (project JSONL, official ``model_response_list`` JSONL, or a JSON list of either).

    Args:
        path (`str` or `Path`): the file.
        silence_signals (`Iterable[str]`, *optional*): texts that mean "silent" for this model (docs/spec.md §13).

    Returns:
        `Predictions`: episode id → non-silent outputs (malformed ones flagged), sorted by time (stable); a
        repeated id keeps its first record, the others are listed in ``.duplicates`` (logged, never scored).

    Raises:
        `EpisodeError`: naming the file, line/record id and field of a malformed record.
    """
    path = Path(path)
    return _collect(_read_records(path), path, tuple(silence_signals))


def parse_predictions(records, file: str = "predictions", silence_signals: Iterable[str] = ()) -> Predictions:
    """`load_predictions` of records already read (a JSON list of project or official records, e.g. a benchmark's
    results object); `file` names them in errors. Anything but a list is an `EpisodeError`."""
    if not isinstance(records, list):
        raise EpisodeError(f"expected a JSON list of prediction records, got {shown(records)}", file=file)
    return _collect(((f"#{i}", r) for i, r in enumerate(records)), Path(file), tuple(silence_signals))


def read_prediction_records(path: str | Path) -> list:
    """The records of a predictions file (JSONL or a JSON list), unparsed: what `parse_predictions` reads."""
    return [record for _, record in _read_records(Path(path))]


def _collect(pairs, path: Path, signals: tuple[str, ...]) -> Predictions:
    """The `Predictions` of ``(where, record)`` pairs (module docstring of `load_predictions`)."""
    out = Predictions()
    for where, record in pairs:
        rid, responses = _parse_record(record, path, where, signals)
        if rid in out:
            out.duplicates.append(rid)
            continue
        out[rid] = sorted(responses, key=lambda r: r.time)
    if out.duplicates:
        logger.warning(
            "%s: %d records repeat an earlier id (e.g. %s): only the first of each id is scored",
            path,
            len(out.duplicates),
            shown(out.duplicates[0]),
        )
    warn_undeclared_silence((r for rs in out.values() for r in rs), str(path))
    return out


def save_predictions(path: str | Path, predictions: dict[str, Iterable]) -> None:
    """Write predictions as project JSONL, atomically (a temp file renamed over `path`)."""
    lines = [prediction_line(rid, responses) for rid, responses in predictions.items()]
    atomic_write_text(path, "".join(lines))


def prediction_line(episode_id: str, responses: Iterable) -> str:
    """One JSONL line ``{"id", "responses": [{"time", "text"[, "malformed": true]}]}`` (newline-terminated)."""
    items = [as_response(r) for r in responses]
    rows = [{"time": r.time, "text": r.text, **({"malformed": True} if r.malformed else {})} for r in items]
    record = {"id": str(episode_id), "responses": rows}
    return json.dumps(record, ensure_ascii=False) + "\n"


class PredictionWriter:
    """Append-safe predictions writer: one line per finished episode, flushed and fsynced.

    Opening an existing file keeps its complete lines and drops a torn last line (a run killed mid-write),
    so ``done_ids`` tells a resumed run exactly which episodes to skip.

    Args:
        path (`str` or `Path`): the JSONL file (created with its folder if missing).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.done_ids: set[str] = set()
        if self.path.exists():
            self._repair_and_scan()
        self._file = self.path.open("a", encoding="utf-8")

    def _repair_and_scan(self) -> None:
        data = self.path.read_bytes()
        keep = data if data.endswith(b"\n") or not data else data[: data.rfind(b"\n") + 1]
        if len(keep) != len(data):
            with self.path.open("r+b") as f:
                f.truncate(len(keep))
        for line in keep.decode("utf-8").splitlines():
            if line.strip():
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                rid = record.get("id", record.get("question_id")) if isinstance(record, dict) else None
                if rid is not None:
                    self.done_ids.add(str(rid))

    def write(self, episode_id: str, responses: Iterable) -> None:
        """Append one episode's responses and make it durable before returning."""
        self._append(prediction_line(episode_id, responses), episode_id)

    def write_record(self, record: dict) -> None:
        """Append one record (a JSON object with an ``"id"``, e.g. an MCQA outcome) and make it durable."""
        self._append(json.dumps(record, ensure_ascii=False) + "\n", record["id"])

    def _append(self, line: str, record_id) -> None:
        self._file.write(line)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.done_ids.add(str(record_id))

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> PredictionWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write `text` to a temp file beside `path`, then rename it over `path` (readers never see half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, default_file_mode())  # mkstemp's 0o600 would hide results from the group (umask applies)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _read_records(path: Path):
    """``(where, record)`` pairs of a JSON list or JSONL file (told apart by the first character, not the suffix)."""
    text = read_text(path, "predictions file")
    if not text.lstrip().startswith("["):
        for lineno, record in iter_jsonl(text, path):
            yield f"line {lineno}", record
        return
    data = parse_json(text, path, nonfinite=True)  # times are checked by `number`; nothing else is read
    for i, record in enumerate(data):
        yield f"#{i}", record


def _parse_record(record, path: Path, where: str, signals: tuple[str, ...]) -> tuple[str, list[Response]]:
    if not isinstance(record, dict):
        raise EpisodeError(f"{where}: expected a JSON object", file=str(path))
    official = "model_response_list" in record
    id_key, list_key, text_key = (
        ("question_id", "model_response_list", "content") if official else ("id", "responses", "text")
    )
    rid = record.get(id_key, record.get("id"))
    if rid is None:
        raise EpisodeError(f"{where}: missing required field", file=str(path), field=id_key)
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or str(rid) == "":
        raise EpisodeError(
            f"{where}: must be a non-empty string or integer (an episode id), got {shown(rid)}",
            file=str(path),
            field=id_key,
        )
    rid = str(rid)

    def fail(field: str, msg: str) -> EpisodeError:
        return EpisodeError(msg, file=str(path), record=rid, field=field)

    items = record.get(list_key)
    if not isinstance(items, list):
        raise fail(list_key, f"missing or not a list, got {shown(items)}")
    responses = []
    for i, item in enumerate(items):
        fld = f"{list_key}[{i}]"
        if not isinstance(item, dict) or "time" not in item:
            raise fail(fld, f'must be an object with "time" and "{text_key}", got {shown(item)}')
        if official and item.get("role", "assistant") != "assistant":
            continue
        time = number(item["time"], lambda m, f=fld: fail(f + ".time", m))
        text = item.get(text_key, item.get("text"))
        if text is not None and not isinstance(text, str):
            raise fail(f"{fld}.{text_key}", f"must be a string (the model's text) or null, got {shown(text)}")
        if item.get("malformed") is True:
            output = Response(float(time), text if isinstance(text, str) else "", True)
        else:
            output = turn_output(time, text, signals, plain=True)
        if output is not None:
            responses.append(output)
    return rid, responses
