"""Streaming episodes: the one data format (SPEC §1), with validation at load time.

An episode is one video (or frame folder, or an in-memory synthetic stream) plus an instruction
and its targets. Every loader in this package produces :class:`Episode` objects, and every error
names the file, the record id and the field, so a bad record in a 10,000-line file is found at once.
"""

from __future__ import annotations

import json
import logging
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proactive_rewards import Target

logger = logging.getLogger(__name__)

TASKS = ("accident", "crime", "atomic", "event_type", "compositional", "object", "intervention", "pvqa")
_KNOWN_FIELDS = {"id", "task", "video", "duration", "fps", "instruction", "user_turns", "targets", "meta"}


class EpisodeError(ValueError):
    """A record that breaks SPEC §1, located by file, record id and field."""

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


@dataclass(frozen=True)
class UserTurn:
    """A scheduled user text; it joins the next frame turn at or after ``time`` (SPEC §1)."""

    time: float
    text: str


@dataclass
class Episode:
    """One streaming episode (SPEC §1).

    Args:
        id (`str`): unique within its file.
        task (`str`): one of `TASKS`.
        duration (`float`): seconds.
        instruction (`str`): the user's request, carried by the first user turn.
        targets (`list[Target]`): ground-truth responses, sorted by time.
        video (`str` or `dict`, *optional*): a video path, ``{"frames_dir": ..., "fps": ...}``, or `None`
            for an in-memory synthetic stream. Relative paths resolve against `base_dir`.
        fps (`float`, *optional*, defaults to `1.0`): decision steps per second.
        user_turns (`list[UserTurn]`, *optional*): scheduled user texts.
        meta (`dict`, *optional*): anything else the record carries (kept on save).
        base_dir (`Path`, *optional*): the folder of the file the episode came from (not saved).
    """

    id: str
    task: str
    duration: float
    instruction: str
    targets: list[Target] = field(default_factory=list)
    video: str | dict | None = None
    fps: float = 1.0
    user_turns: list[UserTurn] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    base_dir: Path | None = field(default=None, compare=False, repr=False)

    def video_path(self) -> Path | None:
        """The video file or frames folder, resolved against `base_dir`; `None` for in-memory streams."""
        if self.video is None:
            return None
        raw = self.video["frames_dir"] if isinstance(self.video, dict) else self.video
        path = Path(raw)
        return path if path.is_absolute() or self.base_dir is None else self.base_dir / path

    def to_dict(self) -> dict[str, Any]:
        """The JSON form of SPEC §1 (keys in a fixed order, so saves are byte-stable)."""
        record: dict[str, Any] = {"id": self.id, "task": self.task}
        if self.video is not None:
            record["video"] = self.video
        record.update(duration=self.duration, fps=self.fps, instruction=self.instruction)
        record["user_turns"] = [{"time": u.time, "text": u.text} for u in self.user_turns]
        record["targets"] = [_target_to_dict(t) for t in self.targets]
        if self.meta:
            record["meta"] = self.meta
        return record

    @classmethod
    def from_dict(cls, record: dict[str, Any], *, file: str | None = None, base_dir: Path | None = None) -> Episode:
        """Parse and validate one record; raises `EpisodeError` naming file, id and field."""
        if not isinstance(record, dict):
            raise EpisodeError(f"expected a JSON object, got {type(record).__name__}", file=file)
        rid = record.get("id")
        rid_str = str(rid) if rid is not None else None

        def fail(fld: str, msg: str) -> EpisodeError:
            return EpisodeError(msg, file=file, record=rid_str, field=fld)

        for name in ("id", "task", "duration", "instruction", "targets"):
            if name not in record:
                present = ", ".join(sorted(record)) or "none"
                raise fail(name, f"missing required field (present: {present})")
        if not isinstance(rid, (str, int)) or str(rid) == "":
            raise fail("id", "must be a non-empty string")
        task = record["task"]
        if task not in TASKS:
            raise fail("task", f"unknown task {task!r}; expected one of {', '.join(TASKS)}")
        duration = _number(record["duration"], lambda m: fail("duration", m))
        if duration <= 0:
            raise fail("duration", f"must be > 0, got {duration}")
        fps = _number(record.get("fps", 1.0), lambda m: fail("fps", m))
        if fps <= 0:
            raise fail("fps", f"must be > 0, got {fps}")
        if not isinstance(record["instruction"], str):
            raise fail("instruction", "must be a string")
        video = record.get("video")
        if video is not None and not isinstance(video, str):
            if not isinstance(video, dict) or "frames_dir" not in video:
                raise fail("video", 'must be a path or {"frames_dir": ..., "fps": ...}')

        targets = _parse_targets(record["targets"], duration, fail)
        user_turns = _parse_user_turns(record.get("user_turns", []), duration, fail)
        meta = dict(record.get("meta") or {})
        meta.update({k: v for k, v in record.items() if k not in _KNOWN_FIELDS})
        return cls(
            id=str(rid),
            task=task,
            duration=duration,
            instruction=record["instruction"],
            targets=targets,
            video=video,
            fps=fps,
            user_turns=user_turns,
            meta=meta,
            base_dir=base_dir,
        )


