"""Episodes → model inputs for SFT: dataset mixtures, record validation before the first step, the collator.

The path of a training record (docs/spec.md §1 → §2 → §3):

1. :func:`load_mixture` reads every source of a mixture (episode files, or the synthetic generator) and applies its
   weight (``2.0`` repeats each episode, ``0.5`` keeps a deterministic half).
2. :func:`prepare_examples` validates every record and encodes it once, *before* training starts: a target after
   the video end, a missing video file and an episode longer than ``max_length`` (with ``truncation="error"``)
   each raise an `EpisodeError` naming the record, or, with ``on_error="skip"``, are dropped and counted.
3. :class:`EpisodeCollator` pads the encoded dialogues of a micro-batch (labels ``-100`` on padding) and
   concatenates their vision inputs.

The encoding itself (chat template, frames, label mask, truncation by whole frames) is `proactive_rl.chat`'s;
this module takes it as a function ``encode(episode) -> dict`` so that tests can plug a fake one.
"""

from __future__ import annotations

import logging
import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from proactive_eval.episodes import Episode, EpisodeError
from proactive_rl.chat.messages import IGNORE_INDEX

logger = logging.getLogger(__name__)

# Per-sample tensors whose first dimension is a token/patch count and which concatenate across a batch.
_CONCAT_KEYS = ("pixel_values", "image_grid_thw", "pixel_values_videos", "video_grid_thw")


@dataclass
class PreparedData:
    """Encoded examples ready for the trainer, and what was dropped on the way.

    Args:
        examples (`list[dict]`): one encoded dialogue per kept episode (``input_ids``, ``labels``, vision inputs).
        episodes (`list[Episode]`): the kept episodes, aligned with `examples`.
        skipped (`list[EpisodeError]`): the bad records (only with ``on_error="skip"``).
    """

    examples: list[dict]
    episodes: list[Episode]
    skipped: list[EpisodeError] = field(default_factory=list)

    def skip_summary(self) -> str:
        return skip_summary(self.skipped)


def skip_summary(skipped: list[EpisodeError]) -> str:
    """``"2 × video, 1 × max_length"``: how many bad records were dropped, by field (``"none"`` when none)."""
    reasons = Counter(e.field or "record" for e in skipped)
    return ", ".join(f"{n} × {why}" for why, n in reasons.most_common()) or "none"


def check_record(episode: Episode) -> None:
    """Checks an in-memory episode may have escaped (load-time validation covers files): docs/spec.md §1 times, video.

    Raises:
        `EpisodeError` naming the record and field.
    """

    def fail(fld: str, msg: str) -> EpisodeError:
        return EpisodeError(msg, file=episode.meta.get("source"), record=episode.id, field=fld)

    for i, target in enumerate(episode.targets):
        if not (math.isfinite(target.time) and 0 <= target.time <= episode.duration):
            raise fail(f"targets[{i}].time", f"time {target.time} is outside the video [0, {episode.duration}]")
    path = episode.video_path()
    if path is not None and not path.exists():
        raise fail("video", f"video {str(path)!r} does not exist")


def encode_error(episode: Episode, err: Exception) -> EpisodeError:
    """The `EpisodeError` of an episode whose encoding failed (field ``max_length`` or ``video``)."""
    fld = "max_length" if "max_length" in str(err) else "video"
    return EpisodeError(str(err), file=episode.meta.get("source"), record=episode.id, field=fld)


def check_encoded(episode: Episode, example: dict, max_length: int | None, truncation: str) -> None:
    """An encoded dialogue must fit `max_length` and keep a supervised token; else an `EpisodeError`."""
    length = len(example["input_ids"])
    if max_length is not None and length > max_length:
        how = "set truncation: drop_frames or raise max_length" if truncation == "error" else "encoder bug"
        raise EpisodeError(
            f"dialogue is {length} tokens, longer than max_length={max_length} ({how})",
            file=episode.meta.get("source"),
            record=episode.id,
            field="max_length",
        )
    if not any(int(x) != IGNORE_INDEX for x in example["labels"]):
        raise EpisodeError(
            "no supervised token left (every assistant turn was truncated away)",
            file=episode.meta.get("source"),
            record=episode.id,
            field="max_length",
        )


