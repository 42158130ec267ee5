"""An OVO-Bench results object matched to its annotations by ``id``: the only way one enters a score
(`proactive_eval.benchmarks.stream_bench.match`; docs/evaluation.md, "What the scorers trust")."""

from __future__ import annotations

from typing import Any

from proactive_eval.benchmarks.ovo_bench.format import FORWARD_TASKS, category_of
from proactive_eval.benchmarks.ovo_bench.metric import CATEGORY_NAMES
from proactive_eval.benchmarks.stream_bench.match import Matched, none_matched, wrong_shape
from proactive_eval.common.stream_files import is_id, shown
from proactive_eval.records import EpisodeError


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
        raise wrong_shape(
            "the official {'backward', 'realtime', 'forward'} results object",
            predictions, file, "--benchmark streamingbench_po",
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
        raise none_matched(total, file)
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