class EpisodeList(list):
    """A list of episodes that also remembers what was skipped (``on_error="skip"``)."""

    def __init__(self, episodes=(), skipped: list[EpisodeError] | None = None):
        super().__init__(episodes)
        self.skipped: list[EpisodeError] = skipped or []


def load_episodes(path: str | Path, on_error: str = "raise") -> EpisodeList:
    """Load and validate episodes from a JSON list, ``{"episodes": [...]}`` or JSONL file.

    Args:
        path (`str` or `Path`): the file.
        on_error (`str`, *optional*, defaults to `"raise"`): `"raise"` stops at the first bad record with an
            `EpisodeError`; `"skip"` drops bad records, logs how many and why, and lists them in `.skipped`.
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    path = Path(path)
    records = _read_records(path)
    episodes, skipped, seen = [], [], set()
    for index, record in enumerate(records):
        try:
            episode = Episode.from_dict(record, file=str(path), base_dir=path.parent)
            if episode.id in seen:
                raise EpisodeError("duplicate id", file=str(path), record=episode.id, field="id")
            seen.add(episode.id)
            episodes.append(episode)
        except EpisodeError as err:
            if err.record is None:
                err = EpisodeError(err.reason, file=str(path), record=f"#{index}", field=err.field)
            if on_error == "raise":
                raise err from None
            skipped.append(err)
    if skipped:
        reasons = "; ".join(str(e) for e in skipped[:5]) + (" ..." if len(skipped) > 5 else "")
        logger.warning("%s: skipped %d of %d records: %s", path, len(skipped), len(records), reasons)
    return EpisodeList(episodes, skipped)


def save_episodes(path: str | Path, episodes: list[Episode]) -> None:
    """Write episodes as a JSON list (stable key order and formatting)."""
    Path(path).write_text(json.dumps([e.to_dict() for e in episodes], indent=1, ensure_ascii=False) + "\n")


def _read_records(path: Path) -> list:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise EpisodeError(f"cannot read file: {err}", file=str(path)) from None
    if path.suffix == ".jsonl":
        records = []
        for lineno, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise EpisodeError(f"line {lineno}: invalid JSON: {err}", file=str(path)) from None
        return records
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise EpisodeError(f"invalid JSON: {err}", file=str(path)) from None
    if isinstance(data, dict) and "episodes" in data:
        data = data["episodes"]
    if not isinstance(data, list):
        raise EpisodeError('expected a list of episodes or {"episodes": [...]}', file=str(path))
    return data


def _number(value, fail) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise fail(f"must be a number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise fail(f"must be finite, got {value}")
    return value


def _span(value, fld: str, fail) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise fail(fld, f"must be a [start, end] pair, got {value!r}")
    a, b = (_number(x, lambda m: fail(fld, m)) for x in value)
    if not a < b:
        raise fail(fld, f"window must have start < end, got [{a}, {b}]")
    return a, b


def _in_video(time: float, duration: float, fld: str, fail) -> None:
    if time < 0:
        raise fail(fld, f"time {time} is negative")
    if time > duration:
        raise fail(fld, f"time {time} is after the video end ({duration})")


def _parse_targets(raw, duration: float, fail) -> list[Target]:
    if not isinstance(raw, list):
        raise fail("targets", "must be a list")
    targets = []
    for i, item in enumerate(raw):
        fld = f"targets[{i}]"
        if not isinstance(item, dict) or "time" not in item:
            raise fail(fld, 'must be an object with "time" and "text"')
        time = _number(item["time"], lambda m, f=fld: fail(f + ".time", m))
        _in_video(time, duration, fld + ".time", fail)
        window = _span(item["window"], fld + ".window", fail) if item.get("window") is not None else None
        related = _span(item["related"], fld + ".related", fail) if item.get("related") is not None else None
        text = item.get("text", "")
        if not isinstance(text, (str, int, float)):
            raise fail(fld + ".text", "must be a string")
        if targets and time < targets[-1].time:
            raise fail(fld + ".time", f"targets are not sorted by time ({time} after {targets[-1].time})")
        targets.append(Target(time, str(text), window, related))
    return targets


def _parse_user_turns(raw, duration: float, fail) -> list[UserTurn]:
    if not isinstance(raw, list):
        raise fail("user_turns", "must be a list")
    turns = []
    for i, item in enumerate(raw):
        fld = f"user_turns[{i}]"
        if not isinstance(item, dict) or "time" not in item or not isinstance(item.get("text"), str):
            raise fail(fld, 'must be an object with "time" and "text"')
        time = _number(item["time"], lambda m, f=fld: fail(f + ".time", m))
        _in_video(time, duration, fld + ".time", fail)
        turns.append(UserTurn(time, item["text"]))
    return sorted(turns, key=lambda u: u.time)


def _target_to_dict(target: Target) -> dict[str, Any]:
    out: dict[str, Any] = {"time": target.time, "text": target.text}
    if target.window is not None:
        out["window"] = list(target.window)
    if target.related is not None:
        out["related"] = list(target.related)
    return out
