"""Media paths of converted files: rewritten so they resolve from wherever the output is written (docs/spec.md §1).

A converted record's ``video`` (or ProactiveBench ``image_template``) is read relative to the *input* file's
folder, or to ``video_root`` when the dataset's media moved. Written as is next to another folder, it would
resolve against the wrong place, so :func:`rebase_episodes` and :func:`rebase_proactivebench` rewrite each path
relative to the output file's folder (or absolute), and :func:`missing_media` lists what is not there, for the
converter to report at once rather than at the first step of an evaluation.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

from proactive_eval.episodes import Episode

PATH_STYLES = ("relative", "absolute")


def _rewrite(path: Path, out_dir: Path, style: str) -> str:
    """`path` (already resolved against its root) as written beside `out_dir`."""
    absolute = Path(os.path.abspath(path))
    if style == "absolute":
        return str(absolute)
    try:
        return os.path.relpath(absolute, os.path.abspath(out_dir))
    except ValueError:  # another drive (Windows): no relative path exists
        return str(absolute)


def rebase_episodes(episodes: list[Episode], out_path: str | Path, style: str = "relative") -> list[Episode]:
    """Copies of `episodes` whose ``video`` (file or ``frames_dir``) resolves from `out_path`'s folder.

    Args:
        episodes (`list[Episode]`): loaded episodes (their `base_dir` is where their paths resolve now).
        out_path (`str` or `Path`): the file they will be written to.
        style (`str`, *optional*, defaults to `"relative"`): ``"relative"`` (to the output's folder; the output
            and the data move together) or ``"absolute"``.
    """
    if style not in PATH_STYLES:
        raise ValueError(f"path style must be one of {', '.join(PATH_STYLES)}, got {style!r}")
    out_dir = Path(out_path).parent
    rebased = []
    for episode in episodes:
        episode = copy.copy(episode)
        path = episode.video_path()
        if path is not None:
            new = _rewrite(path, out_dir, style)
            episode.video = {**episode.video, "frames_dir": new} if isinstance(episode.video, dict) else new
        episode.base_dir = out_dir
        rebased.append(episode)
    return rebased


def _escape(prefix: str, template: str) -> str:
    """Escape a folder prefix for the template's fill style (``{}`` or ``%``), so it is copied literally."""
    if "{" in template:
        return prefix.replace("{", "{{").replace("}", "}}")
    if "%" in template:
        return prefix.replace("%", "%%")
    return prefix


def rebase_proactivebench(records: list, out_path: str | Path, style: str = "relative") -> list:
    """Copies of ProactiveBench records whose ``image_template`` (and a path ``reference_image``) resolve from
    `out_path`'s folder: the template gets the image folder as a prefix (see :func:`rebase_episodes`)."""
    if style not in PATH_STYLES:
        raise ValueError(f"path style must be one of {', '.join(PATH_STYLES)}, got {style!r}")
    out_dir = Path(out_path).parent
    rebased = []
    for record in records:
        record = copy.copy(record)
        root = record.base_dir if record.base_dir is not None else Path(".")
        if not Path(record.image_template).is_absolute():
            prefix = _rewrite(root, out_dir, style)
            if prefix != ".":
                record.image_template = os.path.join(_escape(prefix, record.image_template), record.image_template)
        if isinstance(record.reference_image, str) and not Path(record.reference_image).is_absolute():
            record.reference_image = _rewrite(root / record.reference_image, out_dir, style)
        record.base_dir = out_dir
        rebased.append(record)
    return rebased


def missing_media(items: list) -> list[str]:
    """The media paths of `items` that do not exist: an episode's video file or frames folder, a ProactiveBench
    record's first image (in-memory episodes have none)."""
    missing = []
    for item in items:
        if isinstance(item, Episode):
            path = item.video_path()
            if path is None:
                continue
            exists = path.is_dir() if isinstance(item.video, dict) else path.is_file()
        else:
            path = item.image_path(item.first_image)
            exists = path.is_file()
        if not exists:
            missing.append(str(path))
    return missing
