"""The MS-COCO ProactiveBench environment: camera moves over one image (docs/spec.md §6; ProactiveBench App. A.7).

The first image is a crop of a single-object MS-COCO picture that hides part of the object. The record says
which way the rest lies (``direction``): a cardinal one (``up``, ``down``, ``left``, ``right``: one valid
suggestion), an ordinal one (two joined by ``_``, e.g. ``up_left``: two valid suggestions, one per axis) or
``zoom`` ("Move farther from the object."). Each valid suggestion widens the crop by one more step on its axis,
until the axis has made its ``granularity`` steps (3 to 5), when its suggestion disappears from the options.

Record fields (the authors' ``coco2014_preprocessed.jsonl``, read by their ``COCO2014Environment``): the common
ones (``image_template`` is the image's path, ``first_image`` / ``num_images`` unused), and ``direction``,
``granularity``, ``horizontal_step`` / ``vertical_step`` (pixels per step; the first view is already one step
out) and ``crop`` (``top``, ``left``, ``height``, ``width``: for a direction ``height`` / ``width`` are the
bottom / right edges of the crop box, for ``zoom`` its height and width). Transitions follow the authors' code
exactly (float arithmetic included): after ``k`` moves on an axis its step is ``(k + 1) · step₀``, and the
box is ``(left, top, right, bottom)`` = the crop pushed out by the steps of the moving sides.

The environment allows ``granularity`` turns for a cardinal direction, ``2 · granularity`` for an ordinal one
and ``granularity + 1`` for ``zoom``, so the oracle (`oracle_answer`) makes ``steps_needed`` moves —
``granularity - 1`` per moving axis, or ``granularity`` zooms — and then names the category.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np

from proactive_eval.benchmarks.proactivebench.format import ProactiveBenchRecord, parse_record
from proactive_eval.benchmarks.proactivebench.metric import classify_answer
from proactive_eval.benchmarks.proactivebench.types import MCQAObservation, StepResult
from proactive_eval.records import EpisodeError, number

ZOOM_OPTION = "Move farther from the object."
MOVE_OPTIONS = {
    "left": "Move the camera to the left.",
    "right": "Move the camera to the right.",
    "up": "Move the camera up.",
    "down": "Move the camera down.",
}
#: The authors' ``action_map`` keys for these moves, in their order (the first key found in the option wins).
ACTION_KEYS = (("to the left", "left"), ("to the right", "right"), ("up", "up"), ("down", "down"), ("farther", "zoom"))
HINTS = {
    "move": "Hint: moving the camera could help with classification.",
    "zoom": "Hint: zooming out could help with classification.",
}
CROP_KEYS = ("top", "left", "height", "width")


def is_abstention(option: str) -> bool:
    """The authors' rule: an option with "cannot" or "do not" abstains; every other action option is valid."""
    return "cannot" in option.lower() or "do not" in option.lower()


