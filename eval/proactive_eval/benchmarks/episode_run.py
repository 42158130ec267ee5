"""What the episode benchmarks (``p3i``, ``pvqa``) share for `proactive_eval.benchmarks.registry`: an episode is
one item, played through the streaming loop by a state-token policy (`proactive_eval.streaming.run_episode`), and a
run's official results object is a predictions file, ``[{"id", "responses": [{"time", "text"}]}]`` (docs/spec.md §1).

    proactive-eval run --benchmark p3i --annotations p3i_test.json --policy openai:MODEL@URL --out run/
    proactive-eval score --benchmark pvqa --annotations WEB/anno.json --predictions run/predictions.json --out r/

The summary matches the predictions to the annotations by id, the only source of gold: an episode without a record,
or whose record says it was not played, scores as silence (docs/evaluation.md, "What the scorers trust").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from proactive_eval.benchmarks.registry import Benchmark
from proactive_eval.benchmarks.stream_bench.run import Speed
from proactive_eval.common.malformed import matched_outputs
from proactive_eval.errors import InputError
from proactive_eval.predictions import parse_predictions, read_prediction_records
from proactive_eval.records import nonempty

PROTOCOL = "streaming"
PREDICTIONS_FILE = "predictions.json"
PREDICTIONS_FIX = 'write one JSON record {"id": EPISODE_ID, "responses": [{"time": SECONDS, "text": ...}]} per episode'


def episode_benchmark(**fields) -> Benchmark:
    """A `Benchmark` whose items are episodes: the item runner, results object and protocol of this module filled
    in; `fields` give the rest (name, title, load, summary, blind floor, ...)."""
    return Benchmark(
        items=episode_items,
        run_item=run_episode_item,
        results=episode_results,
        results_file=PREDICTIONS_FILE,
        read_results=read_predictions,
        protocols=(PROTOCOL,),
        policy_protocols=(PROTOCOL,),
        **fields,
    )


def episode_loader(convert: Callable, keep: Callable[[Any], bool], other: str) -> Callable:
    """``load(annotations, video_root=None)``: the episodes `convert` reads from the file, refused when empty or
    when an episode fails `keep` (it belongs to benchmark `other`)."""

    def load(annotations, video_root=None):
        episodes = nonempty(convert(annotations, video_root=video_root), annotations, "episodes", PREDICTIONS_FIX)
        for episode in episodes:
            if not keep(episode):
                raise InputError(
                    f"{annotations}: episode {episode.id!r} has task {episode.task!r}: score it with --benchmark {other}"
                )
        return episodes

    return load


def episode_items(episodes) -> list[tuple[str, Any]]:
    """The units of work of a run: ``(id, episode)`` of every episode, in file order."""
    return [(episode.id, episode) for episode in episodes]


def run_episode_item(policy, episodes, episode, protocol: str = PROTOCOL) -> dict[str, Any]:
    """``{"responses": [...]}`` of `episode` played through `policy` (a `StreamingPolicy`), or ``{"responses": [],
    "failed": reason}`` when its video cannot be read. The run's speed is kept on ``policy.speed`` (a `Speed`,
    added when the policy has none), as the runners read it."""
    # deferred: the streaming loop pulls the video stack only where a policy is run
    from proactive_eval.streaming import episode_errors, run_episode

    if protocol != PROTOCOL:
        raise ValueError(f"protocol must be {PROTOCOL!r}, got {protocol!r}")
    if getattr(policy, "speed", None) is None:
        policy.speed = Speed()
    seconds: list[float] = []
    try:
        responses = run_episode(policy, episode, step_seconds=seconds)
    except episode_errors() as err:
        return {"responses": [], "failed": str(err)}
    policy.speed.video_frames += len(seconds)
    policy.speed.frames_encoded += len(seconds)
    policy.speed.frame_s += seconds
    rows = [{"time": r.time, "text": r.text, **({"malformed": True} if r.malformed else {})} for r in responses]
    return {"responses": rows}


def episode_results(episodes, outputs: list[dict]) -> list[dict[str, Any]]:
    """The official results object of a run: one predictions record per episode, in `episode_items` order."""
    return [{"id": episode.id, **output} for episode, output in zip(episodes, outputs)]


def read_predictions(path) -> list:
    """The records of a predictions file (JSONL or a JSON list; ``score --benchmark``'s ``--predictions``)."""
    return nonempty(read_prediction_records(path), path, "predictions", PREDICTIONS_FIX)


def matched_predictions(episodes, official, file: str) -> tuple[dict, dict[str, Any]]:
    """Episode id → responses of the episodes of `episodes` found in `official` (checked record by record, responses
    outside the video flagged malformed), and the coverage: what was scored and what was not."""
    predictions = parse_predictions(official, str(file))
    ids = {episode.id for episode in episodes}
    failed = {str(r.get("id")) for r in official if isinstance(r, dict) and r.get("failed")}
    matched, outside = matched_outputs(episodes, predictions)
    coverage = {
        "episodes": len(episodes),
        "with_predictions": len(matched),
        "not_played": len(failed & ids),  # scored as silence: a results file cannot take an episode out
        "ids_matching_no_episode": len(set(predictions) - ids),
        "duplicates_ignored": len(predictions.duplicates),
        "responses_outside_video": outside,
    }
    return matched, coverage


def file_name(file) -> str:
    """The name a summary shows for its predictions (a path's last part)."""
    return Path(str(file)).name
