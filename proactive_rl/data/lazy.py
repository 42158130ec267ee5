"""Episodes as a `datasets.Dataset`: validated and measured without pixels, encoded per batch (docs/spec.md §1, §2).

Host memory does not grow with the corpus:

1. :func:`episode_rows`: one JSON row per episode of the mixture (its docs/spec.md §1 record and the folder its
   relative video path resolves against): metadata only.
2. :func:`measure_dataset`: a ``Dataset.map`` (``num_proc`` workers, a progress bar) that validates every record
   and counts its tokens *without decoding a pixel*: frame times and sizes come from the video container's packets
   and header (`proactive_eval.video.frame_plan`), and the dialogue is encoded with placeholder frames of those
   sizes and ``process_images=False``: the processor's own arithmetic gives the image token counts, so the
   length and the truncation are those of the real encoding. The result is saved under a fingerprint of the rows,
   the video files (size, mtime), the processor and the length settings; run under ``main_process_first``, the
   main process measures and every other rank, and every resume, reads the saved result.
3. :class:`LazyEpisodeCollator`: decodes and encodes each batch's episodes in the DataLoader (workers allowed).
   An episode whose video fails to decode mid-training is dropped from its batch and counted, never a crash.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from proactive_eval.episodes import Episode, EpisodeError
from proactive_eval.video import frame_plan, sample_times
from proactive_rl.chat import build_messages, encode_dialogue
from proactive_rl.data.examples import check_encoded, check_record, encode_error, pad_examples
from proactive_rl.data.frames import frame_resizer, frames_of

logger = logging.getLogger(__name__)
CACHE_ENV = "PROACTIVE_RL_CACHE"
_FORMAT = "measured-v1"  # bump when the measured columns or their meaning change


def default_cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "proactive_rl") / "measured"


def episode_rows(episodes: list[Episode]):
    """A `datasets.Dataset` with one row per episode: ``record`` (its JSON, docs/spec.md §1) and ``base_dir``."""
    # deferred: keeps torch/transformers out of light import paths
    import datasets

    return datasets.Dataset.from_dict(
        {
            "record": [json.dumps(e.to_dict(), ensure_ascii=False) for e in episodes],
            "base_dir": [str(e.base_dir) if e.base_dir is not None else "" for e in episodes],
        }
    )


def row_episode(row: dict) -> Episode:
    """The `Episode` of a row of `episode_rows` (re-validated: a bad record raises `EpisodeError`)."""
    record = json.loads(row["record"])
    source = (record.get("meta") or {}).get("source")
    return Episode.from_dict(record, file=source, base_dir=Path(row["base_dir"]) if row["base_dir"] else None)


def planned_frames(episode: Episode) -> list[tuple[float, np.ndarray]]:
    """``(time, frame)`` pairs with zero-cost placeholder frames of the sizes the real frames will have."""
    if episode.video is None:
        scene = (episode.meta or {}).get("scene")
        if not isinstance(scene, dict) or "size" not in scene:
            raise ValueError(f"episode {episode.id!r}: no video and no synthetic scene ('meta.scene') to render")
        plan = [(t, (int(scene["size"]),) * 2) for t in sample_times(episode.duration, episode.fps)]
    else:
        plan = frame_plan(episode)
    blank = np.zeros((1, 1, 1), dtype=np.uint8)
    return [(t, np.broadcast_to(blank, (h, w, 3))) for t, (h, w) in plan]


@dataclass
class EpisodeEncoder:
    """``encode(episode) -> dict``: the episode's frames (rendered or decoded) through `proactive_rl.chat`.

    Picklable (DataLoader workers). With ``process_images=False`` the frames are placeholders of the right size and
    no pixels are decoded or processed: the token count, truncation and labels are those of the full encoding.
    Otherwise each frame is resized as soon as it is decoded to the size the processor uses (`frame_resizer`, a
    known processor only), so an episode's frames are held at that size; the encoding is that of full-size frames.
    """

    processor: Any
    max_length: int | None
    truncation: str = "drop_frames"
    max_frames: int | None = None
    process_images: bool = True

    def __call__(self, episode: Episode) -> dict:
        resize = frame_resizer(self.processor) if self.process_images else None
        frames = frames_of(episode, resize) if self.process_images else planned_frames(episode)
        messages = build_messages(episode, frames, max_frames=self.max_frames)
        return encode_dialogue(
            self.processor,
            messages,
            self.max_length,
            self.truncation,
            episode_id=episode.id,
            process_images=self.process_images,
            frames_resized=resize is not None,
        )


@dataclass
class EpisodeMeasure:
    """The ``Dataset.map`` function: ``{"length", "error"}`` of a row; ``error`` is ``""`` or the JSON of the
    `EpisodeError` (file, record, field, message) the record would raise before training."""

    encoder: EpisodeEncoder

    def __call__(self, row: dict) -> dict:
        try:
            episode = row_episode(row)
            check_record(episode)
            try:
                example = self.encoder(episode)
            except EpisodeError:
                raise
            except (ValueError, OSError) as err:  # a video that cannot be read, a dialogue that cannot fit
                raise encode_error(episode, err) from err
            check_encoded(episode, example, self.encoder.max_length, self.encoder.truncation)
        except EpisodeError as err:
            fields = {"message": err.reason, "file": err.file, "record": err.record, "field": err.field}
            return {"length": 0, "error": json.dumps(fields)}
        return {"length": len(example["input_ids"]), "error": ""}

    def signature(self) -> str:
        """What the measurement depends on besides the rows: the processor and the length settings."""
        p, enc = self.encoder.processor, self.encoder
        tokenizer = getattr(p, "tokenizer", p)
        image = getattr(p, "image_processor", None)
        parts = [type(p).__name__, getattr(tokenizer, "name_or_path", ""), str(len(tokenizer))]
        parts += [getattr(p, "chat_template", "") or "", image.to_json_string() if image is not None else ""]
        parts += [repr((enc.max_length, enc.truncation, enc.max_frames))]
        return "\n".join(parts)


def fingerprint(rows, measure: EpisodeMeasure) -> str:
    """A hash of the rows, the state of their video files (size, mtime) and the measurement's settings."""
    h = hashlib.sha256(f"{_FORMAT}\n{measure.signature()}".encode())
    for row in rows:
        h.update(row["record"].encode())
        h.update(row["base_dir"].encode())
        try:
            path = row_episode(row).video_path()
        except EpisodeError:
            path = None
        if path is not None:
            stat = path.stat() if path.exists() else None
            h.update(repr((stat.st_size, stat.st_mtime_ns) if stat else "missing").encode())
    return h.hexdigest()[:24]


