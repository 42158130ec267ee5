"""StreamingBench Proactive Output question files (``questions_proactive.json``) as downloaded (docs/streamingbench.md).

The file is a JSON list of videos, each with its questions::

    {"time": "[0:00:00 - 0:00:30]", "video_categories": "basketball", "video_path": "./videos/sample_17_proactive.mp4",
     "questions": [{"task_type": "Proactive Output", "question": "When the scoreboard shows 3 points for USA,
     output \\"3\\".", "time_stamp": "00:00:20", "ground_truth_time_stamp": "00:00:29", "ground_truth_output": "3",
     "required_ability": "working memory"}]}

A question is asked at ``time_stamp``; the model should say ``ground_truth_output`` at ``ground_truth_time_stamp``
(``H:MM:SS``). The official protocol polls once a second from ``time_stamp + 1`` to ``ground_truth + 4`` on the clip
``[time_stamp, poll]`` and asks the question itself after the first "yes". Videos resolve under ``video_root`` by
the file's ``video_path`` (``./videos/sample_<N>_proactive.mp4``), or by its file name alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proactive_eval.metrics.streamingbench import hms_seconds
from proactive_eval.records import EpisodeError, read_records

#: The keys of an official question; any other key of a question is a model's output (its name).
QUESTION_KEYS = frozenset(
    ("task_type", "question", "time_stamp", "ground_truth_time_stamp", "ground_truth_output", "required_ability")
)
POLL_AFTER_GROUND_TRUTH = 4  # the last poll is at ground truth + 4 s

# The authors' prompt (StreamingBenchProactive.py), character for character.
PROACTIVE_TEMPLATE = """You are an advanced image question-answering AI assistant. You have been provided with images and a question related to the images. Your task is to carefully analyze the images and provide the answer to the question. You need to carefully confirm whether the images content meet the conditions of the question, and then output the correct content.

Question: {}

The answer is:
"""  # noqa: E501


def poll_query(question: dict) -> str:
    """The official yes/no query of a poll (its user turn; the prompt wraps it in `PROACTIVE_TEMPLATE`)."""
    return (
        f'{question["question"]} Is it the right time to output "{question["ground_truth_output"]}"? '
        "You can only answer yes or no."
    )


def said_yes(response: Any) -> bool:
    """The official test that a poll's answer is "yes": ``'yes'`` anywhere in the lowered text."""
    return isinstance(response, str) and "yes" in response.strip().lower()


@dataclass
class POQuestion:
    """One Proactive Output question, located in the file (``entry``, ``index``) so results can be written back."""

    entry: int
    index: int
    video: Path
    question: dict
    start: int
    ground_truth: int

    @property
    def polls(self) -> list[int]:
        """The official poll times: ``start + 1`` … ``ground_truth + 4`` (empty when the window is empty)."""
        return list(range(self.start + 1, self.ground_truth + POLL_AFTER_GROUND_TRUTH + 1))


@dataclass
class StreamingBenchPO:
    """Loaded question file: the entries unchanged (results are written into copies) and the flat questions."""

    entries: list[dict]
    questions: list[POQuestion]
    missing: list[str] = field(default_factory=list)


def resolve_video(video_path: str, root: Path) -> Path:
    """``video_path`` under `root` (a leading ``./`` dropped); when absent there, its file name under `root`."""
    path = Path(video_path)
    if path.is_absolute():
        return path
    full = root / path
    return full if full.is_file() or not (root / path.name).is_file() else root / path.name


def load_streamingbench_po(path: str | Path, video_root: str | Path | None = None) -> StreamingBenchPO:
    """Read a StreamingBench proactive question file as downloaded.

    Args:
        path (`str` or `Path`): ``questions_proactive.json`` (or ``_50``), or a results file of the same shape.
        video_root (`str` or `Path`, *optional*): the folder ``video_path`` is relative to (the authors' ``src/``
            with its ``videos/``, or the videos themselves); defaults to the file's folder.

    Raises:
        `EpisodeError`: naming the file, the entry and the field.
    """
    path = Path(path)
    file = str(path)
    root = Path(video_root) if video_root is not None else path.parent
    entries = read_records(path)
    questions, missing = [], []
    for e, entry in enumerate(entries):
        where = f"entry {e}"
        if not isinstance(entry, dict) or not isinstance(entry.get("questions"), list):
            raise EpisodeError("must be an object with a list of questions", file=file, record=where)
        if not isinstance(entry.get("video_path"), str):
            raise EpisodeError("missing or not a string", file=file, record=where, field="video_path")
        video = resolve_video(entry["video_path"], root)
        if not video.is_file() and str(video) not in missing:
            missing.append(str(video))
        for q, question in enumerate(entry["questions"]):
            fld = f"questions[{q}]"
            for key in ("question", "time_stamp", "ground_truth_time_stamp", "ground_truth_output", "task_type"):
                if not isinstance(question, dict) or not isinstance(question.get(key), str):
                    raise EpisodeError("missing or not a string", file=file, record=where, field=f"{fld}.{key}")
            try:
                start, truth = hms_seconds(question["time_stamp"]), hms_seconds(question["ground_truth_time_stamp"])
            except ValueError:
                raise EpisodeError("expected H:MM:SS", file=file, record=where, field=f"{fld}.time_stamp") from None
            questions.append(POQuestion(e, q, video, question, start, truth))
    return StreamingBenchPO(entries, questions, missing)


def model_keys(entries: list[dict]) -> list[str]:
    """The model names in a results file: the keys of its questions that are not official fields, in order."""
    keys: dict[str, None] = {}
    for entry in entries:
        for question in entry.get("questions", []) if isinstance(entry, dict) else []:
            if isinstance(question, dict):
                keys.update((k, None) for k in question if k not in QUESTION_KEYS)
    return list(keys)
