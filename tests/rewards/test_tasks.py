"""Task rewards against hand-computed cases (docs/spec.md §7, P³I Appendix C and Figure 13, ProactiveBench §5)."""

import math

import pytest

from proactive_rewards import (
    accident_reward,
    compositional_reward,
    count_reward,
    intervention_reward,
    proactive_suggestion_reward,
    state_format_reward,
)

LATE = math.exp(-0.05 * 21.333)  # P³I Figure 13(b): Warning at 40.200 s, target 18.867 s


def test_accident_trace_m_equals_one():
    completion = "".join(f"<t={t:.1f}s></Silence>" for t in range(40)) + "<t=40.2s></Response> Warning"
    assert accident_reward(completion, [{"time": 18.867, "text": "Warning"}]) == pytest.approx(LATE)
    parts = accident_reward(completion, [(18.867, "Warning")], components=True)
    assert parts == {"overall": pytest.approx(LATE), "temporal": pytest.approx(LATE), "penalty": 0.0, "outputs": 1}


def test_accident_closest_correct_warning_and_penalty():
    # Outputs: Warning at 10 (8.867 s early), Warning at 20 (1.133 s late), "Danger" (wrong), a malformed turn.
    turns = ["</Response> Warning", "</Response> warning!", "</Response> Danger", "Warning"]
    r = accident_reward(turns, [(18.867, "Warning")], times=[10.0, 20.0, 21.0, 22.0])
    assert r == pytest.approx(math.exp(-0.05 * 1.133) - 0.2 * 3)


def test_accident_without_correct_warning_penalises_every_output():
    turns = ["</Response> Danger", "Warning", "</Silence>"]
    assert accident_reward(turns, [(18.867, "Warning")], times=[1.0, 2.0, 3.0]) == pytest.approx(-0.4)
    assert accident_reward("", [(18.867, "Warning")]) == 0.0
    # no target in the window: every output is unmatched
    assert accident_reward([(5.0, "Warning")], []) == pytest.approx(-0.2)


def test_accident_parameters():
    r = accident_reward([(10.0, "Alert"), (11.0, "x")], [(10.0, "Alert")], signal="alert", alpha=0.1, lam=0.5)
    assert r == pytest.approx(1.0 - 0.5)
    with pytest.raises(ValueError, match="lam"):
        accident_reward([], [], lam=-1)


def test_count_thirteen_repeats_divide_by_thirteen():
    # Figure 13(a): "1" at 13 timestamps between 4 and 277 s; target onset 5.0 s (see test_temporal.py).
    times = [4.0 + k * (277.0 - 4.0) / 12 for k in range(13)]
    completion = "".join(f"<t={t}s></Response> 1" for t in times)
    assert count_reward(completion, [(5.0, "1")]) == pytest.approx(math.exp(-0.05) / 13)
    parts = count_reward(completion, [(5.0, "1")], components=True)
    assert parts["no_penalty"] == pytest.approx(math.exp(-0.05)) and parts["outputs"] == 13


def test_count_integer_matching_and_malformed_in_denominator():
    targets = [(10.0, "1"), (30.0, "2")]
    # "01" at 11 s is the integer 1; "two" is wrong; the malformed "2" (no state token) counts but never matches.
    turns = ["</Response> 01", "</Response> two", "2"]
    r = count_reward(turns, targets, times=[11.0, 29.0, 30.0])
    assert r == pytest.approx((math.exp(-0.05) + 0.0) / 2)
    assert count_reward("</Silence>", []) == 0.0  # no target in the window


def test_compositional_inactive_label_is_penalised():
    # Only "start" is active in this window; the "end" output names an inactive label.
    r = compositional_reward([(12.0, "start"), (30.0, "end")], [(10.0, "start")])
    assert r == pytest.approx(math.exp(-0.05 * 2) - 0.2)
    parts = compositional_reward([(12.0, "start"), (30.0, "end")], [(10.0, "start")], components=True)
    assert parts["invalid"] == 1 and parts["temporal"] == pytest.approx(math.exp(-0.1))


def test_compositional_both_labels_repeats_and_malformed():
    targets = [{"time": 10.0, "text": "start"}, {"time": 50.0, "text": "end"}]
    turns = ["</Response> Start", "</Response> start", "</Response> END.", "</Response> done", "</Response>"]
    r = compositional_reward(turns, targets, times=[12.0, 20.0, 48.0, 49.0, 50.0])
    s_start = math.exp(-0.05 * 2) / 2  # repeated start stays in the denominator
    s_end = math.exp(-0.05 * 2)
    assert r == pytest.approx((s_start + s_end) / 2 - 0.2 * 2)  # "done" and the empty response are invalid


def test_compositional_no_active_label():
    assert compositional_reward([(1.0, "start")], []) == pytest.approx(-0.2)
    assert compositional_reward("", []) == 0.0


def test_intervention_window_and_content_scorer():
    target = {"time": 40.0, "text": "turn off the stove", "window": [40.0, 44.0]}
    assert intervention_reward([(43.0, "Turn off the stove!")], [target]) == 1.0
    assert intervention_reward([(50.0, "turn off the stove")], [target]) == pytest.approx(math.exp(-0.3))
    half = intervention_reward([(41.0, "the stove")], [target])  # token F1: P = 1, R = 0.5
    assert half == pytest.approx(2 * 0.5 / 1.5)
    assert intervention_reward([(41.0, "x")], [target], content_scorer=lambda r, t: 0.25) == 0.25


OPTIONS = [
    "Move the occluding object to the left.",
    "Move the occluding object to the right.",
    "I do not know.",
    "cat",
    "dog",
    "bird",
    "fish",
]
VALID = ["Move the occluding object to the left."]


@pytest.mark.parametrize(
    "answer, r_p, expected",
    [
        ("E", 0.5, 1.0),
        ("dog", 0.75, 1.0),
        ("A. Move the occluding object to the left.", 0.75, 0.75),
        ("A", 1.0, 1.0),
        ("B", 0.5, 0.0),
        ("C", 0.5, 0.0),
        ("D", 0.5, 0.0),
        ("zebra", 0.5, 0.0),
        ("", 0.5, 0.0),
    ],
)
def test_proactive_suggestion(answer, r_p, expected):
    assert proactive_suggestion_reward(answer, OPTIONS, "dog", VALID, r_p=r_p) == expected
    chat = [{"role": "assistant", "content": [{"type": "text", "text": answer}]}]
    assert proactive_suggestion_reward(chat, OPTIONS, 4, VALID, r_p=r_p) == expected


def test_state_format():
    assert state_format_reward("<t=0s></Silence><t=1s></Response> 1<t=2s>1<t=3s></Silence></Silence>") == 0.5
    assert state_format_reward("") == 0.0
    parts = state_format_reward(["</Silence>", "x"], components=True)
    assert parts == {"overall": 0.5, "turns": 2, "malformed": 1}
