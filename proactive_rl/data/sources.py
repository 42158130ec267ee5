"""Episodes from `datasets` sources: a folder saved with ``Dataset.save_to_disk``, a folder of data files, or a Hub id.

Every row is one episode record of docs/spec.md §1 (the columns ``id``, ``task``, ``duration``, ``instruction``,
``targets`` ...), validated by `Episode.from_dict` as an episode file's records are, so a bad row is named by source,
id and field. Relative ``video`` paths resolve against ``video_root`` if the source sets it, else against the
dataset folder (local sources) or the working directory (Hub ids).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proactive_eval.episodes import Episode, EpisodeList
from proactive_eval.records import collect
from proactive_rl.errors import InputError

# Files `save_to_disk` writes into a dataset (or dataset dict) folder.
_SAVED_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


def is_saved_dataset(path: Path) -> bool:
    """A folder written by ``Dataset.save_to_disk`` / ``DatasetDict.save_to_disk``."""
    return path.is_dir() and any((path / name).exists() for name in _SAVED_MARKERS)


def looks_like_hub_id(source: str) -> bool:
    """``org/name`` (or ``name``) that is not a local path: no file suffix, not absolute, not ``./``-relative."""
    return not source.startswith((".", "/", "~")) and Path(source).suffix == "" and source.count("/") <= 1


def load_rows(src) -> tuple[Any, Path | None]:
    """The `datasets.Dataset` of a non-file source and the folder relative video paths resolve against."""
    # deferred: keeps torch/transformers out of light import paths
    import datasets

    path = Path(src.source)
    split = src.split or "train"
    if is_saved_dataset(path):
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise InputError(f"dataset_mixture: {src.source!r} has splits {sorted(loaded)}, not {split!r}")
            loaded = loaded[split]
        base = path
    else:
        kwargs = {k: v for k, v in (("data_files", src.data_files), ("data_dir", src.data_dir)) if v is not None}
        loaded = datasets.load_dataset(str(src.source), src.config, split=split, **kwargs)
        base = path if path.is_dir() else None
    if src.columns:
        loaded = loaded.select_columns(list(src.columns))
    return loaded, Path(src.video_root) if src.video_root else base


def dataset_episodes(src, on_error: str = "raise") -> EpisodeList:
    """Validated episodes of a `datasets` source (`DatasetSource` with a folder or Hub id), in row order."""
    rows, base = load_rows(src)

    def parse(row: dict, index: int) -> Episode:
        # Arrow fills a key absent from some rows with None; the format treats absent keys as defaults.
        record = {k: v for k, v in row.items() if v is not None}
        return Episode.from_dict(record, file=src.source, base_dir=base)

    return collect(iter(rows), src.source, parse, on_error)
