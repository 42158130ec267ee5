"""A results file matched to its annotations: the only way an OVO-Bench or StreamingBench Proactive Output results
file enters a score (docs/evaluation.md, "What the scorers trust").

The official scorers read the gold (``ground_truth``, ``count``, ``type``, ``ground_truth_time_stamp``,
``ground_truth_output``, the task) from the results file itself, so a results file could write its own. Here the
results file gives only responses: each result is matched to an annotation (OVO-Bench by ``id``,
`proactive_eval.benchmarks.ovo_bench.match`; StreamingBench by its question's identity, ``(video_path, question,
time_stamp)`` and its rank among equal ones, `proactive_eval.benchmarks.streamingbench_po.match`), and the scored
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

from dataclasses import dataclass, field
from typing import Any

from proactive_eval.common.stream_files import other_benchmark
from proactive_eval.records import EpisodeError

IGNORED_KEYS = ("unknown_ids", "duplicates", "gold_differs", "extra_probes")


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


def wrong_shape(expected: str, data: Any, file: str, flag: str) -> EpisodeError:
    """The error of a results file that is not `expected`, naming the benchmark it looks like and its `flag`."""
    kind = other_benchmark(data)
    hint = f"; this looks like {kind}: use {flag}" if kind else ""
    return EpisodeError(f"expected {expected}{hint}", file=file)


def none_matched(n: int, file: str) -> EpisodeError:
    """The error of a results file none of whose `n` results matches the annotations."""
    return EpisodeError(
        f"none of its {n} results matches an item of the annotations: are these results of that annotation file?",
        file=file,
    )
