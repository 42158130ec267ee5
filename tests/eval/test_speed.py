"""Speed beside accuracy (`proactive_eval.common.speed`): hand-computed event → response times and latency ranks; the
loop's per-frame timings and the report's speed columns exist and are finite (never a timing in an assertion)."""

import math

from proactive_eval import Episode
from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.commands.report import build_results, markdown_report
from proactive_eval.common.speed import NO_RUN, event_to_response, latency_summary, speed_row
from proactive_eval.streaming import ScriptedPolicy, run_episode
from proactive_rewards import Response, Target


def _episode(eid="e", targets=(2.0, 5.0, 8.0), duration=10.0):
    return Episode(
        id=eid, task="atomic", duration=duration, instruction="i", targets=[Target(t, "x") for t in targets]
    )


def test_event_to_response_by_hand():
    responses = [Response(1.0, "early"), Response(3.5, "bad", malformed=True), Response(4.0, "a")]
    responses += [Response(4.5, "again"), Response(9.0, "b")]
    # target 2: first well-formed in [2, 5) is 4.0 -> 2.0; target 5: nothing in [5, 8); target 8: 9.0 -> 1.0
    assert event_to_response(_episode(), responses) == [2.0, 1.0]
    assert event_to_response(_episode(targets=(7.0,), duration=8.0), [Response(8.0, "late")]) == []


def test_latency_summary_nearest_rank():
    summary = latency_summary([float(k) for k in range(20, 0, -1)] + [None, "x", float("nan")])
    assert summary == {"calls": 20, "latency_median_s": 10.5, "latency_p95_s": 19.0}
    assert latency_summary([]) == {"calls": 0, "latency_median_s": None, "latency_p95_s": None}


def test_speed_row_from_given_seconds_and_without_a_run():
    episodes = [_episode("a"), _episode("b", targets=(1.0,))]
    predictions = {"a": [Response(4.0, "a")], "b": [Response(4.0, "b")]}
    row = speed_row(episodes, predictions, {"a": [0.5, 0.5], "b": [1.0]})
    assert row == {
        "event_to_response_median_s": 2.5,  # median of 2.0 and 3.0
        "frames": 3,
        "seconds": 2.0,
        "frames_per_s": 1.5,
        "latency_median_s": 0.5,
        "latency_p95_s": 1.0,
    }
    untimed = speed_row(episodes, predictions, None)
    assert untimed["frames_per_s"] is None and untimed["event_to_response_median_s"] == 2.5


def test_run_episode_records_one_finite_time_per_frame():
    episode = _episode(targets=(2.0,), duration=4.0)
    seconds: list[float] = []
    frames = [(float(t), None) for t in range(4)]
    run_episode(ScriptedPolicy({"e": [(2.0, "x")]}), episode, lambda e: frames, step_seconds=seconds)
    assert len(seconds) == 4 and all(math.isfinite(s) and s >= 0 for s in seconds)


def test_report_has_the_speed_columns_with_and_without_a_run():
    episode = _episode(targets=(2.0,), duration=4.0)
    predictions = {"e": [Response(3.0, "x")]}
    prs = score_prs([episode], predictions)
    scored = build_results(prs=prs, episodes=[episode], predictions=predictions)
    text = markdown_report(scored)
    assert "frames/s" in text and "event→response median (s)" in text and NO_RUN in text
    assert scored["prs"]["overall"]["event_to_response_median_s"] == 1.0
    timed = build_results(prs=score_prs([episode], predictions), episodes=[episode], predictions=predictions,
                          step_seconds={"e": [0.25, 0.25]})  # fmt: skip
    row = timed["prs"]["overall"]
    assert row["frames_per_s"] == 4.0 and row["latency_p95_s"] == 0.25
    assert NO_RUN not in markdown_report(timed) and timed["prs"]["groups"]["atomic"]["frames"] == 2
