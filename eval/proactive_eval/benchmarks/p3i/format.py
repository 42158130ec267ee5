"""P³I-style JSON → episodes (docs/spec.md §1).

The project's episode format *is* the P³I layout (one video, an instruction, timed targets), so this reader
accepts it as is and also the spellings seen in P³I-style exports: ``question_id`` / ``video_id`` for
``id``, ``query`` / ``question`` for ``instruction``, ``answers`` / ``responses`` / ``ground_truth`` for
``targets``, and per target ``timestamp`` for ``time``, ``content`` / ``response`` / ``answer`` for ``text``,
``span`` / ``time_window`` for ``window``. Targets are sorted by time. Everything else is validated by
`Episode.from_dict` and errors name the file, the record id and the field.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proactive_eval.episodes import Episode, EpisodeError, EpisodeList
from proactive_eval.records import collect, read_records

_RECORD_ALIASES = {
    "id": ("question_id", "video_id"),
    "instruction": ("query", "question"),
    "targets": ("answers", "responses", "ground_truth"),
}
_TARGET_ALIASES = {
    "time": ("timestamp",),
    "text": ("content", "response", "answer"),
    "window": ("span", "time_window"),
}


def convert_p3i(path: str | Path, on_error: str = "raise", video_root: str | Path | None = None) -> EpisodeList:
    """Read P³I-style episodes (JSON list, ``{"episodes": [...]}`` or JSONL).

    Args:
        path (`str` or `Path`): the file.
        on_error (`str`, *optional*, defaults to `"raise"`): ``"skip"`` drops bad records (listed in ``.skipped``).
        video_root (`str` or `Path`, *optional*): the folder relative video paths resolve against; defaults to
            the file's folder.
    """
    path = Path(path)
    records = read_records(path)
    root = Path(video_root) if video_root is not None else path.parent
    return collect(records, path, lambda record, i: p3i_record_to_episode(record, path, root), on_error)


def p3i_record_to_episode(record: Any, path: Path, video_root: Path | None = None) -> Episode:
    """Normalise the aliases of one record, then validate it as an `Episode`."""
    if not isinstance(record, dict):
        raise EpisodeError(f"expected a JSON object, got {type(record).__name__}", file=str(path))
    record = _rename(record, _RECORD_ALIASES)
    targets = record.get("targets")
    if isinstance(targets, list):
        targets = [_rename(t, _TARGET_ALIASES) if isinstance(t, dict) else t for t in targets]
        if all(isinstance(t, dict) and isinstance(t.get("time"), (int, float)) for t in targets):
            targets = sorted(targets, key=lambda t: t["time"])
        record["targets"] = targets
    return Episode.from_dict(record, file=str(path), base_dir=video_root if video_root is not None else path.parent)


def _rename(record: dict, aliases: dict[str, tuple[str, ...]]) -> dict:
    out = dict(record)
    for name, alts in aliases.items():
        if name not in out:
            for alt in alts:
                if alt in out:
                    out[name] = out.pop(alt)
                    break
    return out
