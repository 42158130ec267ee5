"""A synthetic dataset in MS-COCO's format (images + an instances JSON), for the ProactiveBench COCO builder on a CPU.

The MS-COCO environment and its training rows are made from COCO-format annotations
(`proactive_rl.data.proactivebench.coco_records`); this writes a small dataset of that format from the synthetic
world, so the whole path runs in tests without the real data::

    out/images/000001.png ...
    out/annotations/instances.json    {"images": [...], "annotations": [...], "categories": [...]}

Each image shows one coloured shape on a plain background (a fraction shows two, which the builder must drop:
the paper keeps single-object images). Categories are ``"<colour> <shape>"`` with the shape as supercategory,
so near names (``red circle`` / ``red square`` / ``orange circle``) make natural hard negatives. Boxes are
``[x, y, width, height]`` in pixels, the extent of the drawn mask, as in COCO.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from PIL import Image

from proactive_rl.synthetic.world import BACKGROUND, PALETTE, SHAPES, rgb, shape_mask

COLOURS = tuple(PALETTE)


def coco_categories() -> list[dict]:
    """Every ``<colour> <shape>`` as a COCO category (ids from 1)."""
    names = [(c, s) for s in SHAPES for c in COLOURS]
    return [{"id": i + 1, "name": f"{c} {s}", "supercategory": s} for i, (c, s) in enumerate(names)]


def make_coco_dataset(
    out: str | Path, num_images: int = 16, seed: int = 0, size: tuple[int, int] = (96, 128), two_objects: float = 0.25
) -> Path:
    """Write `num_images` images and their instances JSON under `out`; returns the JSON's path.

    Args:
        out (`str` or `Path`): the dataset folder.
        num_images (`int`, *optional*, defaults to `16`): how many images.
        seed (`int`, *optional*, defaults to `0`): the random seed (same seed, same files).
        size (`tuple[int, int]`, *optional*, defaults to `(96, 128)`): image height and width.
        two_objects (`float`, *optional*, defaults to `0.25`): fraction of images with a second object.
    """
    out = Path(out)
    (out / "images").mkdir(parents=True, exist_ok=True)
    (out / "annotations").mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(seed)
    categories = coco_categories()
    height, width = size
    yy, xx = np.mgrid[0:height, 0:width]
    images, annotations = [], []
    for image_id in range(1, num_images + 1):
        canvas = np.empty((height, width, 3), np.uint8)
        canvas[:] = BACKGROUND
        count = 2 if rng.random() < two_objects else 1
        for _ in range(count):
            category = categories[int(rng.integers(len(categories)))]
            colour, shape = category["name"].split(" ")
            radius = float(rng.uniform(0.12, 0.2) * min(height, width))
            cx = float(rng.uniform(radius + 2, width - radius - 2))
            cy = float(rng.uniform(radius + 2, height - radius - 2))
            mask = shape_mask(shape, cx, cy, radius, 0, yy=yy, xx=xx)
            canvas[mask] = rgb(colour)
            ys, xs = np.nonzero(mask)
            x0, y0 = int(xs.min()), int(ys.min())
            box = [x0, y0, int(xs.max()) - x0 + 1, int(ys.max()) - y0 + 1]
            annotations.append(
                {
                    "id": len(annotations) + 1,
                    "image_id": image_id,
                    "category_id": category["id"],
                    "bbox": box,
                    "area": int(mask.sum()),
                    "iscrowd": 0,
                }
            )
        name = f"images/{image_id:06d}.png"
        Image.fromarray(canvas).save(out / name)
        images.append({"id": image_id, "file_name": name, "width": width, "height": height})
    path = out / "annotations" / "instances.json"
    path.write_text(json.dumps({"images": images, "annotations": annotations, "categories": categories}))
    return path