def measure_dataset(
    rows,
    measure: EpisodeMeasure,
    *,
    cache_dir: str | Path | None = None,
    num_proc: int | None = None,
    main_process_first: Callable[[], Any] | None = None,
):
    """`rows` with ``length`` and ``error`` columns, measured once and read back from the cache afterwards.

    Args:
        rows (`datasets.Dataset`): from `episode_rows`.
        measure (`EpisodeMeasure`): the map function.
        cache_dir (`str`, *optional*): where results are saved (default ``$PROACTIVE_RL_CACHE/measured`` or
            ``~/.cache/proactive_rl/measured``), one folder per fingerprint.
        num_proc (`int`, *optional*): ``Dataset.map`` processes.
        main_process_first (`Callable`, *optional*): a context manager factory (``TrainingArguments.
            main_process_first``): the main process measures, the others then read its result.
    """
    # deferred: keeps torch/transformers out of light import paths
    import datasets

    folder = Path(cache_dir or default_cache_dir()) / fingerprint(rows, measure)
    with (main_process_first or contextlib.nullcontext)():
        if (folder / "dataset_info.json").exists():
            logger.info("data: %d measured episodes read from the cache %s", len(rows), folder)
            return datasets.load_from_disk(str(folder))
        start = time.perf_counter()
        procs = num_proc if num_proc and num_proc > 1 and len(rows) >= 2 * num_proc else None
        measured = rows.map(
            measure, num_proc=procs, desc="measuring episodes (no pixels)", new_fingerprint=folder.name
        )
        seconds = time.perf_counter() - start
        logger.info(
            "data: measured %d episodes in %.1f s (%.1f episodes/s)",
            len(rows),
            seconds,
            len(rows) / max(seconds, 1e-9),
        )
        tmp = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
        measured.save_to_disk(str(tmp))
        try:
            tmp.rename(folder)
        except OSError:  # another node's main process saved it first
            shutil.rmtree(tmp, ignore_errors=True)
        return datasets.load_from_disk(str(folder))


def select_valid(measured, on_error: str = "raise"):
    """The rows without an error, and the `EpisodeError` of each dropped row (``on_error="raise"``: the first)."""
    errors = measured["error"]
    bad = [i for i, e in enumerate(errors) if e]
    skipped = [EpisodeError(**{"message": f.pop("message"), **f}) for f in (json.loads(errors[i]) for i in bad)]
    if skipped and on_error == "raise":
        raise skipped[0]
    if len(bad) == len(errors):
        raise ValueError(f"no training record left after validation ({len(bad)} skipped)")
    if not bad:
        return measured, skipped
    drop = set(bad)
    logger.warning("skipped %d of %d records before training", len(bad), len(errors))
    return measured.select([i for i in range(len(errors)) if i not in drop]), skipped


class LazyEpisodeCollator:
    """Decode and encode a batch's episodes (rows of `episode_rows`), then pad them like `EpisodeCollator`.

    A record that fails here (a video deleted or corrupted after the measurement) is dropped from its batch,
    logged and counted in ``batch["skipped_records"]`` (the trainer sums it); a batch that loses every record
    reuses the last encoded example, so a bad file never stops training at step N.

    Args:
        encode (`Callable`): ``encode(episode) -> dict``, e.g. `EpisodeEncoder` (picklable for workers).
        pad_token_id (`int`): the tokenizer's pad id.
    """

    def __init__(self, encode: Callable[[Episode], dict], pad_token_id: int):
        self.encode = encode
        self.pad_token_id = pad_token_id
        self.skipped = 0
        self._last = None

    def __call__(self, rows: list[dict]) -> dict:
        # deferred: keeps torch/transformers out of light import paths
        items, failed = [], 0
        for row in rows:
            try:
                items.append(self.encode(row_episode(row)))
            except (EpisodeError, ValueError, OSError, RuntimeError) as err:
                failed += 1
                logger.warning("skipped a record that failed to encode mid-training: %s", err)
        self.skipped += failed
        if not items:
            if self._last is None:
                raise RuntimeError(f"every record of the first batch failed to encode ({len(rows)} records)")
            items = [self._last]
        self._last = items[-1]
        batch = pad_examples(items, self.pad_token_id)
        import torch

        batch["skipped_records"] = torch.tensor(failed)
        return batch
