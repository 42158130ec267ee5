"""What `proactive-rl eval` checks before any model loads: every file and folder its evaluators read.

An evaluation whose data is missing fails in one line (exit status 2) naming the evaluator, the file and the fix, as
training does (`proactive_rl.training.check_inputs`), instead of loading the model and then recording every
evaluator as failed. Checked, per evaluator: its episode and environment sources (``episodes``,
``baseline_episodes``, ``environments``, ``baseline_environments``: files, ``video_root`` / ``data_dir`` folders), its
annotation file and ``video_root`` (a registered benchmark's, `proactive_rl.evaluation.benchmark`), then its items
are built (the episode and record files read and validated) and the folder of every episode's video must exist. A
single missing video is not an error here: the evaluator skips that episode and counts it in ``coverage``
(``on_error``); a missing folder of videos is a wrong path. Only the fields an evaluator's type has are checked.
"""

from __future__ import annotations

from pathlib import Path

from proactive_rl.data.mcqa import parse_environments
from proactive_rl.data.mixture import DatasetSource, check_source
from proactive_rl.errors import InputError, MissingInput, input_errors
from proactive_rl.evaluation.proactivebench import DEFAULT_NUM_ENVS


def check_data(evaluators, where: str) -> None:
    """Raise an `InputError` naming `where` (the recipe, or ``--episodes``), the evaluator and the missing file or
    folder; builds (and so caches) every evaluator's items, as the evaluation would."""
    for ev in evaluators:
        label, config = f"{where}: evaluator {ev.name!r}", ev.config
        for key in ("episodes", "baseline_episodes"):
            for i, src in enumerate(getattr(config, key, None) or []):
                if isinstance(src, DatasetSource):
                    check_source(src, f"{label}: {key}[{i}]")
                    _folder(src.video_root, f"{label}: {key}[{i}].video_root")
        for key in ("environments", "baseline_environments"):
            raw = getattr(config, key, None)
            for i, spec in enumerate(parse_environments(raw, key, DEFAULT_NUM_ENVS) if raw else []):
                if spec.source != "synthetic" and not Path(spec.source).is_file():
                    raise MissingInput(
                        f"{label}: {key}[{i}]: no such file {spec.source!r} (paths are relative to {Path.cwd()})"
                    )
                _folder(spec.data_dir, f"{label}: {key}[{i}].data_dir")
        annotations = getattr(config, "annotations", None)
        if annotations and not Path(annotations).is_file():
            raise MissingInput(f"{label}: annotations: no such file {annotations!r}")
        _folder(getattr(config, "video_root", None), f"{label}: video_root")
        try:
            items = ev.items()
            baseline = getattr(ev, "baseline_items", None)
            if callable(baseline):
                baseline()
        except input_errors() as err:
            raise type(err)(f"{label}: {err}") if _keeps_type(err) else InputError(f"{label}: {err}") from None
        _video_folders(items, label)


def _folder(path, where: str) -> None:
    if path and not Path(path).is_dir():
        raise MissingInput(f"{where}: no such folder {str(path)!r} (paths are relative to {Path.cwd()})")


def _video_folders(items, label: str) -> None:
    """A folder that none of the episodes' videos can be in (it does not exist) names the first episode there."""
    missing: dict[Path, tuple[str, int]] = {}
    for item in items:
        video_path = getattr(item, "video_path", None)
        path = video_path() if callable(video_path) else None
        if path is not None and not path.parent.is_dir():
            first, n = missing.get(path.parent, (item.id, 0))
            missing[path.parent] = (first, n + 1)
    if missing:
        folder, (first, n) = next(iter(missing.items()))
        raise MissingInput(
            f"{label}: no video folder {str(folder)!r} ({n} episode(s) play videos from it, e.g. {first!r}); fix the "
            "episodes' video paths or the source's video_root (relative paths resolve against the episode file's "
            "folder)"
        )


def _keeps_type(err: BaseException) -> bool:
    """Whether `err`'s class takes one message (`MissingInput`, `EpisodeError`...), so the prefixed error keeps it."""
    try:
        type(err)("x")
    except TypeError:
        return False
    return True
