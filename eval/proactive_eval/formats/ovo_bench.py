"""OVO-Bench annotations (``ovo_bench_new.json``) as downloaded, and the official prompts (docs/ovo_bench.md).

The file is one JSON list. A backward-tracing or real-time record is a multiple-choice question about the video up
to ``realtime`` seconds::

    {"id": 0, "task": "EPM", "video": "Ego4D/clips/x.mp4", "realtime": 215, "question": "...",
     "options": ["...", "..."], "gt": 2, "answer": "..."}

A forward-active-responding record (REC / SSR / CRR) holds probes in ``test_info``, each asked on the video up to
its ``realtime``: REC probes carry the ``count`` so far, SSR probes a ``step`` and ``type`` (1: being performed),
CRR probes a ``type`` (1: the clue has been shown; the record's ``question``, ``ask_time``, ``clue_time``).

Videos resolve by the official naming under ``video_root``: the source video is ``{video}``; the authors' pre-cut
clips are ``{id}.mp4`` (multiple choice) and ``{id}_{probe}.mp4`` (forward probes) under ``chunked_root``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proactive_eval.records import EpisodeError, read_records

BACKWARD_TASKS = ("EPM", "ASI", "HLD")
REALTIME_TASKS = ("OCR", "ACR", "ATR", "STU", "FPD", "OJR")
FORWARD_TASKS = ("REC", "SSR", "CRR")
CATEGORIES = {"backward": BACKWARD_TASKS, "realtime": REALTIME_TASKS, "forward": FORWARD_TASKS}

# The authors' prompts (their constant.py), character for character: the official protocol must send these.
MC_TEMPLATE = """
Question: {}
Options:
{}

Respond only with the letter corresponding to your chosen option (e.g., A, B, C). 
Do not include any additional text or explanation in your response.
"""  # noqa: W291 - the trailing space is the authors'
REC_TEMPLATE = """
You're watching a video in which people may perform a certain type of action repetively. 
The person performing this kind of action are referred to as 'they' in the following statement.
You're task is to count how many times have different people in the video perform this kind of action in total.
One complete motion counts as one. 
Now, answer the following question: {}
Provide your answer as a single number (e.g., 0, 1, 2, 3…) indicating the total count.
Do not include any additional text or explanation in your response.
"""  # noqa: W291
SSR_TEMPLATE = """
You're watching a tutorial video which contain a sequential of steps. 
The following is one step from the whole procedures: 
{}
Your task is to determine if the man or woman in the video is currently performing this step.
Answer only with “Yes” or “No”.
Do not include any additional text or explanation in your response.
"""  # noqa: W291
CRR_TEMPLATE = """
You're responsible of answering questions based on the video content. 
The following question are relevant to the latest frames, i.e. the end of the video.
{}
Decide whether existing visual content, especially latest frames, i.e. frames that near the end of the video, provide enough information for answering the question.
Answer only with “Yes” or “No”.
Do not include any additional text or explanation in your response.
"""  # noqa: W291, E501


def category_of(task: str) -> str | None:
    """``backward``, ``realtime`` or ``forward`` for an OVO-Bench task name, else None."""
    return next((name for name, tasks in CATEGORIES.items() if task in tasks), None)


def ovo_prompt(record: dict, probe: int | None = None) -> str:
    """The official prompt of a multiple-choice `record`, or of forward probe `probe` of a forward record."""
    task = record["task"]
    if task in FORWARD_TASKS:
        if task == "REC":
            return REC_TEMPLATE.format("How many times did they " + record["activity"] + "?")
        if task == "SSR":
            return SSR_TEMPLATE.format(record["test_info"][probe]["step"])
        return CRR_TEMPLATE.format(record["question"])
    options = "; ".join(f"{chr(65 + i)}. {option}" for i, option in enumerate(record["options"])) + ";"
    return MC_TEMPLATE.format(record["question"], options)


@dataclass
class OVOBench:
    """Loaded OVO-Bench annotations.

    Args:
        records (`list[dict]`): the file's records, unchanged, in its order (results are written from copies).
        video_root (`Path`): where ``{video}`` resolves.
        chunked_root (`Path`, *optional*): where the authors' pre-cut clips are.
        missing (`list[str]`): the source videos that are not there (each named once).
    """

    records: list[dict]
    video_root: Path
    chunked_root: Path | None = None
    missing: list[str] = field(default_factory=list)

    def video_path(self, record: dict) -> Path:
        return self.video_root / record["video"]

    def clip_path(self, record: dict, probe: int | None = None) -> Path | None:
        """The authors' pre-cut clip: ``{id}.mp4`` or ``{id}_{probe}.mp4`` (None without a ``chunked_root``)."""
        if self.chunked_root is None:
            return None
        name = f"{record['id']}.mp4" if probe is None else f"{record['id']}_{probe}.mp4"
        return self.chunked_root / name

    def by_category(self) -> dict[str, list[dict]]:
        return {name: [r for r in self.records if r["task"] in tasks] for name, tasks in CATEGORIES.items()}