class COCOEnvironment:
    """One MS-COCO record as an MCQA environment (implements `proactive_eval.benchmarks.proactivebench.environments.MCQAEnvironment`).

    Args:
        record (`dict` or `ProactiveBenchRecord`): the authors' record (validated; errors name `file`, id, field).
        data_dir (`str` or `Path`): the folder ``image_template`` is relative to.
        hint (`bool`, *optional*, defaults to `False`): append the camera / zoom hint to the question.
        load_images (`bool`, *optional*, defaults to `True`): crop the image (PIL); `False` gives 1×1 placeholders.
        file (`str`, *optional*): the JSONL file, for error messages.
    """

    dataset = "COCO"

    def __init__(
        self,
        record: dict[str, Any] | ProactiveBenchRecord,
        data_dir: str | Path,
        hint: bool = False,
        load_images: bool = True,
        file: str | None = None,
    ):
        if isinstance(record, ProactiveBenchRecord):
            record = record.to_dict()
        self.data_dir, self.load_images, self.file = Path(data_dir), load_images, file
        self.record = parse_record(record, file, dataset="COCO", base_dir=self.data_dir)
        self.id, extra = self.record.id, self.record.extra
        fail = lambda name, message: EpisodeError(message, file=file, record=self.id, field=name)  # noqa: E731
        self.direction = _direction(extra["direction"], fail)
        self.granularity = int(extra["granularity"])
        self.h0 = number(extra["horizontal_step"], lambda m: fail("horizontal_step", m))
        self.v0 = number(extra["vertical_step"], lambda m: fail("vertical_step", m))
        crop = extra["crop"]
        missing = [k for k in CROP_KEYS if k not in crop]
        if missing:
            raise fail("crop", f"missing {missing} (present: {sorted(crop)})")
        self.crop = {k: number(crop[k], lambda m, k=k: fail(f"crop.{k}", m)) for k in CROP_KEYS}
        self.options, self.categories = list(self.record.options), list(self.record.categories)
        self.answer = self.record.answer
        g = self.granularity
        zoom = self.direction == "zoom"
        self.axes = {"h", "v"} if zoom else {"h" for d in ("left", "right") if d in self.direction}
        if not zoom:
            self.axes |= {"v" for d in ("up", "down") if d in self.direction}
        self.max_steps = g + 1 if zoom else (g if "_" not in self.direction else 2 * g)
        scale = g + 1 if zoom else g
        self.max_h = self.h0 * scale if "h" in self.axes else 0
        self.max_v = self.v0 * scale if "v" in self.axes else 0
        #: Valid moves from the first view to the full one (the oracle's ps).
        self.steps_needed = g if zoom else len(self.axes) * (g - 1)
        self.hint = HINTS["zoom" if zoom else "move"]
        self.prompt = f"{self.record.prompt} {self.hint}" if hint else self.record.prompt
        self.reset()

    # --- the MDP ------------------------------------------------------------------------------------------

    def reset(self) -> MCQAObservation:
        self.h, self.v, self.turns_h, self.turns_v, self.turns, self.done = self.h0, self.v0, 0, 0, 0, False
        return self._observe()

    def step(self, answer: str) -> StepResult:
        if self.done:
            raise RuntimeError(f"environment {self.id!r} is done; call reset()")
        actions = self.shown_options()
        outcome, index = classify_answer(answer, actions, self.valid_actions(), self.categories, self.answer)
        self.turns += 1
        self.done = outcome != "proactive" or self.turns >= self.max_steps  # the authors' _check_max_steps
        if self.done:
            return StepResult(None, outcome, True)
        self._move(actions[index])
        return StepResult(self._observe(), outcome, False)

    def shown_options(self) -> list[str]:
        """The action options now: a move whose axis has made all its steps is removed (``_get_valid_options``)."""
        options = list(self.options)
        if self.direction == "zoom":
            if self.h == self.max_h:
                options = [o for o in options if o != ZOOM_OPTION]
            return options
        gone = set()
        if self.h >= self.max_h:
            gone |= {MOVE_OPTIONS["left"], MOVE_OPTIONS["right"]}
        if self.v >= self.max_v:
            gone |= {MOVE_OPTIONS["up"], MOVE_OPTIONS["down"]}
        return [o for o in options if o not in gone]

    def valid_actions(self) -> list[str]:
        """The shown options that are proactive suggestions (not abstentions)."""
        return [o for o in self.shown_options() if not is_abstention(o)]

    def oracle_answer(self, observation: MCQAObservation | None = None) -> str:
        """A move while one is left (the full view needs them all), then the category."""
        valid = self.valid_actions()
        return valid[0] if valid else self.answer

    def crop_box(self) -> tuple[float, float, float, float]:
        """The current view as a PIL box ``(left, top, right, bottom)`` (the authors' ``_get_transform``)."""
        c, d, zoom = self.crop, self.direction, self.direction == "zoom"
        top = c["top"] - self.v if ("up" in d or zoom) else c["top"]
        left = c["left"] - self.h if ("left" in d or zoom) else c["left"]
        bottom = c["height"] + self.v if ("down" in d or zoom) else c["height"]
        right = c["width"] + self.h if ("right" in d or zoom) else c["width"]
        if zoom:
            bottom += c["top"]
            right += c["left"]
        return left, top, right, bottom

    # --- internals ----------------------------------------------------------------------------------------

    def _move(self, option: str) -> None:
        text = option.lower()
        allowed = {"zoom"} if self.direction == "zoom" else {m for m in MOVE_OPTIONS if m in self.direction}
        move = next((m for key, m in ACTION_KEYS if m in allowed and key in text), None)
        if move is None:  # a valid option always names its move; this guards a record whose options do not
            raise EpisodeError(f"option {option!r} names no move of direction {self.direction!r}", record=self.id)
        # The authors' float arithmetic, kept as is so that removals (``>=`` / ``==``) match theirs exactly.
        if move in ("left", "right", "zoom"):
            self.turns_h += 1
            self.h = self.h / self.turns_h * (self.turns_h + 1)
        if move in ("up", "down", "zoom"):
            self.turns_v += 1
            self.v = self.v / self.turns_v * (self.turns_v + 1)

    def _observe(self) -> MCQAObservation:
        path = self.record.image_path(0)
        image = self._image(path) if self.load_images else np.zeros((1, 1, 3), np.uint8)
        actions = self.shown_options()
        return MCQAObservation(
            image, self.prompt, actions + self.categories, self.valid_actions(), self.turns, str(path)
        )

    def _image(self, path: Path) -> np.ndarray:
        # deferred: optional extra
        try:
            from PIL import Image
        except ImportError as err:  # pragma: no cover - pillow is a declared extra
            raise ImportError("reading MS-COCO images needs Pillow: pip install 'proactive-eval[video]'") from err
        try:
            with Image.open(path) as image:
                return np.asarray(image.convert("RGB").crop(self.crop_box()))
        except (OSError, ValueError) as err:
            raise EpisodeError(
                f"cannot read image {path}: {err}", file=self.file, record=self.id, field="image_template"
            ) from None

    def __deepcopy__(self, memo):
        clone = copy.copy(self)
        clone.crop = dict(self.crop)
        return clone


def _direction(value: Any, fail) -> str:
    parts = value.split("_") if isinstance(value, str) else []
    ok = value == "zoom" or (
        1 <= len(parts) <= 2
        and all(p in MOVE_OPTIONS for p in parts)
        and len({p in ("up", "down") for p in parts}) == len(parts)
    )
    if not ok:
        raise fail(
            "direction",
            f"expected zoom, a cardinal direction (up, down, left, right) or an ordinal one (e.g. up_left), got {value!r}",
        )
    return value
