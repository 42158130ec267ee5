"""MS-COCO environment records from COCO-format annotations (ProactiveBench §3.2, App. A.7; docs/spec.md §6).

As the paper: keep images with a single annotated object; crop it so that the first view has a low IoU with
the object, toward one cardinal or ordinal direction or needing a zoom-out; offer the one or two camera moves
that reveal it (plus an abstain option, shuffled); and four category options, the answer and three hard
negatives (`proactive_rl.data.proactivebench.negatives`). Records are in the authors' format, so
`proactive_eval.benchmarks.proactivebench.coco.COCOEnvironment` plays them.

Geometry (integer pixels, so the environment's step arithmetic is exact). The full view ``F`` is the object's
box grown by ``margin`` of its size on each side (clipped to the image for camera moves). For a direction the
first view keeps ``F``'s far edges and shows only ``reveal`` of the object on the moving axis (ordinal:
``reveal_ordinal`` on each axis); each move brings one edge ``step`` pixels closer to ``F``'s, and after
``granularity - 1`` moves the view is ``F``. For ``zoom`` the first view is a centred ``reveal_zoom`` part of
the object and each zoom widens every side by ``step``; ``granularity`` zooms reach ``F``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from proactive_eval.benchmarks.proactivebench.coco import MOVE_OPTIONS, ZOOM_OPTION

CARDINAL = ("left", "right", "up", "down")
ORDINAL = ("up_left", "up_right", "down_left", "down_right")
DIRECTIONS = CARDINAL + ORDINAL + ("zoom",)
QUESTIONS = (
    "What is the object in this picture?",
    "Which object does this photo show?",
    "What kind of object can be seen in the image?",
    "Identify the object in this image.",
    "What is shown in this picture?",
)
ABSTAIN = ("I cannot answer this question.", "I do not know.", "I cannot tell from this image.")


@dataclass(frozen=True)
class CropSettings:
    """How hard the first view is (see the module docstring); granularity is drawn from ``granularities``."""

    reveal: float = 0.3
    reveal_ordinal: float = 0.5
    reveal_zoom: float = 0.4
    margin: float = 0.1
    granularities: tuple[int, ...] = (3, 4, 5)
    min_box: int = 8  # objects smaller than this (either side, pixels) are dropped


def iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """IoU of two ``(left, top, right, bottom)`` boxes.

    >>> iou((0, 0, 10, 10), (5, 0, 15, 10))
    0.3333333333333333
    """
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def single_object_images(instances: dict, min_box: int = 8) -> list[tuple[dict, dict]]:
    """``(image, annotation)`` for the images with exactly one annotation, not a crowd, both box sides >= min_box."""
    per_image: dict[Any, list[dict]] = {}
    for ann in instances["annotations"]:
        per_image.setdefault(ann["image_id"], []).append(ann)
    out = []
    for image in instances["images"]:
        anns = per_image.get(image["id"], [])
        if len(anns) == 1 and not anns[0].get("iscrowd", 0) and min(anns[0]["bbox"][2:]) >= min_box:
            out.append((image, anns[0]))
    return out


def crop_geometry(direction: str, granularity: int, bbox, image_size, settings: CropSettings) -> dict[str, Any]:
    """``{"crop", "horizontal_step", "vertical_step", "first", "full"}`` for one object (see the module docstring).

    `bbox` is COCO's ``[x, y, w, h]``; `image_size` is ``(width, height)``; ``first`` / ``full`` are the first
    and the fully revealed views as ``(left, top, right, bottom)``.
    """
    x, y, w, h = (float(v) for v in bbox)
    width, height = image_size
    mw, mh = settings.margin * w, settings.margin * h
    if direction == "zoom":
        a, b = max(1, round(settings.reveal_zoom * w)), max(1, round(settings.reveal_zoom * h))
        fl, ft = round(x + (w - a) / 2), round(y + (h - b) / 2)
        h0 = max(1, math.ceil((w + 2 * mw - a) / (2 * granularity)))
        v0 = max(1, math.ceil((h + 2 * mh - b) / (2 * granularity)))
        crop = {"top": ft + v0, "left": fl + h0, "height": b - 2 * v0, "width": a - 2 * h0}
        first = (fl, ft, fl + a, ft + b)
        full = (fl - granularity * h0, ft - granularity * v0, fl + a + granularity * h0, ft + b + granularity * v0)
        return {"crop": crop, "horizontal_step": h0, "vertical_step": v0, "first": first, "full": full}
    left, top = max(0, math.floor(x - mw)), max(0, math.floor(y - mh))
    right, bottom = min(width, math.ceil(x + w + mw)), min(height, math.ceil(y + h + mh))
    reveal = settings.reveal if "_" not in direction else settings.reveal_ordinal
    n = granularity - 1
    view, h0, v0 = [left, top, right, bottom], 0, 0
    if "left" in direction:  # the object continues to the left: show its right part
        h0 = max(1, math.ceil((x + (1 - reveal) * w - left) / n))
        view[0] = left + n * h0
    if "right" in direction:
        h0 = max(1, math.ceil((right - (x + reveal * w)) / n))
        view[2] = right - n * h0
    if "up" in direction:
        v0 = max(1, math.ceil((y + (1 - reveal) * h - top) / n))
        view[1] = top + n * v0
    if "down" in direction:
        v0 = max(1, math.ceil((bottom - (y + reveal * h)) / n))
        view[3] = bottom - n * v0
    # The authors' crop fields: the view one step further in (the first view is already one step out); for a
    # direction, "height" / "width" are the bottom / right edges.
    crop = {"top": view[1] + v0, "left": view[0] + h0, "height": view[3] - v0, "width": view[2] - h0}
    for side, axis in (("top", "up"), ("left", "left"), ("height", "down"), ("width", "right")):
        if axis not in direction:
            crop[side] = view[("left", "top", "width", "height").index(side)]
    return {
        "crop": crop,
        "horizontal_step": h0,
        "vertical_step": v0,
        "first": tuple(view),
        "full": (left, top, right, bottom),
    }


def coco_record(
    rid: int, image: dict, ann: dict, category: str, negatives: list[str], rng, settings: CropSettings
) -> dict[str, Any]:
    """One record in the authors' coco2014 format, with the provenance fields ``coco_image_id``, ``bbox``,
    ``first_iou`` (the first view's IoU with the object box) and ``full_view``."""
    direction = DIRECTIONS[int(rng.integers(len(DIRECTIONS)))]
    granularity = int(rng.choice(settings.granularities))
    geo = crop_geometry(direction, granularity, ann["bbox"], (image["width"], image["height"]), settings)
    moves = [ZOOM_OPTION] if direction == "zoom" else [MOVE_OPTIONS[d] for d in direction.split("_")]
    options = moves + [ABSTAIN[int(rng.integers(len(ABSTAIN)))]]
    categories = [category, *negatives]
    rng.shuffle(options)
    rng.shuffle(categories)
    x, y, w, h = ann["bbox"]
    return {
        "id": rid,
        "image_template": image["file_name"],
        "first_image": 0,
        "num_images": 1,
        "reference_image": 0,
        "prompt": QUESTIONS[int(rng.integers(len(QUESTIONS)))],
        "options": options,
        "categories": categories,
        "answer": category,
        "direction": direction,
        "granularity": granularity,
        "horizontal_step": geo["horizontal_step"],
        "vertical_step": geo["vertical_step"],
        "crop": geo["crop"],
        "coco_image_id": image["id"],
        "bbox": list(ann["bbox"]),
        "first_iou": round(iou(geo["first"], (x, y, x + w, y + h)), 4),
        "full_view": list(geo["full"]),
    }


def coco_records(instances: dict, miner, rng, settings: CropSettings | None = None, limit: int | None = None) -> list:
    """Records for the single-object images of `instances` (at most `limit`, in the file's order)."""
    settings = settings or CropSettings()
    names = {c["id"]: c["name"] for c in instances["categories"]}
    records = []
    for image, ann in single_object_images(instances, settings.min_box):
        if limit is not None and len(records) >= limit:
            break
        name = names[ann["category_id"]]
        records.append(coco_record(len(records), image, ann, name, miner.negatives(name), rng, settings))
    return records