def _check(record: Any, i: int, file: str) -> None:
    if not isinstance(record, dict):
        raise EpisodeError("must be an object", file=file, record=f"#{i}")
    rid = str(record.get("id", f"#{i}"))
    for key in ("id", "task", "video"):
        if key not in record:
            raise EpisodeError("missing required field", file=file, record=rid, field=key)
    task = record["task"]
    if category_of(task) is None:
        raise EpisodeError(f"unknown task {task!r}", file=file, record=rid, field="task")
    if task in FORWARD_TASKS:
        probes = record.get("test_info")
        if not isinstance(probes, list) or not probes:
            raise EpisodeError("must be a non-empty list of probes", file=file, record=rid, field="test_info")
        need = {"REC": ("realtime", "count"), "SSR": ("realtime", "step", "type"), "CRR": ("realtime", "type")}[task]
        for j, probe in enumerate(probes):
            missing = [k for k in need if not isinstance(probe, dict) or k not in probe]
            if missing:
                raise EpisodeError("missing " + ", ".join(missing), file=file, record=rid, field=f"test_info[{j}]")
        extra = {"REC": "activity", "CRR": "question"}.get(task)
        if extra and not isinstance(record.get(extra), str):
            raise EpisodeError("missing or not a string", file=file, record=rid, field=extra)
    else:
        for key in ("question", "options", "gt", "realtime"):
            if key not in record:
                raise EpisodeError("missing required field", file=file, record=rid, field=key)
        if not isinstance(record["gt"], int) or not 0 <= record["gt"] < len(record["options"]):
            raise EpisodeError("must index the options", file=file, record=rid, field="gt")


def load_ovo_bench(
    path: str | Path, video_root: str | Path | None = None, chunked_root: str | Path | None = None
) -> OVOBench:
    """Read ``ovo_bench_new.json`` as downloaded.

    Args:
        path (`str` or `Path`): the annotation file (a JSON list).
        video_root (`str` or `Path`, *optional*): the folder ``{video}`` is relative to (the authors'
            ``data/src_videos``); defaults to the file's folder.
        chunked_root (`str` or `Path`, *optional*): the authors' pre-cut clips (``data/chunked_videos``).

    Raises:
        `EpisodeError`: naming the file, the record id and the field.
    """
    path = Path(path)
    records = read_records(path)
    for i, record in enumerate(records):
        _check(record, i, str(path))
    root = Path(video_root) if video_root is not None else path.parent
    bench = OVOBench(records, root, Path(chunked_root) if chunked_root is not None else None)
    seen = set()
    for record in records:
        video = bench.video_path(record)
        if str(video) not in seen:
            seen.add(str(video))
            if not video.is_file():
                bench.missing.append(str(video))
    return bench
