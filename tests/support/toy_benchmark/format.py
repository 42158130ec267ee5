"""The toy benchmark's annotation file, as its authors would ship it: a JSON list of questions, each asked on the
video up to its ``time``::

    [{"id": "a", "video": "v.mp4", "time": 2, "question": "How many frames have you seen?", "answer": "2"}, ...]

`load_toy` checks every record before anything reads it (an `EpisodeError` naming the file, the record and the
field) and resolves the videos under ``video_root``, listing the missing ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from proactive_eval.records import EpisodeError, is_file, read_json

FIELDS = {"id": str, "video": str, "time": (int, float), "question": str, "answer": str}


@dataclass
class ToyBench:
    """Loaded annotations: the `records` in file order, each record's video path, and the `missing` videos."""

    records: list[dict]
    videos: dict[str, Path]
    missing: list[str] = field(default_factory=list)


def load_toy(path: str | Path, video_root: str | Path | None = None) -> ToyBench:
    """Read and check the annotation file `path`; videos resolve against `video_root` (default: its folder)."""
    path = Path(path)
    records = read_json(path, "annotations")
    if not isinstance(records, list) or not records:
        raise EpisodeError("expected a non-empty JSON list of questions", file=str(path))
    seen = set()
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise EpisodeError("must be an object", file=str(path), record=f"#{i}")
        for key, kind in FIELDS.items():
            if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
                raise EpisodeError("missing or of the wrong type", file=str(path), record=f"#{i}", field=key)
        if record["id"] in seen:
            raise EpisodeError("duplicate id", file=str(path), record=record["id"], field="id")
        seen.add(record["id"])
    root = Path(video_root) if video_root is not None else path.parent
    videos = {r["id"]: root / r["video"] for r in records}
    missing = list(dict.fromkeys(str(v) for v in videos.values() if not is_file(v)))
    return ToyBench(records, videos, missing)
