"""OVO-Bench put to a model: one video's records per unit of work, each probe asked on the clip ``[0, realtime)``
under the ``official`` or ``streaming`` protocol (`proactive_eval.benchmarks.stream_bench.run`), written in the
official results shape (docs/ovo_bench.md)."""

from __future__ import annotations

import logging
import time
from pathlib import Path

from proactive_eval.benchmarks.ovo_bench.format import FORWARD_TASKS, OVOBench, category_of, ovo_prompt
from proactive_eval.benchmarks.stream_bench.run import play

logger = logging.getLogger(__name__)


def ovo_video_groups(bench: OVOBench) -> list[dict]:
    """The records grouped by source video (a streaming pass each): ``{"video", "records"}``, in file order."""
    groups: dict[str, list] = {}
    for record in bench.records:
        groups.setdefault(record["video"], []).append(record)
    return [{"video": str(bench.video_path(rs[0])), "records": rs} for rs in groups.values()]


def run_ovo_group(prompter, group: dict, protocol: str, fps: float = 1.0) -> list[dict]:
    """The results of one video's records, in the official shape (a forward record gains probe responses; a
    multiple-choice record becomes ``{"id", "video", "task", "question", "response", "ground_truth"}``)."""
    out = []
    asks = []
    for record in group["records"]:
        if record["task"] in FORWARD_TASKS:
            out.append({**record, "test_info": [dict(p) for p in record["test_info"]]})
            asks += [(float(p["realtime"]), (len(out) - 1, j)) for j, p in enumerate(record["test_info"])]
        else:
            out.append(
                {"id": record["id"], "video": record["video"], "task": record["task"], "question": record["question"],
                 "response": None, "ground_truth": chr(65 + record["gt"])}
            )  # fmt: skip
            asks.append((float(record["realtime"]), (len(out) - 1, None)))
    asks.sort(key=lambda a: a[0])

    def answer(key, ask) -> bool:
        i, j = key
        record = group["records"][i]
        start = time.perf_counter()
        try:
            response = ask(ovo_prompt(record, j))
        except Exception as err:  # noqa: BLE001 - the authors' loop records a failed call as a null response
            logger.warning("OVO-Bench record %s probe %s: no answer (%s)", record["id"], j, err)
            response = None
        target = out[i] if j is None else out[i]["test_info"][j]
        target["response"], target["cost"] = response, time.perf_counter() - start
        return False

    play(prompter, Path(group["video"]), 0.0, asks, protocol, fps, answer)
    return out


def ovo_results(records: list[dict]) -> dict:
    """Per-record results → the official ``{"backward", "realtime", "forward"}`` object."""
    results = {"backward": [], "realtime": [], "forward": []}
    for record in records:
        results[category_of(record["task"])].append(record)
    return results


def ovo_items(bench: OVOBench) -> list[tuple[str, dict]]:
    """The units of work of a run: ``(video, group)`` of every `ovo_video_groups` group."""
    return [(group["video"], group) for group in ovo_video_groups(bench)]


def run_ovo_item(prompter, bench: OVOBench, group: dict, protocol: str) -> list[dict]:
    """`run_ovo_group` of one unit of work (`bench` is not needed: a group names its video)."""
    return run_ovo_group(prompter, group, protocol)


def ovo_run_results(bench: OVOBench, outputs: list[list[dict]]) -> dict:
    """The official results object of a run's outputs (each a group's records, in `ovo_items` order)."""
    return ovo_results([r for out in outputs for r in out])
