"""ProactiveVideoQA ``anno.json`` → episodes (docs/spec.md §1, §5).

One anno record is one question about one video::

    {"video": "x.mp4", "question_id": "x.mp4", "duration": 12.9,
     "conversation": [{"role": "user", "content": "What creatures are shown?", "time": 0}, ...],
     "answer": [{"content": "A donkey.", "reply_timespan": [3.1, 6.0], "related_timespan": [3.1, 5.0]}, ...]}

Each answer turn becomes a target: ``time`` = reply start, ``text`` = the gold content, ``window`` = the reply
span ``[u, v]``, ``related`` = the related span. The question (``conversation[0].content``) is the
instruction and ``meta["question"]``; later user turns (e.g. [TV] subtitles) become scheduled user turns.
The task is ``pvqa``; ``meta["subset"]`` is WEB / EGO / TV / VAD when known (the anno file's folder name).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from proactive_eval.episodes import Episode, EpisodeList
from proactive_eval.records import check_record, collect, media_path, number, read_records, shown, span

SUBSETS = ("WEB", "EGO", "TV", "VAD")


def convert_pvqa(
    path: str | Path, subset: str | None = None, on_error: str = "raise", video_root: str | Path | None = None
) -> EpisodeList:
    """Read a ProactiveVideoQA ``anno.json`` as `pvqa` episodes.

    Args:
        path (`str` or `Path`): the anno file (JSON list, or JSONL).
        subset (`str`, *optional*): stored as ``meta["subset"]``; defaults to the file's folder name when that
            is one of WEB, EGO, TV, VAD.
        on_error (`str`, *optional*, defaults to `"raise"`): ``"skip"`` drops bad records (listed in ``.skipped``).
        video_root (`str` or `Path`, *optional*): where the videos are (the folder holding ``videos/``, or the
            videos themselves); defaults to the anno file's folder (the official ``<TASK>/videos/`` layout).

    Raises:
        `EpisodeError`: naming the file, the ``question_id`` and the anno field (e.g. ``answer[1].reply_timespan``).
    """
    path = Path(path)
    if subset is None and path.parent.name.upper() in SUBSETS:
        subset = path.parent.name.upper()
    records = read_records(path, list_keys=("data", "annotations"))
    root = Path(video_root) if video_root is not None else path.parent
    return collect(records, path, lambda record, i: pvqa_record_to_episode(record, path, subset, root), on_error)


def pvqa_record_to_episode(
    record: Any, path: Path, subset: str | None = None, video_root: Path | None = None
) -> Episode:
    """One anno record → one validated `Episode` (see the module docstring for the mapping)."""
    file = str(path)
    required = ("question_id", "conversation", "answer")
    rid, fail_field = check_record(record, file, required, id_keys=("question_id", "id"))

    def fail(field: str):
        return lambda msg: fail_field(field, msg)

    conversation = record["conversation"]
    if not isinstance(conversation, list) or not conversation or not isinstance(conversation[0], dict):
        raise fail("conversation")(f"must be a non-empty list of turns, got {shown(conversation)}")
    question = conversation[0].get("content")
    if not isinstance(question, str):
        raise fail("conversation[0].content")("missing or not a string (it is the question)")
    answers = record["answer"]
    if not isinstance(answers, list):
        raise fail("answer")("must be a list of answer turns")

    targets = []
    for j, turn in enumerate(answers):
        fld = f"answer[{j}]"
        if not isinstance(turn, dict):
            raise fail(fld)("must be an object")
        if not isinstance(turn.get("content"), str):
            raise fail(fld + ".content")("missing or not a string")
        if "reply_timespan" not in turn:
            raise fail(fld + ".reply_timespan")("missing required field")
        u, v = span(turn["reply_timespan"], fail(fld + ".reply_timespan"))
        related = turn.get("related_timespan")
        if related is not None:
            related = list(span(related, fail(fld + ".related_timespan"), allow_empty=True))
        target = {"time": u, "text": turn["content"], "window": [u, v]}
        if related is not None:
            target["related"] = related
        targets.append(target)
    targets.sort(key=lambda t: t["time"])  # stable: turns are scored independently, order is cosmetic

    user_turns = []
    for k, turn in enumerate(conversation[1:], 1):
        if isinstance(turn, dict) and turn.get("role", "user") == "user" and turn.get("content"):
            if not isinstance(turn["content"], str):
                raise fail(f"conversation[{k}].content")(f"must be a string, got {shown(turn['content'])}")
            time = number(turn.get("time", 0.0), fail(f"conversation[{k}].time"))
            user_turns.append({"time": time, "text": turn["content"]})

    meta: dict[str, Any] = {"question": question, "source": "pvqa"}
    if subset:
        meta["subset"] = subset
    if "duration" in record and record["duration"] is not None:
        duration = number(record["duration"], fail("duration"))
    else:
        # The official scorer reads the length from the video; without it, the last annotated time bounds it.
        ends = [t["window"][1] for t in targets] + [t["related"][1] for t in targets if "related" in t]
        duration = max(ends + [u["time"] for u in user_turns] + [1e-6])
        meta["duration_estimated"] = True
    for t in targets:
        if t["time"] > duration:
            raise fail("answer.reply_timespan")(f"reply starts at {t['time']}, after the video end ({duration})")

    root = video_root if video_root is not None else path.parent
    video = record.get("video")
    if video is not None:
        media_path(video, fail("video"))
        if (root / "videos").is_dir():  # the official <TASK>/videos/ layout
            video = f"videos/{video}"
    episode = {
        "id": rid,
        "task": "pvqa",
        "duration": duration,
        "instruction": question,
        "targets": targets,
        "user_turns": user_turns,
        "meta": meta,
    }
    if video:
        episode["video"] = video
    return Episode.from_dict(episode, file=file, base_dir=root)
