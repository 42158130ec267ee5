"""A StreamingBench Proactive Output results file matched to its question file by question identity: the only
way one enters a score (`proactive_eval.benchmarks.stream_bench.match`; docs/evaluation.md, "What the scorers
trust")."""

from __future__ import annotations

from collections import Counter
from typing import Any

from proactive_eval.benchmarks.stream_bench.match import Matched, none_matched, wrong_shape
from proactive_eval.benchmarks.streamingbench_po.format import QUESTION_KEYS
from proactive_eval.common.stream_files import other_benchmark
from proactive_eval.records import EpisodeError

GOLD_KEYS = ("ground_truth_time_stamp", "ground_truth_output", "task_type")  # of a StreamingBench question


def _identities(entries: list[dict]) -> dict[tuple, tuple[int, int]]:
    """``(video_path, question, time_stamp, rank) -> (entry, index)``; rank counts earlier equal questions."""
    ranks: Counter = Counter()
    out = {}
    for e, entry in enumerate(entries):
        for q, question in enumerate(entry["questions"]):
            base = (entry["video_path"], question["question"], question["time_stamp"])
            out[(*base, ranks[base])] = (e, q)
            ranks[base] += 1
    return out


def match_po(entries: list[dict], predictions: Any, file: str = "predictions") -> Matched:
    """Match a StreamingBench Proactive Output results file to the question file's `entries` (checked by
    `load_streamingbench_po`) by question identity.

    Returns:
        `Matched`: ``results`` is the question file rebuilt from `entries` (its official question fields only),
        each matched question holding the file's model outputs (every key that is not an official field).

    Raises:
        `EpisodeError`: the file is not a list of entries with questions, an entry has no ``video_path``, a
            question is not an object or lacks its ``question`` / ``time_stamp`` text; or no question matches.
    """
    if not isinstance(predictions, list) or other_benchmark(predictions) not in (None, "a StreamingBench file"):
        raise wrong_shape(
            "the question file with the model's outputs in it (a list of entries with 'questions')",
            predictions, file, "--benchmark ovo_bench",
        )  # fmt: skip
    identities = _identities(entries)
    results = [
        {"video_path": entry["video_path"], "questions": [{k: q[k] for k in QUESTION_KEYS if k in q}
                                                          for q in entry["questions"]]}
        for entry in entries
    ]  # fmt: skip
    matched = Matched(results)
    ranks: Counter = Counter()
    models: dict[str, None] = {}
    total = 0
    for e, entry in enumerate(predictions):
        where = f"entry {e}"
        if not isinstance(entry, dict) or not isinstance(entry.get("questions"), list):
            raise EpisodeError("must be an object with a list of questions", file=file, record=where)
        if not isinstance(entry.get("video_path"), str):
            raise EpisodeError("missing or not a string", file=file, record=where, field="video_path")
        for q, question in enumerate(entry["questions"]):
            fld = f"questions[{q}]"
            if not isinstance(question, dict):
                raise EpisodeError("must be an object", file=file, record=where, field=fld)
            for key in ("question", "time_stamp"):  # with video_path: the question's identity
                if not isinstance(question.get(key), str):
                    raise EpisodeError("missing or not a string", file=file, record=where, field=f"{fld}.{key}")
            total += 1
            base = (entry["video_path"], question["question"], question["time_stamp"])
            target = identities.get((*base, ranks[base]))
            ranks[base] += 1
            if target is None:
                matched.ignored["duplicates" if (*base, 0) in identities else "unknown_ids"] += 1
                continue
            gold = entries[target[0]]["questions"][target[1]]
            matched.ignored["gold_differs"] += any(k in question and question[k] != gold[k] for k in GOLD_KEYS)
            scored = results[target[0]]["questions"][target[1]]
            for key, value in question.items():
                if key not in QUESTION_KEYS:
                    scored[key] = value
                    models[key] = None
    if total and matched.ignored["unknown_ids"] + matched.ignored["duplicates"] == total:
        raise none_matched(total, file)
    matched.models = list(models)
    return matched
