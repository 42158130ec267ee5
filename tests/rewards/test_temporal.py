"""Temporal decay, matching and PRS against hand-computed cases (docs/spec.md §4, P³I §4 and Figure 13)."""

import math

import pytest

from proactive_rewards import Response, Target, distance, prs_score, temporal_score

# P³I Figure 13(a): one requested count ("1"), the model answers "1" at 13 timestamps between 4 and 277 s.
# The annotated onset is not printed; 5.0 s makes the first answer "slightly precede" it, as the paper says.
THIRTEEN = [4.0 + k * (277.0 - 4.0) / 12 for k in range(13)]


def test_accident_trace_temporal_score():
    # Figure 13(b): target 18.867 s, Warning at 40.200 s, 21.333 s late.
    assert temporal_score(40.200, 18.867) == pytest.approx(math.exp(-0.05 * 21.333), abs=1e-12)
    assert round(temporal_score(40.200, 18.867), 3) == 0.344


def test_window_distance_and_score():
    g = Target(40.0, "x", window=(40.0, 44.0))
    assert [distance(t, g) for t in (38.0, 40.0, 42.5, 44.0, 50.0)] == [2.0, 0.0, 0.0, 0.0, 6.0]
    assert temporal_score(50.0, 40.0, window=(40.0, 44.0)) == pytest.approx(math.exp(-0.3))
    assert temporal_score(10.0, 10.0, alpha=0.0) == 1.0


@pytest.mark.parametrize("t", [math.nan, math.inf, -math.inf])
def test_non_finite_times_score_zero(t):
    assert temporal_score(t, 3.0) == 0.0
    assert temporal_score(3.0, t) == 0.0


@pytest.mark.parametrize("alpha", [-0.1, math.nan, math.inf])
def test_bad_alpha_is_a_configuration_error(alpha):
    with pytest.raises(ValueError, match="alpha"):
        temporal_score(1.0, 1.0, alpha=alpha)


def test_thirteen_responses_divide_the_best_score_by_thirteen():
    responses = [(t, "1") for t in THIRTEEN]
    result = prs_score(responses, [(5.0, "1")], mode="B")
    (target,) = result.per_target
    assert len(target.matched) == 13
    assert target.best == pytest.approx(math.exp(-0.05 * 1.0))
    assert result.score == pytest.approx(math.exp(-0.05) / 13)
    assert target.latency == pytest.approx(-1.0)
    no_penalty = prs_score(responses, [(5.0, "1")], mode="B", redundancy=False)
    assert no_penalty.score == pytest.approx(math.exp(-0.05))


def test_thirteen_responses_prs_u_first_answer_is_early():
    # PRS-U: the answer at 4 s precedes the target at 5 s, so it scores 0 but counts; the best is the second.
    result = prs_score([(t, "1") for t in THIRTEEN], [(5.0, "1")], mode="U")
    second = THIRTEEN[1]
    assert result.score == pytest.approx(math.exp(-0.05 * (second - 5.0)) / 13)


def test_prs_u_early_response_goes_to_first_target_with_score_zero():
    targets = [(10.0, "1"), (30.0, "2")]
    result = prs_score([(2.0, "1")], targets, mode="U")
    first, second = result.per_target
    assert first.matched == [Response(2.0, "1")] and first.best == 0.0 and first.score == 0.0
    assert second.matched == []
    assert result.score == 0.0
    # The same correct response under PRS-B is 8 s early on the nearest target and scores.
    b = prs_score([(2.0, "1")], targets, mode="B")
    assert b.score == pytest.approx(math.exp(-0.05 * 8) / 2)


def test_prs_u_assigns_to_latest_target_at_or_before():
    targets = [(10.0, "1"), (30.0, "2")]
    result = prs_score([(29.0, "2"), (30.0, "2")], targets, mode="U")
    first, second = result.per_target
    assert first.matched == [Response(29.0, "2")] and first.score == 0.0  # wrong content for target 1
    assert second.matched == [Response(30.0, "2")] and second.score == 1.0
    assert result.score == pytest.approx(0.5)


def test_prs_b_nearest_and_tie_goes_to_earlier_target():
    targets = [Target(10.0, "1"), Target(20.0, "2")]
    result = prs_score([(15.0, "1"), (19.0, "2")], targets, mode="B")
    first, second = result.per_target
    assert first.matched == [Response(15.0, "1")]  # equidistant: the earlier target
    assert first.score == pytest.approx(math.exp(-0.25))
    assert second.score == pytest.approx(math.exp(-0.05))
    assert result.score == pytest.approx((math.exp(-0.25) + math.exp(-0.05)) / 2)


def test_prs_targets_are_sorted_and_missed_targets_score_zero():
    result = prs_score([(31.0, "2")], [(30.0, "2"), (10.0, "1")], mode="B")
    assert [t.target.time for t in result.per_target] == [10.0, 30.0]
    assert [t.score for t in result.per_target] == [0.0, pytest.approx(math.exp(-0.05))]
    assert result.per_target[0].latency is None


def test_prs_no_targets_and_no_responses():
    assert prs_score([(1.0, "x")], []).score == 0.0
    assert prs_score([], [(1.0, "x")]).score == 0.0


def test_content_scorer_is_clamped_and_used():
    def half(response, target):
        return 0.5

    assert prs_score([(10.0, "a")], [(10.0, "b")], content_scorer=half).score == 0.5
    assert prs_score([(10.0, "a")], [(10.0, "b")], content_scorer=lambda r, t: 7.0).score == 1.0
    assert prs_score([(10.0, "a")], [(10.0, "b")], content_scorer=lambda r, t: math.nan).score == 0.0


def test_best_response_latency():
    result = prs_score([(12.0, "1"), (9.0, "1"), (11.0, "7")], [(10.0, "1")])
    (target,) = result.per_target
    assert target.best == pytest.approx(math.exp(-0.05)) and target.latency == pytest.approx(-1.0)
    assert target.score == pytest.approx(math.exp(-0.05) / 3)


def test_mode_is_checked():
    with pytest.raises(ValueError, match="mode"):
        prs_score([], [], mode="X")


@pytest.mark.parametrize("bad", [-5.0, -1e-9, math.nan, math.inf, -math.inf])
def test_a_target_time_below_0_or_not_finite_earns_nothing(bad):
    """Broken ground truth (a stream starts at 0) earns no response credit, in either mode, and never raises."""
    from proactive_rewards import accident_reward, compositional_reward, count_reward, intervention_reward

    assert temporal_score(0.0, bad) == 0.0 and math.isnan(distance(0.0, Target(bad, "1")))
    for mode in ("B", "U"):
        result = prs_score([(0.0, "1"), (1.0, "1")], [(bad, "1")], mode=mode)
        assert result.score == 0.0 and result.per_target[0].latency is None
        # beside a usable target: it still counts in the mean, and takes no response from the usable one
        result = prs_score([(10.0, "1")], [(bad, "1"), (10.0, "1")], mode=mode)
        assert result.score == 0.5 and [len(t.matched) for t in result.per_target] == [1, 0]
        assert result.per_target[0].target.time == 10.0
    assert accident_reward([(0.0, "Warning")], [(bad, "Warning")]) == 0.0
    assert count_reward([(0.0, "1")], [(bad, "1")]) == 0.0
    assert compositional_reward([(0.0, "start")], [(bad, "start")]) == 0.0
    assert intervention_reward([(0.0, "stop")], [{"time": bad, "text": "stop"}]) == 0.0
