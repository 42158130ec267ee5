"""ProactiveBench MCQA environments (docs/spec.md §6): the protocol, a runner, and data-driven image-sequence environments.

An environment is an MDP. ``reset()`` gives the first observation (image, question, options); ``step(answer)``
scores the answer with :func:`~proactive_eval.benchmarks.proactivebench.metric.proactivebench_outcome`: a correct
category ends the episode as a success, a valid proactive action moves the environment (the occluder one step,
one denoising level, one more stroke, ...), anything else ends it as a failure, and so does reaching
`max_steps`. :func:`run_environment` plays a policy through one environment; `proactivebench_summary` turns
outcomes into ``acc`` and ``ps``.

:class:`ProactiveBenchEnvironment` reads the authors' JSONL records and image folders, for the image-sequence
scenarios ROD, VSOD, MVP-N, ImageNet-C, QuickDraw and ChangeIt; the transitions follow the authors'
``environment.py``. Records are validated by :func:`proactive_eval.benchmarks.proactivebench.format.parse_record`, the
same schema `load_proactivebench` uses. MS-COCO environments crop one image instead of walking a sequence:
`proactive_eval.benchmarks.proactivebench.coco.COCOEnvironment`; `load_environments` and `make_environment` build either.
`load_environments` reads the paper's filtered benchmark by default (`proactive_eval.benchmarks.proactivebench.protocol`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from proactive_eval.benchmarks.proactivebench.coco import COCOEnvironment
from proactive_eval.benchmarks.proactivebench.format import ProactiveBenchRecord, parse_record
from proactive_eval.benchmarks.proactivebench.metric import classify_answer, dataset_key, proactivebench_summary
from proactive_eval.benchmarks.proactivebench.protocol import select_benchmark
from proactive_eval.benchmarks.proactivebench.types import MCQAObservation, StepResult
from proactive_eval.records import EpisodeError, EpisodeList, collect, read_records

#: What an empty environments file should hold (the CLIs' error for one, exit 2).
ENVIRONMENTS_FIX = "write the authors' <folder>_preprocessed.jsonl records, one JSON object per line (docs/spec.md §6)"

__all__ = [
    "DATASET_RULES",
    "EpisodeOutcome",
    "MCQAEnvironment",
    "MCQAObservation",
    "ProactiveBenchEnvironment",
    "StepResult",
    "load_environments",
    "make_environment",
    "mcqa_prompt",
    "proactivebench_summary",
    "run_environment",
]


@runtime_checkable
class MCQAEnvironment(Protocol):
    """The ProactiveBench MDP (docs/spec.md §6)."""

    id: str
    dataset: str
    max_steps: int

    def reset(self) -> MCQAObservation: ...

    def step(self, answer: str) -> StepResult: ...


@dataclass
class EpisodeOutcome:
    """One played environment: ``success`` (a correct category), ``turns`` answered, the answers and outcomes."""

    id: str
    success: bool
    turns: int
    answers: list[str] = field(default_factory=list)
    outcomes: list[str] = field(default_factory=list)


def mcqa_prompt(question: str, options: list[str], short_answer: bool = True) -> str:
    """The authors' multiple-choice template (``apply_multi_choice_template``).

    >>> print(mcqa_prompt("What is it?", ["Rotate the object.", "cat"]))
    What is it? Choose from the following options. Options:
    A. Rotate the object.
    B. cat
    Please only return one of the options without any other words.
    """
    text = question + " Choose from the following options. Options:\n"
    text += "".join(f"{chr(65 + i)}. {option}\n" for i, option in enumerate(options))
    return text + ("Please only return one of the options without any other words." if short_answer else "")


def run_environment(env: MCQAEnvironment, policy_fn: Callable[[MCQAObservation], str]) -> EpisodeOutcome:
    """Play `policy_fn` (observation → answer text) through `env` until it is done."""
    observation = env.reset()
    answers, outcomes = [], []
    while True:
        answer = policy_fn(observation)
        result = env.step(answer)
        answers.append(answer)
        outcomes.append(result.outcome)
        if result.done:
            return EpisodeOutcome(env.id, result.outcome == "correct", len(answers), answers, outcomes)
        if len(answers) >= env.max_steps:
            raise RuntimeError(f"environment {env.id!r} ({env.dataset}) did not stop after max_steps={env.max_steps}")
        observation = result.observation


@dataclass(frozen=True)
class DatasetRule:
    """How one ProactiveBench dataset walks its image sequence (authors' ``environment.py``)."""

    backward: tuple[str, ...] = ()  # action substrings that move back (others move forward)
    wrap: bool = False  # the sequence is circular (ROD, VSOD)
    category_at_first_step: bool = True  # ROD's first frame is fully occluded: a category there is wrong
    actions_at_last_step: bool = True  # MVP-N / IN-C / QD: on the last image only a category is valid
    pre_prompt: str = ""
    hint: str = ""


_VIDEO = "This is a frame extracted from a video. Answer the following question."
DATASET_RULES: dict[str, DatasetRule] = {
    "ROD": DatasetRule(
        backward=("to the left",),
        wrap=True,
        category_at_first_step=False,
        hint="Hint: moving the occluding object might reveal what is behind it.",
    ),
    "VSOD": DatasetRule(
        backward=("rewind the video",),
        wrap=True,
        pre_prompt=_VIDEO,
        hint="Hint: If there is an occlusion, waiting for it to disappear or rewinding the video might reveal "
        "what's behind it.",
    ),
    "MVP-N": DatasetRule(
        actions_at_last_step=False, hint="Hint: rotating the object could provide a more informative view."
    ),
    "IN-C": DatasetRule(
        actions_at_last_step=False, hint="Hint: enhancing the image quality could help with classification."
    ),
    "QD": DatasetRule(
        actions_at_last_step=False,
        hint="Hint: Adding more details to the quickdraw could help with classification.",
    ),
    "CIT": DatasetRule(
        backward=("rewind the video",),
        pre_prompt=_VIDEO,
        hint="Hint: If you cannot answer the question, waiting for it to appear or rewinding the video could help "
        "with classification.",
    ),
}


class ProactiveBenchEnvironment:
    """A data-driven ProactiveBench environment over one JSONL record and its image folder.

    Args:
        record (`dict` or `ProactiveBenchRecord`): the authors' record, validated for `dataset` by
            :func:`~proactive_eval.benchmarks.proactivebench.format.parse_record` (errors name `file`, the id and the field).
        dataset (`str`): ``ROD``, ``VSOD``, ``MVP-N``, ``IN-C``, ``QD`` or ``CIT`` (or the authors' folder name).
        data_dir (`str` or `Path`): the folder the image templates are relative to.
        hint (`bool`, *optional*, defaults to `False`): append the dataset's proactive hint to the question.
        load_images (`bool`, *optional*, defaults to `True`): decode images (PIL); `False` gives 1×1 placeholders.
        file (`str`, *optional*): the JSONL file, for error messages.

    Valid proactive actions are the options without "cannot" / "do not" (the abstentions), except for
    ImageNet-C where only the record's ``quality_answer`` fixes the corruption. A proactive action moves the
    image index: back for "to the left" / "rewind the video", forward otherwise (by ``step_size`` in ChangeIt;
    through ``valid_images`` in MVP-N; one corruption level down in ImageNet-C).
    """

    def __init__(
        self,
        record: dict[str, Any] | ProactiveBenchRecord,
        dataset: str,
        data_dir: str | Path,
        hint: bool = False,
        load_images: bool = True,
        file: str | None = None,
    ):
        self.dataset = _sequence_dataset(dataset)
        self.rule = DATASET_RULES[self.dataset]
        self.data_dir, self.load_images, self.file = Path(data_dir), load_images, file
        if isinstance(record, ProactiveBenchRecord):
            record = record.to_dict()
        self.record = parse_record(record, file, dataset=self.dataset, base_dir=self.data_dir)
        self.id = self.record.id
        self.options, self.categories = list(self.record.options), list(self.record.categories)
        self.answer = self.record.answer
        self.num_images = self.record.num_images
        extra = self.record.extra
        # Only ChangeIt jumps by step_size and has its own max_steps (validated by parse_record for CIT).
        self.step_size = extra["step_size"] if self.dataset == "CIT" else 1
        self.max_steps = extra["max_steps"] if self.dataset == "CIT" else self.num_images
        parts = [self.rule.pre_prompt, self.record.prompt, self.rule.hint if hint else ""]
        self.prompt = " ".join(p for p in parts if p)
        if self.dataset == "IN-C" and "quality_answer" in extra:
            self._valid = [extra["quality_answer"]]
        else:
            self._valid = [o for o in self.options if "cannot" not in o.lower() and "do not" not in o.lower()]
        self.reset()

    def reset(self) -> MCQAObservation:
        self.image_id, self.turns, self.done = self.record.first_image, 0, False
        return self._observe()

    def step(self, answer: str) -> StepResult:
        if self.done:
            raise RuntimeError(f"environment {self.id!r} is done; call reset()")
        actions, valid = self._actions(), self._valid_actions()
        answer_category = self.answer if (self.turns > 0 or self.rule.category_at_first_step) else None
        outcome, index = classify_answer(answer, actions, valid, self.categories, answer_category)
        self.turns += 1
        # The authors stop after max_steps turns whatever the answer; a correct one still counts.
        self.done = outcome != "proactive" or self.turns >= self.max_steps
        if self.done:
            return StepResult(None, outcome, True)
        self._move(actions[index])
        return StepResult(self._observe(), outcome, False)

    # --- state -------------------------------------------------------------------------------------------

    def _last_step(self) -> bool:
        return self.turns + 1 == self.num_images

    def _actions(self) -> list[str]:
        """The action options shown now (ChangeIt hides moves past either end of the video)."""
        options = list(self.options)
        if self.dataset == "CIT":
            if self.image_id - self.step_size < 0:
                options = [o for o in options if o != "Rewind the video."]
            elif self.image_id + self.step_size >= self.num_images:
                waits = [o for o in options if "Wait for the" in o]
                options = [o for o in options if o not in waits[:1]]
        return options

    def _valid_actions(self) -> list[str]:
        if not self.rule.actions_at_last_step and self._last_step():
            return []
        shown = set(self._actions())
        return [a for a in self._valid if a in shown]

    def _move(self, action: str) -> None:
        text = action.lower()
        if self.dataset == "MVP-N":
            self.image_id = int(self.record.extra["valid_images"][self.turns])
            return
        if self.dataset == "IN-C":
            self.image_id -= 1
            return
        sign = -1 if any(key in text for key in self.rule.backward) else 1
        image_id = self.image_id + sign * self.step_size
        self.image_id = image_id % self.num_images if self.rule.wrap else image_id

    def _observe(self) -> MCQAObservation:
        # MVP-N's template flags the last (informative) view, as the authors' ``_get_relative_image_path``.
        path = self.record.image_path(self.image_id, informative=self._last_step())
        image = _load_image(path, self.id, self.file) if self.load_images else np.zeros((1, 1, 3), np.uint8)
        actions = self._actions()
        return MCQAObservation(
            image, self.prompt, actions + self.categories, self._valid_actions(), self.turns, str(path)
        )


def make_environment(
    record: dict[str, Any] | ProactiveBenchRecord,
    dataset: str,
    data_dir: str | Path,
    hint: bool = False,
    load_images: bool = True,
    file: str | None = None,
) -> MCQAEnvironment:
    """The environment of one record: `COCOEnvironment` for MS-COCO, `ProactiveBenchEnvironment` otherwise."""
    if dataset_key(dataset) == "COCO":
        return COCOEnvironment(record, data_dir, hint=hint, load_images=load_images, file=file)
    return ProactiveBenchEnvironment(record, dataset, data_dir, hint, load_images, file)


def load_environments(
    path: str | Path,
    dataset: str,
    data_dir: str | Path | None = None,
    hint: bool = False,
    load_images: bool = True,
    on_error: str = "raise",
    protocol: str = "filtered",
    skip: dict[str, Any] | None = None,
) -> EpisodeList:
    """One environment per benchmark record of a ProactiveBench JSONL file (``<dataset>_preprocessed.jsonl``).

    Args:
        path (`str` or `Path`): the JSONL file (or a JSON list).
        dataset (`str`): the dataset acronym or folder name (``ROD`` .. ``CIT``, or ``COCO``).
        data_dir (`str` or `Path`, *optional*): the image root; defaults to the file's folder.
        hint, load_images: as in :class:`ProactiveBenchEnvironment`.
        on_error (`str`, *optional*, defaults to `"raise"`): ``"skip"`` drops bad records (listed in ``.skipped``).
        protocol (`str`, *optional*, defaults to `"filtered"`): the paper's filtered benchmark (Table 1), or
            ``"unfiltered"`` (Table 4); see `proactive_eval.benchmarks.proactivebench.protocol`.
        skip (`dict`, *optional*): the authors' skip arguments (default ``{"strong_occlusions": False}``).

    Returns:
        `EpisodeList` of environments (a list; ``.skipped`` holds the errors of skipped records, ``.selection``
        the protocol's counts: records in the file, skipped, filtered out).
    """
    path = Path(path)
    key = dataset_key(dataset)
    if key != "COCO":
        _sequence_dataset(dataset)  # fail on a bad dataset before reading anything
    root = data_dir if data_dir is not None else path.parent
    selection = select_benchmark(read_records(path), key, protocol, skip)
    if selection.in_file and not selection.records and selection.filtered_out:
        raise EpisodeError(
            f"the {protocol} ProactiveBench keeps none of its {selection.in_file} records: their ids are not the "
            f"benchmark's {key} ids; for other data (e.g. synthetic exports) pass protocol='unfiltered'",
            file=str(path),
        )

    def make(record: Any, index: int) -> MCQAEnvironment:
        return make_environment(record, key, root, hint, load_images, file=str(path))

    envs = collect(selection.records, path, make, on_error)
    selection.records = []
    envs.selection = selection
    return envs


def _sequence_dataset(dataset: str) -> str:
    key = dataset_key(dataset)
    if key not in DATASET_RULES:
        raise ValueError(f"{key}: not an image-sequence environment; supported: {', '.join(DATASET_RULES)}")
    return key


def _load_image(path: Path, env_id: str, file: str | None = None) -> np.ndarray:
    # deferred: optional extra
    try:
        from PIL import Image
    except ImportError as err:  # pragma: no cover - pillow is a declared extra
        raise ImportError("reading ProactiveBench images needs Pillow: pip install 'proactive-eval[video]'") from err
    try:
        with Image.open(path) as image:
            return np.asarray(image.convert("RGB"))
    except (OSError, ValueError) as err:
        raise EpisodeError(
            f"cannot read image {path}: {err}", file=file, record=env_id, field="image_template"
        ) from None