def prepare_examples(
    episodes: list[Episode],
    encode: Callable[[Episode], dict],
    *,
    max_length: int | None,
    truncation: str = "drop_frames",
    on_error: str = "raise",
) -> PreparedData:
    """Validate and encode every episode before the first training step.

    Args:
        episodes (`list[Episode]`): the mixture.
        encode (`Callable`): ``encode(episode) -> dict`` with ``input_ids`` and ``labels`` (1-D) and vision inputs;
            with ``truncation="drop_frames"`` it must itself keep the dialogue within `max_length` by dropping whole
            early frames, and may raise `ValueError` when even that cannot.
        max_length (`int`, *optional*): the longest dialogue in tokens.
        truncation (`str`, *optional*, defaults to `"drop_frames"`): with ``"error"`` a dialogue over `max_length`
            is a bad record.
        on_error (`str`, *optional*, defaults to `"raise"`): ``"raise"`` or ``"skip"`` (drop and count).
    """
    if on_error not in ("raise", "skip"):
        raise ValueError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    examples, kept, skipped = [], [], []
    for episode in episodes:
        try:
            check_record(episode)
            try:
                example = encode(episode)
            except EpisodeError:
                raise
            except (ValueError, OSError) as err:  # a video that fails to decode, a dialogue that cannot fit
                raise encode_error(episode, err) from err
            check_encoded(episode, example, max_length, truncation)
        except EpisodeError as err:
            if on_error == "raise":
                raise
            skipped.append(err)
            continue
        examples.append(example)
        kept.append(episode)
    data = PreparedData(examples, kept, skipped)
    if skipped:
        logger.warning(
            "skipped %d of %d records before training: %s", len(skipped), len(episodes), data.skip_summary()
        )
    if not examples:
        raise ValueError(f"no training record left after validation ({len(skipped)} skipped: {data.skip_summary()})")
    return data


def as_hf_dataset(data: PreparedData):
    """A `datasets.Dataset` of row indices (what `SFTTrainer` requires); the collator looks the rows up."""
    # deferred: keeps torch/transformers out of light import paths
    import datasets

    return datasets.Dataset.from_dict(
        {"index": list(range(len(data.examples))), "episode_id": [e.id for e in data.episodes]}
    )


class EpisodeCollator:
    """Pad encoded dialogues into a micro-batch (right padding; ``labels = -100`` on padding).

    Args:
        examples (`list[dict]`): the encoded dialogues (`PreparedData.examples`); rows carry an ``index`` into it.
        pad_token_id (`int`): the tokenizer's pad id.
    """

    def __init__(self, examples: list[dict], pad_token_id: int):
        self.examples = examples
        self.pad_token_id = pad_token_id

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        items = [self.examples[int(r["index"])] if "index" in r else r for r in rows]
        return pad_examples(items, self.pad_token_id)


def pad_examples(items: list[dict], pad_token_id: int) -> dict[str, torch.Tensor]:
    """Right-pad encoded dialogues into a batch (``labels = -100`` on padding), vision inputs concatenated."""
    width = max(len(x["input_ids"]) for x in items)
    batch = {
        "input_ids": torch.full((len(items), width), pad_token_id, dtype=torch.long),
        "attention_mask": torch.zeros((len(items), width), dtype=torch.long),
        "labels": torch.full((len(items), width), IGNORE_INDEX, dtype=torch.long),
    }
    if all("mm_token_type_ids" in x for x in items):
        # 1 on image tokens: Qwen-VL computes its 3-D rope positions from it
        batch["mm_token_type_ids"] = torch.zeros((len(items), width), dtype=torch.long)
    for i, x in enumerate(items):
        n = len(x["input_ids"])
        batch["input_ids"][i, :n] = torch.as_tensor(x["input_ids"])
        batch["attention_mask"][i, :n] = 1
        batch["labels"][i, :n] = torch.as_tensor(x["labels"])
        if "mm_token_type_ids" in batch:
            batch["mm_token_type_ids"][i, :n] = torch.as_tensor(x["mm_token_type_ids"])
    for key in _CONCAT_KEYS:
        parts = [torch.as_tensor(x[key]) for x in items if x.get(key) is not None]
        if parts:
            batch[key] = torch.cat(parts)
    return batch
