"""A results file matched to its annotations: the only way an OVO-Bench or StreamingBench Proactive Output results
file enters a score (docs/evaluation.md, "What the scorers trust").

The official scorers read the gold (``ground_truth``, ``count``, ``type``, ``ground_truth_time_stamp``,
``ground_truth_output``, the task) from the results file itself, so a results file could write its own. Here the
results file gives only responses: each result is matched to an annotation (OVO-Bench by ``id``; StreamingBench
by its question's identity, ``(video_path, question, time_stamp)`` and its rank among equal ones), and the scored
object is rebuilt from the annotations with the matched responses put in. What cannot be matched is never scored,
and counted in ``ignored``:

- ``unknown_ids``: results whose id (question) is not in the annotations;
- ``duplicates``: a second result for the same annotation (the first one is scored);
- ``gold_differs``: matched results whose gold fields, task or category differ from the annotations' (the
  annotations' are scored);
- ``extra_probes``: OVO-Bench forward probes beyond the annotation's ``test_info``.

The file's structure (lists, objects, ids, the fields that identify a question) is checked first: a results file
that breaks it is an `EpisodeError` naming the file, the result and the field. The responses themselves are the
model's output and are scored whatever they hold (the scorers count what they cannot read as ``malformed``).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from proactive_eval.formats.ovo_bench import FORWARD_TASKS, category_of
from proactive_eval.formats.stream_bench_files import is_id, other_benchmark, shown
from proactive_eval.formats.streamingbench import QUESTION_KEYS
from proactive_eval.metrics.ovo_bench import CATEGORY_NAMES
from proactive_eval.records import EpisodeError

IGNORED_KEYS = ("unknown_ids", "duplicates", "gold_differs", "extra_probes")
GOLD_KEYS = ("ground_truth_time_stamp", "ground_truth_output", "task_type")  # of a StreamingBench question


@dataclass
class Matched:
    """A results file matched to the annotations.

    Args:
        results: the official results shape, built from the annotations, holding the matched responses only.
        answered (`int`): annotation items (OVO-Bench: results and forward probes) with a response.
        ignored (`dict[str, int]`): what the file held that was not scored, by `IGNORED_KEYS`.
        costs (`list`): the matched responses' recorded call times (``cost``).
        models (`list[str]`): StreamingBench: the model keys of the matched questions, in order.
    """

    results: Any
    answered: int = 0
    ignored: dict[str, int] = field(default_factory=lambda: dict.fromkeys(IGNORED_KEYS, 0))
    costs: list = field(default_factory=list)
    models: list[str] = field(default_factory=list)


def _wrong_shape(expected: str, data: Any, file: str, flag: str) -> EpisodeError:
    kind = other_benchmark(data)
    hint = f"; this looks like {kind}: use {flag}" if kind else ""
    return EpisodeError(f"expected {expected}{hint}", file=file)


def _none_matched(n: int, file: str) -> EpisodeError:
    return EpisodeError(
        f"none of its {n} results matches an item of the annotations: are these results of that annotation file?",
        file=file,
    )


# ---- OVO-Bench ---------------------------------------------------------------------------------------


def match_ovo(records: list[dict], predictions: Any, file: str = "predictions") -> Matched:
    """Match an OVO-Bench results object to the annotation `records` (checked by `load_ovo_bench`) by ``id``.

    Returns:
        `Matched`: ``results`` is ``{"backward", "realtime", "forward"}`` in the file's order, each result of a
        category of its annotation's task: ``{"id", "task", "ground_truth", "response"}`` (multiple choice), or
        ``{"id", "task", "test_info": [{"count" | "type", "response"}]}`` (forward; a probe without a
        ``response`` stays without one, as in the file: the scorer counts it malformed).

    Raises:
        `EpisodeError`: the file is not a results object, a category is not a list, a result not an object or
            without an id, a forward result's ``test_info`` not a list of objects; or no result matches.
    """
    if not isinstance(predictions, dict) or not any(k in predictions for k in CATEGORY_NAMES):
        raise _wrong_shape(
            "the official {'backward', 'realtime', 'forward'} results object",
            predictions, file, "--benchmark streamingbench-po",
        )  # fmt: skip
    by_id = {r["id"]: r for r in records}
    matched = Matched({name: [] for name in CATEGORY_NAMES})
    seen: set = set()
    total = 0
    for name in CATEGORY_NAMES:
        items = predictions.get(name, [])
        if not isinstance(items, list):
            raise EpisodeError("must be a list of results", file=file, field=name)
        for i, item in enumerate(items):
            where = f"{name}[{i}]"
            if not isinstance(item, dict):
                raise EpisodeError("must be an object", file=file, record=where)
            if not is_id(item.get("id")):
                raise EpisodeError(
                    "missing, or not an integer or short string: results are matched to the annotations by id",
                    file=file, record=where, field="id",
                )  # fmt: skip
            total += 1
            record = by_id.get(item["id"])
            if record is None or item["id"] in seen:
                matched.ignored["unknown_ids" if record is None else "duplicates"] += 1
                continue
            seen.add(item["id"])
            result = _ovo_result(record, item, name, matched, file, where)
            if result is not None:
                matched.results[category_of(record["task"])].append(result)
    if total and not seen:
        raise _none_matched(total, file)
    return matched


def _ovo_result(record: dict, item: dict, name: str, matched: Matched, file: str, where: str) -> dict | None:
    """The scored result of annotation `record` from the file's `item` (found in list `name`)."""
    task = record["task"]
    differs = item.get("task", task) != task or name != category_of(task)
    if task not in FORWARD_TASKS:
        gold = chr(65 + record["gt"])
        matched.ignored["gold_differs"] += differs or item.get("ground_truth", gold) != gold
        result = {"id": record["id"], "task": task, "ground_truth": gold}
        if "response" in item:
            result["response"] = item["response"]
            matched.answered += 1
            matched.costs.append(item.get("cost"))
        return result
    probes = item.get("test_info")
    if not isinstance(probes, list) or not all(isinstance(p, dict) for p in probes):
        raise EpisodeError(
            "must be a list of probe objects (the annotation's test_info, each with its response)",
            file=file, record=f"{where} (id {shown(record['id'])})", field="test_info",
        )  # fmt: skip
    key = "count" if task == "REC" else "type"
    gold = record["test_info"]
    matched.ignored["extra_probes"] += max(0, len(probes) - len(gold))
    differs = differs or any(key in p and p[key] != g[key] for p, g in zip(probes, gold))
    matched.ignored["gold_differs"] += differs
    test_info = []
    for probe, truth in zip(probes, gold):
        scored = {key: truth[key]}
        if "response" in probe:
            scored["response"] = probe["response"]
            matched.answered += 1
            matched.costs.append(probe.get("cost"))
        test_info.append(scored)
    return {"id": record["id"], "task": task, "test_info": test_info} if test_info else None


# ---- StreamingBench Proactive Output -----------------------------------------------------------------


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
        raise _wrong_shape(
            "the question file with the model's outputs in it (a list of entries with 'questions')",
            predictions, file, "--benchmark ovo-bench",
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
        raise _none_matched(total, file)
    matched.models = list(models)
    return matched
