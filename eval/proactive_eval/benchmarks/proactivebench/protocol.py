"""Which ProactiveBench records are scored: the filtered benchmark of the paper, or the unfiltered one (docs/spec.md §6).

ProactiveBench §3.3 / App. A.8 removes the samples that at least 25 % of the evaluated MLLMs guess right at the
first turn: 7,557 of 17,909 samples remain, and Table 1 is computed on them (Table 4 on all of them). The
authors' loader (``proactivebench.data_utils.JSONLDataset``) keeps a record of ``<folder>_preprocessed.jsonl``
when

1. its ``id`` is in the dataset's list of kept ids (``FILTER``), and
2. no field listed in the skip arguments has the skipped value: ``{"strong_occlusions": False}``, so VSOD
   keeps only its strong occlusions (a record without the field is kept).

The lists ship with this package (``data/proactivebench_filter.json`` beside this module, copied from the
authors' package, MIT licence); they are facts of the benchmark. ``protocol="filtered"`` (the default of every
evaluation path) applies both rules; ``"unfiltered"`` applies only the skip arguments (the paper's unfiltered
benchmark); ``skip={}`` turns those off too. Evaluation reports state the protocol and the per-dataset counts
(`protocol_summary`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks.proactivebench.metric import DATASETS, dataset_key

PROTOCOLS = ("filtered", "unfiltered")
#: The authors' ``JSONLDataset.skip_args``: a record whose field equals the value is not part of the benchmark.
SKIP_ARGS: dict[str, Any] = {"strong_occlusions": False}
FILTER_FILE = Path(__file__).resolve().parent / "data" / "proactivebench_filter.json"


@dataclass(frozen=True)
class BenchmarkFilter:
    """The kept ids per dataset (keys: acronyms ``ROD`` .. ``COCO``) and where they came from."""

    ids: dict[str, frozenset[str]]
    source: str = ""

    def counts(self) -> dict[str, int]:
        """How many samples each dataset keeps (the filtered benchmark's size per dataset)."""
        return {key: len(self.ids[key]) for key in DATASETS if key in self.ids}


def load_filter(path: str | Path | None = None) -> BenchmarkFilter:
    """The id lists of a filter file (default: the shipped one); a `ValueError` names the file and what is wrong.

    The file is ``{"ids": {<dataset folder name or acronym>: [id, ...]}, "source": ...}``.
    """
    return _read_filter(str(path)) if path is not None else _shipped_filter()


@lru_cache(maxsize=1)
def _shipped_filter() -> BenchmarkFilter:
    return _read_filter(str(FILTER_FILE))


def _read_filter(path: str) -> BenchmarkFilter:
    try:
        raw = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ValueError(f"{path}: cannot read the ProactiveBench filter file: {err}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("ids"), dict):
        raise ValueError(f"{path}: expected {{'ids': {{dataset: [id, ...]}}}}")
    ids = {}
    for name, values in raw["ids"].items():
        try:
            key = dataset_key(name)
        except ValueError as err:
            raise ValueError(f"{path}: ids: {err}") from None
        if not isinstance(values, list) or not all(isinstance(v, (int, str)) for v in values):
            raise ValueError(f"{path}: ids.{name}: expected a list of integer or string ids")
        ids[key] = frozenset(str(v) for v in values)
    return BenchmarkFilter(ids, str(raw.get("source", "")))


def check_protocol(protocol: str) -> str:
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol: expected one of {', '.join(PROTOCOLS)}, got {protocol!r}")
    return protocol


def is_skipped(record: Mapping[str, Any], skip: Mapping[str, Any] | None = None) -> bool:
    """The authors' ``_check_skip_args``: a record is skipped when one of the `skip` fields has its value."""
    skip = SKIP_ARGS if skip is None else skip
    return any(name in record and record[name] == value for name, value in skip.items())


@dataclass
class Selection:
    """The records a protocol keeps from one file, and how many the file had."""

    dataset: str
    protocol: str
    records: list = field(default_factory=list)
    in_file: int = 0
    skipped: int = 0  # dropped by the skip arguments
    filtered_out: int = 0  # dropped by the id list


def select_benchmark(
    records: Iterable[Mapping[str, Any]],
    dataset: str,
    protocol: str = "filtered",
    skip: Mapping[str, Any] | None = None,
    benchmark_filter: BenchmarkFilter | None = None,
) -> Selection:
    """Keep the records of `dataset` that the authors' loader keeps under `protocol` (see the module docstring).

    Args:
        records (iterable of `dict`): the JSONL records (raw dicts, with ``id``).
        dataset (`str`): the dataset acronym or the authors' folder name.
        protocol (`str`, *optional*, defaults to `"filtered"`): ``"filtered"`` or ``"unfiltered"``.
        skip (`dict`, *optional*): field → value whose records are skipped; defaults to `SKIP_ARGS`.
        benchmark_filter (`BenchmarkFilter`, *optional*): the id lists; defaults to the shipped ones.
    """
    key = dataset_key(dataset)
    check_protocol(protocol)
    keep = None
    if protocol == "filtered":
        lists = benchmark_filter or load_filter()
        if key not in lists.ids:
            raise ValueError(
                f"{key}: no id list in the filter file ({lists.source or 'given'}); use protocol unfiltered"
            )
        keep = lists.ids[key]
    out = Selection(key, protocol)
    for record in records:
        out.in_file += 1
        if isinstance(record, Mapping) and is_skipped(record, skip):
            out.skipped += 1
        elif keep is not None and isinstance(record, Mapping) and "id" in record and str(record["id"]) not in keep:
            out.filtered_out += 1
        else:
            out.records.append(record)  # a record without an id is kept, for the validator to name
    return out


def protocol_summary(protocol: str, counts: Mapping[str, int], skip: Mapping[str, Any] | None = None) -> dict:
    """What a report states: the protocol, the skip arguments, and the samples scored per dataset (and in all)."""
    skip = SKIP_ARGS if skip is None else dict(skip)
    return {"protocol": protocol, "skip": dict(skip), "samples": dict(counts), "total": int(sum(counts.values()))}


def protocol_line(summary: Mapping[str, Any]) -> str:
    """One line for a markdown report.

    >>> protocol_line(protocol_summary("filtered", {"ROD": 88, "VSOD": 42}))
    'ProactiveBench protocol: filtered (ProactiveBench §3.3), skip {"strong_occlusions": false}; samples: ROD 88, VSOD 42 (130 in all)'
    """
    name = summary["protocol"] + (" (ProactiveBench §3.3)" if summary["protocol"] == "filtered" else "")
    counts = ", ".join(f"{k} {v}" for k, v in summary["samples"].items())
    skip = json.dumps(summary.get("skip", {}))
    return f"ProactiveBench protocol: {name}, skip {skip}; samples: {counts} ({summary['total']} in all)"
