"""Streaming episodes: the one data format (docs/spec.md §1), with validation at load time.

An episode is one video (or frame folder, or an in-memory synthetic stream) plus an instruction
and its targets. Every loader in this package produces :class:`Episode` objects, and every error
names the file, the record id and the field, so a bad record in a 10,000-line file is found at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proactive_eval.predictions import atomic_write_text
from proactive_eval.records import (
    EpisodeError,
    EpisodeList,
    check_record,
    collect,
    media_path,
    number,
    read_records,
    shown,
    span,
)
from proactive_rewards import BUILTIN_TASKS, Target
from proactive_rewards.task_table import list_tasks, unknown_task_message

__all__ = ["TASKS", "Episode", "EpisodeError", "EpisodeList", "UserTurn", "load_episodes", "save_episodes"]

#: The built-in tasks; an episode's task may be any task of `proactive_rewards.list_tasks()` (built-in or registered).
TASKS = BUILTIN_TASKS
_KNOWN_FIELDS = {"id", "task", "video", "duration", "fps", "instruction", "user_turns", "targets", "meta"}
#: The longest episode accepted, in seconds (24 h): a longer one is a unit error (ms for s) or a corrupt record, and
#: every loop over an episode's decision steps (`proactive_eval.video.sample_times`) is bounded by it.
MAX_DURATION = 86400.0
#: The highest decision rate accepted (steps per second), for the same reason.
MAX_FPS = 60.0


@dataclass(frozen=True)
class UserTurn:
    """A scheduled user text; it joins the next frame turn at or after ``time`` (docs/spec.md §1)."""

    time: float
    text: str


@dataclass
class Episode:
    """One streaming episode (docs/spec.md §1).

    Args:
        id (`str`): unique within its file.
        task (`str`): a task of the task table (`proactive_rewards.list_tasks()`: `TASKS` and registered ones).
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
        """The JSON form of docs/spec.md §1 (keys in a fixed order, so saves are byte-stable)."""
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
        rid, fail = check_record(record, file, ("id", "task", "duration", "instruction", "targets"))
        task = record["task"]
        if not isinstance(task, str):
            raise fail("task", f"must be a task name (a string), got {shown(task)}")
        if task not in list_tasks():
            raise fail("task", unknown_task_message(task if len(task) <= 60 else shown(task)))
        duration = _rate(record["duration"], MAX_DURATION, "s (24 h)", lambda m: fail("duration", m))
        fps = _rate(record.get("fps", 1.0), MAX_FPS, "steps per second", lambda m: fail("fps", m))
        if not isinstance(record["instruction"], str):
            raise fail("instruction", "must be a string")
        video = _video(record.get("video"), fail)

        targets = _parse_targets(record["targets"], duration, fail)
        user_turns = _parse_user_turns(record.get("user_turns", []), duration, fail)
        if record.get("meta") is not None and not isinstance(record["meta"], dict):
            raise fail("meta", "must be an object")
        meta = dict(record.get("meta") or {})
        meta.update({k: v for k, v in record.items() if k not in _KNOWN_FIELDS})
        return cls(
            id=rid,
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


def load_episodes(path: str | Path, on_error: str = "raise", video_root: str | Path | None = None) -> EpisodeList:
    """Load and validate episodes from a JSON list, ``{"episodes": [...]}`` or JSONL file.

    Args:
        path (`str` or `Path`): the file.
        on_error (`str`, *optional*, defaults to `"raise"`): `"raise"` stops at the first bad record with an
            `EpisodeError`; `"skip"` drops bad records, logs how many and why, and lists them in `.skipped`.
        video_root (`str` or `Path`, *optional*): the folder relative ``video`` paths resolve against (a moved
            dataset); defaults to the file's folder.
    """
    path = Path(path)
    root = Path(video_root) if video_root is not None else path.parent

    def parse(record: Any, index: int) -> Episode:
        return Episode.from_dict(record, file=str(path), base_dir=root)

    return collect(read_records(path), path, parse, on_error)


def save_episodes(path: str | Path, episodes: list[Episode]) -> None:
    """Write episodes as a JSON list (stable key order and formatting), atomically (temp file + rename)."""
    atomic_write_text(path, json.dumps([e.to_dict() for e in episodes], indent=1, ensure_ascii=False) + "\n")


def _rate(value, high: float, unit: str, fail) -> float:
    """A number in ``(0, high]`` (a duration or an fps), or ``fail(message)``."""
    value = number(value, fail)
    if not 0 < value <= high:
        raise fail(f"must be > 0 and at most {high:g} {unit}, got {value:g}")
    return value


def _video(value, fail) -> str | dict | None:
    """The ``video`` field: `None`, a path, or ``{"frames_dir": path, "fps": ...}`` (docs/spec.md §1)."""
    if value is None or isinstance(value, str):
        return value if value is None else media_path(value, lambda m: fail("video", m))
    if not isinstance(value, dict) or "frames_dir" not in value:
        raise fail("video", f'must be a path or {{"frames_dir": ..., "fps": ...}}, got {shown(value)}')
    media_path(value["frames_dir"], lambda m: fail("video.frames_dir", m))
    if "fps" in value:
        _rate(value["fps"], MAX_FPS, "frames per second", lambda m: fail("video.fps", m))
    return value


def _window(value, fld: str, fail, allow_empty: bool = False) -> tuple[float, float] | None:
    if value is None:
        return None
    a, b = span(value, lambda m: fail(fld, m), allow_empty=allow_empty, nonnegative=False)
    if max(abs(a), abs(b)) > MAX_DURATION:
        raise fail(fld, f"must lie within ±{MAX_DURATION:g} s (24 h), got [{a:g}, {b:g}]")
    return a, b


def _in_video(time: float, duration: float, fld: str, fail) -> None:
    if time < 0:
        raise fail(fld, f"time {time} is negative")
    if time > duration:
        raise fail(fld, f"time {time} is after the video end ({duration})")


def _timed_items(raw, name: str, duration: float, fail, text_required: bool):
    """``(field, item, time)`` for each ``{"time", "text"}`` object of the list `raw` (field `name`)."""
    if not isinstance(raw, list):
        raise fail(name, "must be a list")
    for i, item in enumerate(raw):
        fld = f"{name}[{i}]"
        if (
            not isinstance(item, dict)
            or "time" not in item
            or (text_required and not isinstance(item.get("text"), str))
        ):
            raise fail(fld, 'must be an object with "time" and "text"')
        time = number(item["time"], lambda m, f=fld: fail(f + ".time", m))
        _in_video(time, duration, fld + ".time", fail)
        yield fld, item, time


def _parse_targets(raw, duration: float, fail) -> list[Target]:
    targets = []
    for fld, item, time in _timed_items(raw, "targets", duration, fail, text_required=False):
        window = _window(item.get("window"), fld + ".window", fail)
        # a related span may be a single instant (only its end is used, docs/spec.md §5)
        related = _window(item.get("related"), fld + ".related", fail, allow_empty=True)
        text = item.get("text", "")
        if not isinstance(text, (str, int, float)):
            raise fail(fld + ".text", "must be a string")
        if targets and time < targets[-1].time:
            raise fail(fld + ".time", f"targets are not sorted by time ({time} after {targets[-1].time})")
        targets.append(Target(time, str(text), window, related))
    return targets


def _parse_user_turns(raw, duration: float, fail) -> list[UserTurn]:
    turns = [UserTurn(time, item["text"]) for _, item, time in _timed_items(raw, "user_turns", duration, fail, True)]
    return sorted(turns, key=lambda u: u.time)


def _target_to_dict(target: Target) -> dict[str, Any]:
    out: dict[str, Any] = {"time": target.time, "text": target.text}
    if target.window is not None:
        out["window"] = list(target.window)
    if target.related is not None:
        out["related"] = list(target.related)
    return out


def episode_group(episode) -> str:
    """The table row an episode belongs to: its task, and its subset (e.g. ``pvqa:WEB``) when known."""
    subset = episode.meta.get("subset") if episode.meta else None
    return f"{episode.task}:{subset}" if subset else episode.task
