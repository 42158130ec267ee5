"""Predictions files: what a model said, and when (docs/spec.md §1, §2).

The project's form is JSONL, one line per episode::

    {"id": "ego4d_0001", "responses": [{"time": 12.0, "text": "1"}, {"time": 41.0, "text": "2"}]}

The official ProactiveVideoQA / MMDuet form is read too (one line per video)::

    {"question_id": "...", "model_response_list": [{"time": 3.0, "content": "...", "role": "assistant"}]}

(user turns in ``model_response_list`` are ignored, as the official scorer does). Silent outputs are
removed and the ``</Response>`` state token is stripped on load, so every scorer sees only responses
``(t_j, ŷ_j)``. Which texts count as silence is a per-model setting (docs/spec.md §2).

:class:`PredictionWriter` appends one line per finished episode and flushes it to disk, so an
interrupted run loses at most the episode in progress; re-opening the file repairs a torn last line.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from proactive_eval.records import EpisodeError, iter_jsonl, read_text
from proactive_rewards import Response, as_response

RESPONSE_TOKEN = "</Response>"
SILENCE_TOKEN = "</Silence>"
#: Silence signals of the models people evaluate: the project's state token, and the plain-text signals
#: other streaming models emit (``NO REPLY`` is MMDuet2's). Matched against the whole stripped output.
DEFAULT_SILENCE_SIGNALS = (SILENCE_TOKEN, "Silence", "</silence>", "NO REPLY")


def strip_silence(text: str | None, silence_signals: Iterable[str] = DEFAULT_SILENCE_SIGNALS) -> str | None:
    """The response content of one assistant turn, or `None` when the turn is silent (docs/spec.md §2).

    A turn is silent when it is empty, equals one of `silence_signals` (after stripping whitespace) or
    starts with the ``</Silence>`` state token. A leading ``</Response>`` token is removed. Model output is
    never an error: anything else is a response, scored as it is.

    Example:

    ```python
    >>> strip_silence("</Response> 3"), strip_silence("</Silence>"), strip_silence("NO REPLY")
    ('3', None, None)

    ```
    """
    if text is None:
        return None
    text = str(text).strip()
    signals = tuple(silence_signals)
    if not text or text in signals or (SILENCE_TOKEN in signals and text.startswith(SILENCE_TOKEN)):
        return None
    if text.startswith(RESPONSE_TOKEN):
        text = text[len(RESPONSE_TOKEN) :].strip()
    return text


def load_predictions(
    path: str | Path, silence_signals: Iterable[str] = DEFAULT_SILENCE_SIGNALS
) -> dict[str, list[Response]]:
    """Read a predictions file (project JSONL, official ``model_response_list`` JSONL, or a JSON list of either).

    Args:
        path (`str` or `Path`): the file.
        silence_signals (`Iterable[str]`, *optional*): texts that mean "silent" for this model (docs/spec.md §2).

    Returns:
        `dict[str, list[Response]]`: episode id → non-silent responses, sorted by time (stable).

    Raises:
        `EpisodeError`: naming the file, line/record id and field of a malformed record or a duplicate id.
    """
    path = Path(path)
    signals = tuple(silence_signals)
    out: dict[str, list[Response]] = {}
    for where, record in _read_records(path):
        rid, responses = _parse_record(record, path, where, signals)
        if rid in out:
            raise EpisodeError("duplicate id in predictions", file=str(path), record=rid, field="id")
        out[rid] = sorted(responses, key=lambda r: r.time)
    return out


def save_predictions(path: str | Path, predictions: dict[str, Iterable]) -> None:
    """Write predictions as project JSONL, atomically (a temp file renamed over `path`)."""
    lines = [prediction_line(rid, responses) for rid, responses in predictions.items()]
    atomic_write_text(path, "".join(lines))


def prediction_line(episode_id: str, responses: Iterable) -> str:
    """One JSONL line ``{"id", "responses": [{"time", "text"}]}`` (newline-terminated)."""
    items = [as_response(r) for r in responses]
    record = {"id": str(episode_id), "responses": [{"time": r.time, "text": r.text} for r in items]}
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
        self._file.write(prediction_line(episode_id, responses))
        self._file.flush()
        os.fsync(self._file.fileno())
        self.done_ids.add(str(episode_id))

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
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise EpisodeError(f"invalid JSON: {err}", file=str(path)) from None
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
    if rid is None or str(rid) == "":
        raise EpisodeError(f"{where}: missing required field", file=str(path), field=id_key)
    rid = str(rid)

    def fail(field: str, msg: str) -> EpisodeError:
        return EpisodeError(msg, file=str(path), record=rid, field=field)

    items = record.get(list_key)
    if not isinstance(items, list):
        raise fail(list_key, "missing or not a list")
    responses = []
    for i, item in enumerate(items):
        fld = f"{list_key}[{i}]"
        if not isinstance(item, dict) or "time" not in item:
            raise fail(fld, f'must be an object with "time" and "{text_key}"')
        if official and item.get("role", "assistant") != "assistant":
            continue
        time = item["time"]
        if isinstance(time, bool) or not isinstance(time, (int, float)) or not math.isfinite(time):
            raise fail(fld + ".time", f"must be a finite number, got {time!r}")
        text = strip_silence(item.get(text_key, item.get("text")), signals)
        if text is not None:
            responses.append(Response(float(time), text))
    return rid, responses
