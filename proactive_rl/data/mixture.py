"""Dataset mixtures: the ``dataset_mixture`` / ``eval_mixture`` of a recipe, parsed and read (docs/spec.md §1).

A mixture is a list of sources, each an episode file (JSON / JSONL), a `datasets` source (a folder saved with
``Dataset.save_to_disk``, a folder of data files, a Hub dataset id: `proactive_rl.data.sources`) or ``synthetic``
(the embedded generator), with a weight (``2.0`` repeats each episode, ``0.5`` keeps a deterministic half). TRL's
mixture entries (``{path, name, data_files, data_dir, split, columns, weight}``) are accepted as they are. Every
trainer reads its episodes here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from proactive_eval.episodes import Episode, EpisodeError, load_episodes
from proactive_eval.records import media_path
from proactive_rewards.task_table import load_tasks
from proactive_rl.data.sources import dataset_episodes, looks_like_hub_id
from proactive_rl.errors import InputError, MissingInput, did_you_mean
from proactive_rl.synthetic import TASK_KINDS, generate_episodes

ON_ERROR = ("raise", "skip")
_DATASET_KEYS = {"split", "config", "data_files", "data_dir", "columns", "video_root"}
_SOURCE_KEYS = {"source", "task", "num_episodes", "seed", "weight", "name", "knobs"} | _DATASET_KEYS
# TRL's `DatasetConfig` fields and ours: its `name` is the dataset config, `path` the source.
_TRL_KEYS = {"path": "source", "name": "config", "data_dir": "data_dir", "data_files": "data_files"}
_TRL_KEYS.update({"split": "split", "columns": "columns", "weight": "weight", "seed": "seed"})


@dataclass
class DatasetSource:
    """One entry of a dataset mixture.

    Args:
        source (`str`): an episode file (JSON / JSONL, docs/spec.md §1) or ``"synthetic"`` for the embedded generator.
        weight (`float`, *optional*, defaults to `1.0`): how many times each episode is used; a fraction keeps
            a deterministic subset (``0.5`` = half), ``2.0`` repeats every episode twice.
        task (`str`, *optional*): the synthetic task (required when ``source="synthetic"``).
        num_episodes (`int`, *optional*): how many synthetic episodes to generate.
        seed (`int`, *optional*, defaults to `0`): generator seed (synthetic) and subsampling seed.
        name (`str`, *optional*): a label for logs; defaults to the source (and task).
        knobs (`dict`, *optional*): extra keyword arguments of ``generate_episodes``.
        split (`str`, *optional*, defaults to `"train"`): the split of a `datasets` source.
        config (`str`, *optional*): the configuration (``name`` of ``load_dataset``) of a Hub dataset.
        data_files (`str` or `list` or `dict`, *optional*): ``load_dataset``'s ``data_files``.
        data_dir (`str`, *optional*): ``load_dataset``'s ``data_dir``.
        columns (`list[str]`, *optional*): keep only these columns of a `datasets` source.
        video_root (`str`, *optional*): the folder relative ``video`` paths resolve against (default: the episode
            file's or dataset's folder; the working directory for a Hub id).
    """

    source: str
    weight: float = 1.0
    task: str | None = None
    num_episodes: int | None = None
    seed: int = 0
    name: str | None = None
    knobs: dict[str, Any] = field(default_factory=dict)
    split: str | None = None
    config: str | None = None
    data_files: Any = None
    data_dir: str | None = None
    columns: list[str] | None = None
    video_root: str | None = None

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> DatasetSource:
        if isinstance(raw, str):
            raw = {"source": raw}
        if isinstance(raw, dict) and "path" in raw and "source" not in raw:  # a TRL mixture entry
            unknown = set(raw) - set(_TRL_KEYS)
            if unknown:
                raise InputError(
                    f"{where}: unknown keys {sorted(unknown)} for a TRL entry; expected {sorted(_TRL_KEYS)}"
                )
            raw = {_TRL_KEYS[k]: v for k, v in raw.items() if v is not None}
        if not isinstance(raw, dict) or "source" not in raw:
            raise InputError(
                f"{where}: expected a mapping with a 'source' (an episode file or 'synthetic'), got {raw!r}"
            )
        unknown = set(raw) - _SOURCE_KEYS
        if unknown:
            first = sorted(unknown)[0]
            hint = did_you_mean(first, _SOURCE_KEYS).replace(" did you mean", f" `{first}`: did you mean")
            raise InputError(f"{where}: unknown keys {sorted(unknown)};{hint} expected some of {sorted(_SOURCE_KEYS)}")
        src = cls(**raw)
        check_source_name(src.source, f"{where}.source")
        if not (isinstance(src.weight, (int, float)) and src.weight > 0):
            raise InputError(f"{where}.weight: must be a number > 0, got {src.weight!r}")
        if src.source == "synthetic":
            if not src.task or not src.num_episodes or src.num_episodes < 1:
                raise InputError(f"{where}: a synthetic source needs 'task' and 'num_episodes' >= 1")
            if src.task not in TASK_KINDS:
                raise InputError(
                    f"{where}.task: no synthetic task {src.task!r};{did_you_mean(src.task, TASK_KINDS)} the synthetic "
                    f"world generates {', '.join(TASK_KINDS)}"
                )
            if any(getattr(src, k) is not None for k in _DATASET_KEYS):
                raise InputError(f"{where}: {sorted(_DATASET_KEYS)} do not apply to source: synthetic")
        elif src.task is not None or src.num_episodes is not None:
            raise InputError(f"{where}: 'task' and 'num_episodes' only apply to source: synthetic")
        src.name = src.name or (f"synthetic/{src.task}" if src.source == "synthetic" else src.source)
        return src


def parse_mixture(raw: Any, where: str = "dataset_mixture") -> list[DatasetSource]:
    """A mixture is a list of sources (or TRL's ``{"datasets": [...], "seed": ...}``); each a path or a mapping."""
    if isinstance(raw, dict) and "datasets" in raw:
        extra = set(raw) - {"datasets", "seed"}
        if extra:
            raise InputError(f"{where}: unsupported keys {sorted(extra)} (hold out data with eval_mixture)")
        seed = raw.get("seed")
        raw = raw["datasets"]
        if seed is not None and isinstance(raw, list):
            raw = [{**item, "seed": item.get("seed", seed)} if isinstance(item, dict) else item for item in raw]
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{where}: expected a non-empty list of sources, got {raw!r}")
    return [DatasetSource.from_dict(item, f"{where}[{i}]") for i, item in enumerate(raw)]


def check_data_arguments(args) -> None:
    """Register the recipe's ``register_tasks`` (`proactive_rewards.load_tasks`), parse ``dataset_mixture`` /
    ``eval_mixture`` and check ``on_bad_record`` of a trainer's script arguments."""
    load_tasks(args.register_tasks, "register_tasks")
    if args.dataset_mixture is None:
        raise InputError("dataset_mixture: required (a list of sources: episode files or synthetic tasks)")
    args.dataset_mixture = parse_mixture(args.dataset_mixture, "dataset_mixture")
    if args.eval_mixture is not None:
        args.eval_mixture = parse_mixture(args.eval_mixture, "eval_mixture")
    if args.on_bad_record not in ON_ERROR:
        raise InputError(f"on_bad_record: expected one of {ON_ERROR}, got {args.on_bad_record!r}")


def load_mixture(sources: list[DatasetSource], on_error: str = "raise") -> tuple[list[Episode], list[EpisodeError]]:
    """Read every source of a mixture and apply its weight.

    Args:
        sources (`list[DatasetSource]`): from `SFTScriptArguments.dataset_mixture`.
        on_error (`str`, *optional*, defaults to `"raise"`): passed to `load_episodes` for files.

    Returns:
        `(episodes, skipped)`: episodes in mixture order (each source's episodes in file order, then weighted), and
        the records a file loader skipped. ``episode.meta["source"]`` names the source.
    """
    episodes, skipped = [], []
    for src in sources:
        if src.source == "synthetic":
            eps = list(generate_episodes(src.task, src.num_episodes, src.seed, **src.knobs))
        else:
            check_source(src)
            if Path(src.source).is_file():
                loaded = load_episodes(src.source, on_error=on_error, video_root=src.video_root)
            else:
                loaded = dataset_episodes(src, on_error=on_error)  # save_to_disk folder, data folder, Hub id
            skipped.extend(loaded.skipped)
            eps = list(loaded)
        for ep in eps:
            ep.meta = {**ep.meta, "source": src.name}
        episodes.extend(apply_weight(eps, src.weight, src.seed))
    return episodes, skipped


def check_source_name(source: Any, where: str) -> None:
    """An `InputError` at `where` (``dataset_mixture[i].source``) for a source that is no usable path: not a string,
    empty (``''`` would read the working directory as a dataset folder), with a NUL byte, or a name longer than the
    file system takes (an ``OSError`` when looked up)."""

    def fail(message: str) -> InputError:
        return InputError(f"{where}: {message}; name an episode file, a dataset folder, a Hub id or 'synthetic'")

    media_path(source, fail)


def check_source(src: DatasetSource, where: str = "dataset_mixture") -> None:
    """`MissingInput` naming the closest file when a source is neither synthetic, a file, a folder nor a Hub id;
    run before any model loads (`proactive_rl.training.check_inputs`) and again when the source is read."""
    check_source_name(src.source, f"{where}.source")
    path = Path(src.source)
    if src.source == "synthetic" or path.is_file() or path.is_dir() or looks_like_hub_id(src.source):
        return
    hint = did_you_mean(src.source, _near(path), cutoff=0.8) or " fix the path, or use a synthetic source"
    raise MissingInput(
        f"{where}: episode file {src.source!r} does not exist (paths are relative to the working directory "
        f"{Path.cwd()});{hint}"
    )


def _near(path: Path) -> list[str]:
    """The files beside a missing `path` (its nearest existing folder), as paths spelt like it, for a suggestion."""
    folder = path.parent
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        return []
    return [str(p) for p in sorted(folder.iterdir())[:500] if p.is_file() or p.is_dir()]


def apply_weight(episodes: list[Episode], weight: float, seed: int = 0) -> list[Episode]:
    """``floor(weight)`` full copies plus a deterministic random subset for the fractional part."""
    whole, frac = int(math.floor(weight)), weight - math.floor(weight)
    out = list(episodes) * whole
    if frac > 0 and episodes:
        k = int(round(frac * len(episodes)))
        picks = np.random.default_rng(seed).permutation(len(episodes))[:k]
        out += [episodes[i] for i in sorted(picks)]
    return out
