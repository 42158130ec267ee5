"""ProactiveBench JSONL records (docs/spec.md §6): the one schema and validator for MCQA environment records.

Both :func:`load_proactivebench` (the format reader) and
:class:`~proactive_eval.benchmarks.proactivebench.environments.ProactiveBenchEnvironment` validate records with :func:`parse_record`.

Fields (the authors' ``<dataset>_preprocessed.jsonl``, read by their ``environment.py``): ``id`` (an integer
in their data), ``image_template``, ``first_image``, ``num_images``, ``reference_image`` (optional), ``prompt``,
``options`` (the action choices), ``categories`` (the four category choices), ``answer`` (the correct category,
or its index in ``categories``). Any other field is kept in ``extra``; some datasets need one:

- MVP-N: ``valid_images`` (the image ids the object's rotation walks through, at least ``num_images``);
- ChangeIt: ``step_size`` and ``max_steps``;
- ImageNet-C: ``quality_answer`` (optional; the one option that fixes the corruption);
- coco2014: ``direction``, ``granularity``, ``horizontal_step``, ``vertical_step``, ``crop``.

``image_template`` takes the image index as the authors' named fields (``{image}``, zero-padded to 4 digits
for VSOD, MVP-N and QuickDraw; ``{level}``, the ImageNet-C corruption level; ``{informative}``, MVP-N's 0/1
flag for the informative last view), a positional ``{}`` / ``{:03d}``, or ``%d``. Only coco2014 (one image,
cropped) has a template without an index.

``first_image`` means what the dataset's environment makes of it: a position in ``0 .. num_images - 1`` for
ROD, VSOD, QuickDraw and ChangeIt; an image id (usually outside that range) for MVP-N; the starting corruption
level for ImageNet-C, which walks one level down per step, so it is at least ``num_images - 1`` (the authors
start at level 5 with ``num_images = 5``). ``reference_image`` is an image index like ``first_image`` in the
authors' data, or a path (relative to the file's folder) in exports that store one.

The dataset whose rules apply is the ``dataset`` argument, else the record's ``dataset_rule`` or ``dataset``
field, else the file name (``ImageNet-C_preprocessed.jsonl``), when one of them names a ProactiveBench dataset
(acronym or folder name); otherwise only the checks common to all datasets are made.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks.proactivebench.metric import DATASETS, dataset_key
from proactive_eval.predictions import atomic_write_text
from proactive_eval.records import EpisodeList, check_record, collect, integer, media_path, number, read_records, shown

FIELDS = (
    "id",
    "image_template",
    "first_image",
    "num_images",
    "reference_image",
    "prompt",
    "options",
    "categories",
    "answer",
)
REQUIRED = tuple(name for name in FIELDS if name != "reference_image")
#: The extra fields each dataset's environment reads (authors' ``environment.py``).
DATASET_FIELDS: dict[str, tuple[str, ...]] = {
    "MVP-N": ("valid_images",),
    "CIT": ("step_size", "max_steps"),
    "COCO": ("direction", "granularity", "horizontal_step", "vertical_step", "crop"),
}
#: Zero padding of ``{image}`` (the authors' ``str(image_id).zfill(4)``).
IMAGE_ZFILL = {"VSOD": 4, "MVP-N": 4, "QD": 4}
_INDEXED = ("ROD", "VSOD", "QD", "CIT")  # first_image is a position in 0 .. num_images - 1
#: Sanity bounds, far above the authors' data: image counts and steps (every environment loop is bounded by them),
#: image ids, and MS-COCO pixel offsets (a crop past them would allocate an absurd image).
MAX_IMAGES = 100_000
MAX_IMAGE_ID = 10**9
MAX_PIXELS = 100_000
# a format width or precision of 4+ digits ("{image:>99999999}", "%0999999d") would build a huge file name
_HUGE_WIDTH = re.compile(r"\{[^{}]*:[^{}]*\d{4,}[^{}]*\}|%[-+ #0]*\d{4,}|%[-+ #0]*\d*\.\d{4,}")


def fill_template(template: str, index: int, zfill: int = 0, informative: bool = False) -> str:
    """The image name for `index`: named (``{image}``, ``{level}``, ``{informative}``), ``{}`` or ``%d`` style.

    >>> fill_template("obj_{image}.png", 7, zfill=4), fill_template("{level}/x.JPEG", 3), fill_template("%02d.png", 5)
    ('obj_0007.png', '3/x.JPEG', '05.png')
    """
    if "{" in template:
        return template.format(index, image=str(index).zfill(zfill), level=index, informative=int(informative))
    if "%" in template:
        return template % index
    return template


@dataclass
class ProactiveBenchRecord:
    """One validated ProactiveBench record (see the module docstring).

    ``rule`` is the ProactiveBench dataset acronym whose rules the record was checked against (``ROD``, ``VSOD``,
    ``MVP-N``, ``IN-C``, ``QD``, ``CIT``, ``COCO``), or `None` when unknown.
    """

    id: str
    image_template: str
    first_image: int
    num_images: int
    prompt: str
    options: list[str]
    categories: list[str]
    answer: str
    reference_image: int | str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    base_dir: Path | None = field(default=None, compare=False, repr=False)
    rule: str | None = field(default=None, compare=False)

    def image_name(self, index: int, informative: bool = False) -> str:
        """The template filled for image `index` (relative, as in the record)."""
        return fill_template(self.image_template, index, IMAGE_ZFILL.get(self.rule, 0), informative)

    def image_path(self, index: int, informative: bool = False) -> Path:
        """The image at `index` (`informative` fills MVP-N's ``{informative}`` flag), resolved against `base_dir`."""
        return self._resolve(self.image_name(index, informative))

    def reference_path(self) -> Path | None:
        """The reference (unoccluded / clean) image: an index filled into the template, or a stored path."""
        if self.reference_image is None:
            return None
        if isinstance(self.reference_image, str):
            return self._resolve(self.reference_image)
        return self.image_path(self.reference_image, informative=True)  # the authors' reference view is informative

    def to_dict(self) -> dict[str, Any]:
        """The JSON record; a known `rule` is written as ``dataset_rule`` so a saved copy keeps it."""
        out = {name: getattr(self, name) for name in FIELDS}
        out.update(self.extra)
        if self.rule is not None and _rule(out.get("dataset_rule")) is None and _rule(out.get("dataset")) != self.rule:
            out["dataset_rule"] = self.rule
        return out

    def _resolve(self, name: str) -> Path:
        path = Path(name)
        return path if path.is_absolute() or self.base_dir is None else self.base_dir / path


def load_proactivebench(
    path: str | Path, on_error: str = "raise", dataset: str | None = None, data_dir: str | Path | None = None
) -> EpisodeList:
    """Read and validate ProactiveBench JSONL (or a JSON list) as `ProactiveBenchRecord` items.

    Args:
        path (`str` or `Path`): the file.
        on_error (`str`, *optional*, defaults to `"raise"`): ``"skip"`` drops bad records (listed in ``.skipped``).
        dataset (`str`, *optional*): the dataset (acronym or folder name) whose rules apply; by default read from
            each record or the file name (see the module docstring).
        data_dir (`str` or `Path`, *optional*): the folder the image templates are relative to; defaults to the
            file's folder.

    Raises:
        `EpisodeError`: naming the file, the record id and the field.
    """
    path = Path(path)
    return collect(
        read_records(path), path, lambda r, i: parse_record(r, path, dataset=dataset, base_dir=data_dir), on_error
    )


def save_proactivebench(path: str | Path, records: list[ProactiveBenchRecord]) -> None:
    """Write records as normalised JSONL (atomically)."""
    atomic_write_text(path, "".join(json.dumps(r.to_dict(), ensure_ascii=False) + "\n" for r in records))


def parse_record(
    record: Any, path: str | Path | None = None, dataset: str | None = None, base_dir: str | Path | None = None
) -> ProactiveBenchRecord:
    """Validate one record (see the module docstring); `EpisodeError` naming `path`, the record id and the field.

    Args:
        record (`dict`): the JSON record.
        path (`str` or `Path`, *optional*): the file it came from (errors name it; images resolve beside it).
        dataset (`str`, *optional*): the dataset whose rules apply (overrides the record's own field).
        base_dir (`str` or `Path`, *optional*): where images resolve; defaults to the file's folder.
    """
    file = str(path) if path is not None else None
    rid, fail = check_record(record, file, REQUIRED)
    if dataset is not None:
        rule = dataset_key(dataset)  # a ValueError listing the datasets when unknown
    else:
        names = (record.get("dataset_rule"), record.get("dataset"), _filename_dataset(path))
        rule = next((key for key in map(_rule, names) if key is not None), None)
    for name in DATASET_FIELDS.get(rule, ()):
        if name not in record:
            raise fail(name, f"missing, and {DATASETS[rule]} records need it")
    for name in ("image_template", "prompt"):
        if not isinstance(record[name], str) or not record[name]:
            raise fail(name, f"must be a non-empty string, got {shown(record[name])}")
    media_path(record["image_template"], lambda m: fail("image_template", m))
    for name in ("options", "categories"):
        value = record[name]
        if not isinstance(value, list) or not value or not all(isinstance(x, str) for x in value):
            raise fail(name, "must be a non-empty list of strings")
    num_images = integer(record["num_images"], lambda m: fail("num_images", m), low=1, high=MAX_IMAGES)
    first_image = integer(record["first_image"], lambda m: fail("first_image", m), high=MAX_IMAGE_ID)
    _check_first_image(first_image, num_images, rule, fail)
    answer, categories = record["answer"], record["categories"]
    if isinstance(answer, int) and not isinstance(answer, bool):
        if not 0 <= answer < len(categories):
            raise fail("answer", f"index {answer} out of range for {len(categories)} categories")
        answer = categories[answer]
    if not isinstance(answer, str) or answer not in categories:
        raise fail("answer", f"{shown(answer)} is not one of the categories {shown(categories)}")
    reference = record.get("reference_image")
    if isinstance(reference, str):
        media_path(reference, lambda m: fail("reference_image", m))
    elif reference is not None and not _is_index(reference):
        raise fail("reference_image", f"must be an image index, a path or null, got {shown(reference)}")
    _check_template(record["image_template"], rule, fail)
    _check_dataset_fields(record, rule, num_images, fail)
    return ProactiveBenchRecord(
        id=rid,
        image_template=record["image_template"],
        first_image=first_image,
        num_images=num_images,
        prompt=record["prompt"],
        options=list(record["options"]),
        categories=list(categories),
        answer=answer,
        reference_image=reference,
        extra={k: v for k, v in record.items() if k not in FIELDS},
        base_dir=Path(base_dir) if base_dir is not None else (Path(path).parent if path is not None else None),
        rule=rule,
    )


def _is_index(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_first_image(first: int, num_images: int, rule: str | None, fail) -> None:
    if rule in _INDEXED and first >= num_images:
        raise fail("first_image", f"{first} is not below num_images ({num_images})")
    if rule == "IN-C" and first < num_images - 1:
        raise fail(
            "first_image",
            f"ImageNet-C starts at a corruption level and goes one level down per step: level {first} cannot "
            f"last num_images ({num_images}) steps",
        )


def _check_template(template: str, rule: str | None, fail) -> None:
    zfill = IMAGE_ZFILL.get(rule, 0)
    if _HUGE_WIDTH.search(template):
        raise fail("image_template", f"{shown(template)} pads the image index to 1000+ characters")
    try:
        names = {fill_template(template, i, zfill) for i in (0, 1)}
    except (IndexError, KeyError, ValueError, TypeError) as err:
        raise fail(
            "image_template",
            f"{shown(template)} cannot be filled ({type(err).__name__}: {shown(str(err))}); use {{image}}, "
            "{level}, {informative}, a positional '{:05d}' or '%05d'",
        ) from None
    if len(names) == 1 and rule != "COCO":
        raise fail(
            "image_template", f"{shown(template)} takes no image index ('{{image}}', '{{:05d}}' or '%05d' style)"
        )


def _check_dataset_fields(record: dict, rule: str | None, num_images: int, fail) -> None:
    if rule == "MVP-N":
        valid = record["valid_images"]
        ids = isinstance(valid, list) and all(_is_index(v) and v <= MAX_IMAGE_ID for v in valid)
        if not ids or len(valid) < num_images:
            raise fail("valid_images", f"must list at least num_images ({num_images}) image ids")
    if rule == "CIT":
        for name in ("step_size", "max_steps"):
            integer(record[name], lambda m, n=name: fail(n, m), low=1, high=MAX_IMAGES)
    if rule == "IN-C" and "quality_answer" in record and record["quality_answer"] not in record["options"]:
        raise fail("quality_answer", f"{shown(record['quality_answer'])} is not one of the options")
    if rule == "COCO":
        _check_coco(record, fail)


def _check_coco(record: dict, fail) -> None:
    """The MS-COCO fields `proactive_eval.benchmarks.proactivebench.coco.COCOEnvironment` reads, within sane bounds."""
    integer(record["granularity"], lambda m: fail("granularity", m), low=1, high=1000)
    if not isinstance(record["direction"], str) or len(record["direction"]) > 20:
        raise fail("direction", f"must be a direction name (e.g. up_left, zoom), got {shown(record['direction'])}")
    crop = record["crop"]
    if not isinstance(crop, dict):
        raise fail("crop", f"must be an object, got {shown(crop)}")
    pixels = [("horizontal_step", record["horizontal_step"]), ("vertical_step", record["vertical_step"])]
    pixels += [(f"crop.{k}", v) for k, v in crop.items() if k in ("top", "left", "height", "width")]
    for name, value in pixels:
        if not 0 <= number(value, lambda m, n=name: fail(n, m)) <= MAX_PIXELS:
            raise fail(name, f"must be a pixel count in [0, {MAX_PIXELS}], got {shown(value)}")


def _rule(name: Any) -> str | None:
    """The dataset acronym for an acronym or the authors' folder name; `None` for anything else."""
    try:
        return dataset_key(name) if isinstance(name, str) else None
    except ValueError:
        return None


def _filename_dataset(path: str | Path | None) -> str | None:
    """The authors' files are ``<folder name>_preprocessed.jsonl``."""
    return Path(path).stem.removesuffix("_preprocessed") if path is not None else None
