"""Benchmark PRS-U / PRS-B (docs/spec.md §4) on hand-computed episodes."""

import math

import pytest

from proactive_eval import Episode
from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_rewards import Target

E = math.exp


def _episodes():
    count = Episode(
        id="c1",
        task="atomic",
        duration=60.0,
        instruction="count",
        targets=[Target(10.0, "1"), Target(30.0, "2")],
    )
    silent = Episode(id="a1", task="accident", duration=60.0, instruction="warn", targets=[Target(20.0, "Warning")])
    empty = Episode(id="x", task="atomic", duration=60.0, instruction="nothing", targets=[])
    return [count, silent, empty]


PREDS = {"c1": [(11.0, "1"), (2.0, "1"), (21.0, "2")]}  # any order; "a1" never spoke


def test_hand_computed_prs_u_and_b():
    report = score_prs(_episodes(), PREDS)
    c1 = {e.episode_id: e for e in report.episodes}["c1"].results
    # PRS-U: t=2 precedes the first target (score 0, counts); t=11 -> target 10 (e^-0.05);
    # t=21 -> latest target at or before it is 10, wrong content -> 0. Target 30 gets nothing.
    assert c1["U"].score == pytest.approx((E(-0.05) / 3 + 0) / 2)
    assert c1["U_nopenalty"].score == pytest.approx((E(-0.05) + 0) / 2)
    # PRS-B: t=2 and t=11 -> target 10 (best e^-0.05, two responses); t=21 -> nearest target 30 (d=9).
    assert c1["B"].score == pytest.approx((E(-0.05) / 2 + E(-0.45)) / 2)
    assert c1["B_nopenalty"].score == pytest.approx((E(-0.05) + E(-0.45)) / 2)
    assert report.no_targets == ["x"]
    # targets 10 (two responses) and 30 (one): both answered, one repeated
    # and a1's target 20 gets nothing: missed
    groups = report.summary()["groups"]
    counts = ("num_targets", "answered_targets", "missed_targets", "repeated_targets")
    assert [groups["atomic"][k] for k in counts] == [2, 2, 0, 1]
    assert [groups["accident"][k] for k in counts] == [1, 0, 1, 0]


def test_timing_only_prs_b_counts_every_word_right():
    # a warning on time in another task's words: PRS-B 0, timing-only 1; a late right one decays alike in both
    wrong = Episode(id="w", task="accident", duration=60.0, instruction="warn", targets=[Target(20.0, "Warning")])
    late = Episode(id="l", task="accident", duration=60.0, instruction="warn", targets=[Target(20.0, "Warning")])
    report = score_prs([wrong, late], {"w": [(20.0, "A black square")], "l": [(22.0, "Warning"), (23.0, "x")]})
    by_id = {e.episode_id: e.results for e in report.episodes}
    assert by_id["w"]["B"].score == 0.0 and by_id["w"]["B_timing"].score == 1.0
    assert by_id["l"]["B"].score == pytest.approx(E(-0.1) / 2)  # two responses on one target
    assert by_id["l"]["B_timing"].score == pytest.approx(E(-0.1) / 2)  # the best is the same response
    summary = report.summary()["groups"]["accident"]
    assert summary["prs_b_timing"] == pytest.approx(100 * (1.0 + E(-0.1) / 2) / 2, abs=1e-4)


def test_timing_only_prs_b_equals_prs_b_with_the_targets_words():
    """Independent reference: on one-target episodes, timing-only PRS-B is PRS-B after every response's text is
    replaced by the target's (random times, texts and response counts)."""
    import random

    rng = random.Random(0)
    episodes, preds, rewritten = [], {}, {}
    for i in range(200):
        target = Target(rng.uniform(0, 60), rng.choice(["Warning", "1", "end"]))
        episodes.append(Episode(id=f"e{i}", task="accident", duration=60.0, instruction="warn", targets=[target]))
        responses = [
            (rng.uniform(0, 60), rng.choice(["Warning", "1", "A black square"])) for _ in range(rng.randint(0, 3))
        ]
        preds[f"e{i}"] = responses
        rewritten[f"e{i}"] = [(t, target.text) for t, _ in responses]
    timing = {e.episode_id: e.results["B_timing"].score for e in score_prs(episodes, preds).episodes}
    reference = {e.episode_id: e.results["B"].score for e in score_prs(episodes, rewritten).episodes}
    assert timing == pytest.approx(reference)
    assert sum(timing.values()) > sum(e.results["B"].score for e in score_prs(episodes, preds).episodes)


def test_benchmark_tables_per_task_and_overall():
    summary = score_prs(_episodes(), PREDS).summary()
    prs_b_c1 = (E(-0.05) / 2 + E(-0.45)) / 2
    prs_u_c1 = (E(-0.05) / 3) / 2
    atomic, accident, overall = summary["groups"]["atomic"], summary["groups"]["accident"], summary["overall"]
    assert atomic["prs_b"] == pytest.approx(100 * prs_b_c1, abs=1e-4)
    assert atomic["prs_u"] == pytest.approx(100 * prs_u_c1, abs=1e-4)
    assert accident["prs_b"] == 0.0 and accident["resp_per_target_b"] == 0.0
    assert overall["prs_b"] == pytest.approx(100 * prs_b_c1 / 2, abs=1e-4)  # mean over the two scored episodes
    assert overall["prs_b_nopenalty"] == pytest.approx(100 * (E(-0.05) + E(-0.45)) / 4, abs=1e-4)
    # responses per target: U puts all three on target 10 -> (3 + 0 + 0) / 3 targets; B: (2 + 1 + 0) / 3
    assert overall["resp_per_target_u"] == pytest.approx(1.0)
    assert overall["resp_per_target_b"] == pytest.approx(1.0)
    assert atomic["resp_per_target_u"] == pytest.approx(1.5)
    # latency of the best response: B -> +1 s (target 10) and -9 s (target 30): median -4; U -> +1 only
    assert atomic["median_latency_b"] == pytest.approx(-4.0)
    assert atomic["median_latency_u"] == pytest.approx(1.0)
    assert accident["median_latency_b"] is None
    assert overall["num_episodes"] == 2 and overall["num_targets"] == 3
    assert summary["episodes_without_targets"] == 1


def test_content_scorer_per_task_and_unknown_ids():
    eps = [Episode(id="i1", task="intervention", duration=30.0, instruction="help", targets=[Target(5.0, "stop")])]

    def half(response, target):
        return 0.5

    report = score_prs(eps, {"i1": [(5.0, "please stop")], "ghost": []}, content_scorer={"intervention": half})
    assert report.episodes[0].results["B"].score == pytest.approx(0.5)
    assert report.unknown_ids == ["ghost"]
    # intervention is free text: the default scorer is the intervention reward's token-F1, P = 1/2, R = 1 -> 2/3
    # (docs/spec.md §4); exact match would give 0
    default = score_prs(eps, {"i1": [(5.0, "please stop")]})
    assert default.episodes[0].results["B"].score == pytest.approx(2 / 3)
    assert default.summary()["groups"]["intervention"]["content_scorer"] == "rule:token_f1"
    exact = Episode(id="a1", task="accident", duration=30.0, instruction="x", targets=[Target(5.0, "Warning")])
    report = score_prs([exact], {"a1": [(5.0, "a Warning")]})
    assert (
        report.episodes[0].results["B"].score == 0.0 and report.summary()["overall"]["content_scorer"] == "exact_match"
    )
