"""The GRPO training set of ProactiveBench §5 / App. C: single-turn QuickDraw + MS-COCO rows (docs/spec.md §6).

The paper trains on ~27k single-turn examples, 17k from QuickDraw (a subset disjoint from the benchmark's) and
the rest from MS-COCO's train split, "sampling both ambiguous and unambiguous frames" so that the model learns
when to ask and when to answer. This builder writes exactly that::

    python -m proactive_rl.data.proactivebench.train_set --out data/proactivebench/train \\
        --coco-annotations coco/annotations/instances_train2014.json --coco-images coco \\
        --qd data/QuickDraw/train_preprocessed.jsonl --qd-exclude ProactiveBench/test/QuickDraw_preprocessed.jsonl \\
        --num-coco 10000 --num-qd 17000 --ambiguous-fraction 0.5 [--clip-model openai/clip-vit-base-patch32]

Output folder::

    coco2014_train_preprocessed.jsonl   MS-COCO records in the authors' format (`coco_records`), images in --coco-images
    images/coco/<id>_<step>.png          the crop of each COCO row
    rows.jsonl                           the training rows (`proactive_rl.data.mcqa` columns + ``ambiguous``)
    manifest.json                        arguments, counts, the negative miner used

One row per environment: an *ambiguous* frame (a state on the way, where a suggestion is valid; drawn uniformly)
for ``round(ambiguous_fraction · n)`` of them, the *unambiguous* last frame (fully revealed; only a category is
right) for the rest. QuickDraw records whose drawing (``key_id`` if the records have one, else
``image_template``) appears in a ``--qd-exclude`` file are dropped. The suggestion trainer reads ``rows.jsonl``
with ``environments: [{source: <out>/rows.jsonl, format: rows}]``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from proactive_eval.benchmarks.proactivebench.coco import COCOEnvironment
from proactive_eval.benchmarks.proactivebench.environments import ProactiveBenchEnvironment
from proactive_eval.records import read_records
from proactive_rl.data.mcqa import environment_rows
from proactive_rl.data.proactivebench.coco_records import CropSettings, coco_records
from proactive_rl.data.proactivebench.negatives import NegativeMiner
from proactive_rl.errors import report

logger = logging.getLogger(__name__)


def _drawing_key(record: dict) -> str:
    return str(record["key_id"]) if "key_id" in record else str(record["image_template"])


def quickdraw_records(path: str | Path, exclude: list[str | Path] = ()) -> tuple[list[dict], int]:
    """QuickDraw records of `path` (authors' format) whose drawing is in none of the `exclude` files; and how
    many were dropped for it."""
    banned = {_drawing_key(r) for p in exclude for r in read_records(p)}
    records = read_records(path)
    kept = [r for r in records if _drawing_key(r) not in banned]
    return kept, len(records) - len(kept)


def pick_states(states: list[dict], ambiguous: bool, rng) -> dict | None:
    """One row: a random ambiguous state (a suggestion is valid there), or the last, unambiguous one."""
    if ambiguous:
        candidates = [s for s in states if s["valid_actions"]]
        return candidates[int(rng.integers(len(candidates)))] if candidates else None
    return states[-1] if not states[-1]["valid_actions"] else None


def sample_rows(envs: list, n: int | None, ambiguous_fraction: float, rng) -> list[dict]:
    """`n` rows (one per environment, environments in a seeded order), ``round(ambiguous_fraction · n)`` ambiguous."""
    order = [envs[i] for i in rng.permutation(len(envs))]
    if n is not None and n > len(order):
        raise ValueError(f"asked for {n} rows but there are only {len(order)} environments: too few environments")
    n = len(order) if n is None else n
    want = round(ambiguous_fraction * n)
    rows: list[dict] = []
    for env in order:
        if len(rows) == n:
            break
        ambiguous = sum(r["ambiguous"] for r in rows) < want
        if not ambiguous and len(rows) - sum(r["ambiguous"] for r in rows) >= n - want:
            continue
        row = pick_states(environment_rows(env), ambiguous, rng)
        if row is not None:
            rows.append({**row, "ambiguous": ambiguous})
    if len(rows) < n:
        raise ValueError(
            f"only {len(rows)} of {n} rows with ambiguous fraction {ambiguous_fraction}: too few environments"
        )
    return rows


def build_train_set(
    out: str | Path,
    coco_annotations: str | Path | None = None,
    coco_images: str | Path | None = None,
    qd: str | Path | None = None,
    qd_exclude: list[str | Path] = (),
    num_coco: int | None = None,
    num_qd: int | None = None,
    ambiguous_fraction: float = 0.5,
    seed: int = 0,
    clip_model: str | None = None,
    settings: CropSettings | None = None,
) -> dict[str, Any]:
    """Write the training set (see the module docstring) and return its manifest."""
    if not 0.0 <= ambiguous_fraction <= 1.0:
        raise ValueError(f"ambiguous_fraction: must be in [0, 1], got {ambiguous_fraction}")
    if coco_annotations is None and qd is None:
        raise ValueError("nothing to build: give coco_annotations (with coco_images) and/or qd")
    out = Path(out)
    rng = np.random.default_rng(seed)
    rows: list[dict] = []
    manifest: dict[str, Any] = {"seed": seed, "ambiguous_fraction": ambiguous_fraction, "sources": {}}
    if coco_annotations is not None:
        if coco_images is None:
            raise ValueError("coco_images: required with coco_annotations (the folder file_name is relative to)")
        instances = json.loads(Path(coco_annotations).read_text())
        cats = instances["categories"]
        miner = NegativeMiner([c["name"] for c in cats], [c.get("supercategory", "") for c in cats], clip_model)
        records = coco_records(instances, miner, rng, settings)
        path = out / "coco2014_train_preprocessed.jsonl"
        out.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        envs = [COCOEnvironment(r, coco_images, file=str(path)) for r in records]
        coco_rows = sample_rows(envs, num_coco, ambiguous_fraction, rng)
        (out / "images" / "coco").mkdir(parents=True, exist_ok=True)
        for row in coco_rows:
            name = Path("images") / "coco" / f"{row['env_id']}_{row['step']}.png"
            Image.fromarray(np.ascontiguousarray(row["image"], dtype=np.uint8)).save(out / name)
            row["image"] = str(name)
        rows += coco_rows
        manifest["sources"]["COCO"] = {
            "single_object_images": len(records),
            "images": len(instances["images"]),
            "rows": len(coco_rows),
            "ambiguous": sum(r["ambiguous"] for r in coco_rows),
            "negatives": miner.method,
        }
    if qd is not None:
        records, dropped = quickdraw_records(qd, list(qd_exclude))
        data_dir = Path(qd).parent
        envs = [ProactiveBenchEnvironment(r, "QD", data_dir, load_images=False, file=str(qd)) for r in records]
        qd_rows = sample_rows(envs, num_qd, ambiguous_fraction, rng)
        for row in qd_rows:
            row["image"] = os.path.relpath(row["image"], out)
        rows += qd_rows
        manifest["sources"]["QD"] = {
            "records": len(records),
            "excluded_as_benchmark": dropped,
            "rows": len(qd_rows),
            "ambiguous": sum(r["ambiguous"] for r in qd_rows),
        }
    out.mkdir(parents=True, exist_ok=True)
    (out / "rows.jsonl").write_text("".join(json.dumps(_jsonable(r)) + "\n" for r in rows))
    manifest["rows"] = len(rows)
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    logger.info("wrote %d rows to %s: %s", len(rows), out / "rows.jsonl", manifest["sources"])
    return manifest


def _jsonable(row: dict) -> dict:
    return {k: (str(v) if isinstance(v, Path) else v) for k, v in row.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m proactive_rl.data.proactivebench.train_set", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--coco-annotations", help="COCO instances JSON (train split)")
    parser.add_argument("--coco-images", help="the folder the annotations' file_name is relative to")
    parser.add_argument("--qd", help="QuickDraw records in the authors' format (a training pool)")
    parser.add_argument(
        "--qd-exclude", nargs="*", default=[], help="benchmark QuickDraw JSONL: its drawings are dropped"
    )
    parser.add_argument("--num-coco", type=int, help="COCO rows (default: one per single-object image)")
    parser.add_argument("--num-qd", type=int, help="QuickDraw rows (default: one per record)")
    parser.add_argument("--ambiguous-fraction", type=float, default=0.5, help="fraction of ambiguous frames")
    parser.add_argument("--clip-model", help="CLIP model for hard negatives (default: the lexical fallback)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        manifest = build_train_set(
            args.out, args.coco_annotations, args.coco_images, args.qd, args.qd_exclude, args.num_coco,
            args.num_qd, args.ambiguous_fraction, args.seed, args.clip_model,
        )  # fmt: skip
    except (OSError, ValueError) as err:  # a missing annotation file or image folder, a bad fraction
        return report("train_set", err)
    print(json.dumps(manifest, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
