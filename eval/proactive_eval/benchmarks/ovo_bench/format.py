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

from proactive_eval.common.stream_files import (
    MAX_SECONDS,
    is_id,
    other_benchmark,
    path_text,
    read_json,
    seconds,
    shown,
)
from proactive_eval.records import EpisodeError, is_file

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
    """Types and shapes of one annotation record, before anything reads it (the official file passes)."""
    if not isinstance(record, dict):
        raise EpisodeError("must be an object", file=file, record=f"#{i}")
    if "id" not in record:
        raise EpisodeError("missing required field", file=file, record=f"#{i}", field="id")
    if not is_id(record["id"]):
        raise EpisodeError("must be an integer or a short string", file=file, record=f"#{i}", field="id")
    rid = str(record["id"])

    def fail(key: str, message: str) -> EpisodeError:
        return EpisodeError(message, file=file, record=rid, field=key)

    task = record.get("task")
    if not isinstance(task, str) or category_of(task) is None:
        tasks = ", ".join(t for ts in CATEGORIES.values() for t in ts)
        raise fail("task", f"unknown task {shown(task)!r}; expected one of {tasks}")
    if not path_text(record.get("video")):
        raise fail("video", "missing or not a path (a non-empty string of at most 4096 characters)")
    if task in FORWARD_TASKS:
        probes = record.get("test_info")
        if not isinstance(probes, list) or not probes:
            raise fail("test_info", "must be a non-empty list of probes")
        need = {"REC": ("realtime", "count"), "SSR": ("realtime", "step", "type"), "CRR": ("realtime", "type")}[task]
        for j, probe in enumerate(probes):
            missing = [k for k in need if not isinstance(probe, dict) or k not in probe]
            if missing:
                raise fail(f"test_info[{j}]", "missing " + ", ".join(missing))
            if not seconds(probe["realtime"]):
                raise fail(f"test_info[{j}].realtime", f"must be seconds in [0, {MAX_SECONDS}] (24 h)")
            for key in {"REC": ("count",)}.get(task, ("type",)):  # the gold: a count, or 0 (No) / 1 (Yes)
                value = probe[key]
                if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                    raise fail(f"test_info[{j}].{key}", "must be an integer >= 0")
            if task == "SSR" and not isinstance(probe["step"], str):
                raise fail(f"test_info[{j}].step", "must be a string")
        extra = {"REC": "activity", "CRR": "question"}.get(task)
        if extra and not isinstance(record.get(extra), str):
            raise fail(extra, "missing or not a string")
    else:
        for key in ("question", "options", "gt", "realtime"):
            if key not in record:
                raise fail(key, "missing required field")
        if not isinstance(record["question"], str):
            raise fail("question", "must be a string")
        options = record["options"]
        if not isinstance(options, list) or not options or not all(isinstance(o, str) for o in options):
            raise fail("options", "must be a non-empty list of strings")
        gt = record["gt"]
        if not isinstance(gt, int) or isinstance(gt, bool) or not 0 <= gt < min(len(options), 26):
            raise fail("gt", "must index the options")
        if not seconds(record["realtime"]):
            raise fail("realtime", f"must be seconds in [0, {MAX_SECONDS}] (24 h)")


def check_ovo_records(records: Any, file: str) -> None:
    """Check the annotation `records` of `file` (a JSON list) before anything reads them: every record's types
    and shapes, and unique ids (they name the clips ``{id}.mp4`` and match the predictions to the annotations).

    Raises:
        `EpisodeError`: naming the file, the record id and the field; a file of the other benchmark is named.
    """
    if not isinstance(records, list):
        kind = other_benchmark(records)
        hint = f"; this looks like {kind}: pass it as --predictions" if kind else ""
        raise EpisodeError(f"expected a JSON list of records (the official ovo_bench_new.json){hint}", file=file)
    if other_benchmark(records) == "a StreamingBench file":
        raise EpisodeError(
            "this looks like a StreamingBench file (entries with 'questions'), not OVO-Bench annotations: "
            "use --benchmark streamingbench_po (type: streamingbench_po in a recipe)",
            file=file,
        )
    if not records:
        raise EpisodeError("holds no records", file=file)
    seen: set = set()
    for i, record in enumerate(records):
        _check(record, i, file)
        if record["id"] in seen:
            raise EpisodeError("duplicate id: ids must be unique", file=file, record=str(record["id"]), field="id")
        seen.add(record["id"])


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
        `InputError`: the file cannot be read as JSON (`proactive_eval.common.stream_files.read_json`).
        `EpisodeError`: naming the file, the record id and the field (`check_ovo_records`).
    """
    path = Path(path)
    records = read_json(path, "annotations")
    check_ovo_records(records, shown(path))
    root = Path(video_root) if video_root is not None else path.parent
    bench = OVOBench(records, root, Path(chunked_root) if chunked_root is not None else None)
    seen = set()
    for record in records:
        video = bench.video_path(record)
        if str(video) not in seen:
            seen.add(str(video))
            if not is_file(video):
                bench.missing.append(str(video))
    return bench
