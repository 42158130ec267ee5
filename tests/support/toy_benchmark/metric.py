"""The toy benchmark's scorer and blind floor. Its official results file is a JSON list ``[{"id", "response"}]``;
an answer is right when its stripped text equals the gold ``answer``, and the accuracy is in percent over every
question of the annotations (a missing or unknown-id result scores nothing: the annotations are the only gold)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from proactive_eval.records import EpisodeError
from tests.support.toy_benchmark.format import ToyBench


def accuracy(bench: ToyBench, responses: dict[str, Any]) -> float:
    """Percent of the annotations' questions whose response (a string) is the gold answer."""
    right = sum(str(responses.get(r["id"], "")).strip() == r["answer"] for r in bench.records)
    return 100 * right / len(bench.records)


def blind_floor(bench: ToyBench) -> dict[str, Any]:
    """The best answer that never looks: the most frequent gold answer (ties: the first), given to every question."""
    answer = Counter(r["answer"] for r in bench.records).most_common(1)[0][0]
    return {"answer": answer, "accuracy": accuracy(bench, {r["id"]: answer for r in bench.records})}


def summary(bench: ToyBench, results: Any, file: str = "predictions", model: str | None = None) -> dict[str, Any]:
    """The ``results.json`` of an official results list (one model's: `model` is not used)."""
    if not isinstance(results, list) or not all(isinstance(r, dict) and "id" in r for r in results):
        raise EpisodeError('expected a JSON list of {"id", "response"} results', file=file)
    responses: dict[str, Any] = {}
    for result in results:
        responses.setdefault(result["id"], result.get("response"))  # a duplicate: the first one counts
    known = {r["id"] for r in bench.records}
    answered = sum(i in known for i in responses)
    return {
        "benchmark": "toy",
        "accuracy": accuracy(bench, responses),
        "coverage": {"expected": len(known), "answered": answered, "missing": len(known) - answered},
        "ignored": {"unknown_ids": len(responses) - answered},
        "blind_floor": blind_floor(bench),
    }


def metrics(summary: dict[str, Any]) -> dict[str, float]:
    """What a training callback logs: the accuracy and the blind floor's."""
    return {"accuracy": summary["accuracy"], "blind_floor": summary["blind_floor"]["accuracy"]}


def report_text(summary: dict[str, Any]) -> str:
    cov = summary["coverage"]
    return (
        f"toy: accuracy {summary['accuracy']:.2f} | blind floor {summary['blind_floor']['accuracy']:.2f} "
        f"({cov['answered']}/{cov['expected']} answered)"
    )
