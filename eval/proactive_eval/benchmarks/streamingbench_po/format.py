"""StreamingBench Proactive Output question files (``questions_proactive.json``) as downloaded (docs/streamingbench.md).

The file is a JSON list of videos, each with its questions::

    {"time": "[0:00:00 - 0:00:30]", "video_categories": "basketball", "video_path": "./videos/sample_17_proactive.mp4",
     "questions": [{"task_type": "Proactive Output", "question": "When the scoreboard shows 3 points for USA,
     output \\"3\\".", "time_stamp": "00:00:20", "ground_truth_time_stamp": "00:00:29", "ground_truth_output": "3",
     "required_ability": "working memory"}]}

A question is asked at ``time_stamp``; the model should say ``ground_truth_output`` at ``ground_truth_time_stamp``
(``H:MM:SS``). The official protocol polls once a second from ``time_stamp + 1`` to ``ground_truth + 4`` on the clip
``[time_stamp, poll]`` and asks the question itself after the first "yes". Videos resolve under ``video_root`` by
the file's ``video_path`` (``./videos/sample_<N>_proactive.mp4``), or by its file name alone. `check_po_entries`
checks every field's type before anything reads it, and refuses a time stamp past 24 h (`parse_stamp`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks.streamingbench_po.metric import POLL_AFTER_GROUND_TRUTH, hms_seconds
from proactive_eval.common.stream_files import MAX_SECONDS, other_benchmark, path_text, read_json, shown
from proactive_eval.records import EpisodeError, is_file

#: The keys of an official question; any other key of a question is a model's output (its name).
QUESTION_KEYS = frozenset(
    ("task_type", "question", "time_stamp", "ground_truth_time_stamp", "ground_truth_output", "required_ability")
)

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
    return full if is_file(full) or not is_file(root / path.name) else root / path.name


def parse_stamp(text: Any) -> int | None:
    """Seconds of an annotation's ``H:MM:SS`` (or ``MM:SS``, ``SS``) time stamp, or None unless its fields are
    digits and it lies within `MAX_SECONDS` (24 h): a longer stamp is a typo, and the blind floor and the polls
    run over every second of it.

    Example:
        >>> parse_stamp("00:10:25"), parse_stamp("9999999:00:00"), parse_stamp("-1")
        (625, None, None)
    """
    if not isinstance(text, str) or len(text) > 32:
        return None
    parts = text.strip().split(":")
    if len(parts) > 3 or not all(p.isascii() and p.isdigit() for p in parts):
        return None
    value = hms_seconds(text.strip())
    return value if value <= MAX_SECONDS else None


def check_po_entries(entries: Any, file: str) -> list[tuple[int, int, dict, int, int]]:
    """Check a question file's `entries` before anything reads them; ``(entry, index, question, start, due)`` of
    every question, times in seconds.

    Raises:
        `EpisodeError`: naming the file, the entry and the field; a file of the other benchmark is named.
    """
    kind = other_benchmark(entries)
    if not isinstance(entries, list) or (kind and kind != "a StreamingBench file"):
        hint = f"; this looks like {kind}: use --benchmark ovo_bench (type: ovo_bench in a recipe)" if kind else ""
        raise EpisodeError(f"expected a JSON list of entries with 'questions' (questions_proactive.json){hint}",
                           file=file)  # fmt: skip
    if not entries:
        raise EpisodeError("holds no entries", file=file)
    out = []
    for e, entry in enumerate(entries):
        where = f"entry {e}"
        if not isinstance(entry, dict) or not isinstance(entry.get("questions"), list):
            raise EpisodeError("must be an object with a list of questions", file=file, record=where)
        if not path_text(entry.get("video_path")):
            raise EpisodeError("missing or not a path", file=file, record=where, field="video_path")
        for q, question in enumerate(entry["questions"]):
            fld = f"questions[{q}]"
            if not isinstance(question, dict):
                raise EpisodeError("must be an object", file=file, record=where, field=fld)
            for key in ("question", "time_stamp", "ground_truth_time_stamp", "ground_truth_output", "task_type"):
                if not isinstance(question.get(key), str):
                    raise EpisodeError("missing or not a string", file=file, record=where, field=f"{fld}.{key}")
            times = []
            for key in ("time_stamp", "ground_truth_time_stamp"):
                times.append(parse_stamp(question[key]))
                if times[-1] is None:
                    raise EpisodeError(
                        f"expected H:MM:SS within 24 h, got {shown(question[key])!r}",
                        file=file, record=where, field=f"{fld}.{key}",
                    )  # fmt: skip
            out.append((e, q, question, times[0], times[1]))
    return out


def load_streamingbench_po(path: str | Path, video_root: str | Path | None = None) -> StreamingBenchPO:
    """Read a StreamingBench proactive question file as downloaded.

    Args:
        path (`str` or `Path`): ``questions_proactive.json`` (or ``_50``), or a results file of the same shape.
        video_root (`str` or `Path`, *optional*): the folder ``video_path`` is relative to (the authors' ``src/``
            with its ``videos/``, or the videos themselves); defaults to the file's folder.

    Raises:
        `InputError`: the file cannot be read as JSON (`proactive_eval.common.stream_files.read_json`).
        `EpisodeError`: naming the file, the entry and the field (`check_po_entries`).
    """
    path = Path(path)
    root = Path(video_root) if video_root is not None else path.parent
    entries = read_json(path, "annotations")
    checked = check_po_entries(entries, shown(path))
    videos = [resolve_video(entry["video_path"], root) for entry in entries]
    missing = list(dict.fromkeys(str(v) for v in videos if not is_file(v)))
    questions = [POQuestion(e, q, videos[e], question, start, truth) for e, q, question, start, truth in checked]
    return StreamingBenchPO(entries, questions, missing)
