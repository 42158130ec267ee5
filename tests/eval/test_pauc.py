"""PAUC (docs/spec.md §5): hand-computed turns, and a transcription of the official scorer as the reference."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proactive_eval import Episode
from proactive_eval.benchmarks.pvqa.metric import pauc_turn, score_pauc
from proactive_rewards import Target


class TableJudge:
    """A judge callable answering from a {cumulative text: level} table, recording what it was shown."""

    def __init__(self, table):
        self.table, self.seen = table, []

    def __call__(self, question, gold, text):
        self.seen.append((question, gold, text))
        return self.table[text]


def test_no_prediction_in_span_scores_a_quarter():
    judge = TableJudge({})
    assert pauc_turn((10.0, 20.0), [], judge) == 0.25
    # predictions outside [u, v] are not kept, and the judge is never called
    assert pauc_turn((10.0, 20.0), [(9.9, "early"), (20.1, "late")], judge, omega=0) == 0.25
    assert judge.seen == []


def test_bounds_are_inclusive():
    # a prediction exactly at u with level 3: the curve is at 2 over the whole span
    assert pauc_turn((10.0, 20.0), [(10.0, "x")], TableJudge({"x": 3}), omega=0) == 1.0
    # exactly at v: the last segment has zero width, the area is 10 * 0.5 / 20
    assert pauc_turn((10.0, 20.0), [(20.0, "x")], TableJudge({"x": 3}), omega=0) == 0.25


@pytest.mark.parametrize("last_level, expected", [(3, 1.0), (2, 0.5), (1, 0.0)])
def test_omega_one_is_last_score_over_two(last_level, expected):
    judge = TableJudge({"a": 1, "a b": 3, "a b c": last_level})
    preds = [(12.0, "a"), (15.0, "b"), (18.0, "c")]
    assert pauc_turn((10.0, 20.0), preds, judge, omega=1) == pytest.approx(expected)


def test_omega_zero_three_predictions_step_area_by_hand():
    # span [10, 30]; y = level - 1: 1 at t=12, 0 at t=16, 2 at t=25
    judge = TableJudge({"a": 2, "a b": 1, "a b c": 3})
    preds = [(25.0, "c"), (12.0, "a"), (16.0, "b")]  # any order in, time order kept
    # area = 2*0.5 + 4*1 + 9*0 + 5*2 = 15; max area = 20 * 2
    got = pauc_turn((10.0, 30.0), preds, judge, omega=0, question="Q?", gold="G")
    assert got == pytest.approx(15 / 40)
    # the judge saw the question, the gold and the cumulative concatenation of kept predictions
    assert judge.seen == [("Q?", "G", "a"), ("Q?", "G", "a b"), ("Q?", "G", "a b c")]
    # omega = 0.5 shifts x to 1, 3, 7.5: area = 1*0.5 + 2*1 + 4.5*0 + 12.5*2 = 27.5
    assert pauc_turn((10.0, 30.0), preds, judge, omega=0.5) == pytest.approx(27.5 / 40)


def test_duplicate_prediction_text_is_ignored():
    judge = TableJudge({"a": 2, "a b": 3})
    with_dup = pauc_turn((0.0, 10.0), [(2.0, "a"), (4.0, "a"), (6.0, "b")], judge, omega=0)
    assert [s[2] for s in judge.seen] == ["a", "a b"]  # never "a a"
    # area = 2*0.5 + 4*1 + 4*2 = 13 over 20
    assert with_dup == pytest.approx(13 / 20)


def test_related_span_drops_a_late_lower_score():
    judge = TableJudge({"a": 3, "a b": 2})
    preds = [(2.0, "a"), (6.0, "b")]
    # related ends at 4: the score 1 at t=6 is below the last score (2) at or before 4, so it is dropped
    # area = 2*0.5 + 8*2 = 17 over 20
    assert pauc_turn((0.0, 10.0), preds, judge, omega=0, related=(0.0, 4.0)) == pytest.approx(17 / 20)
    # without a related span the drop does not happen: 2*0.5 + 4*2 + 4*1 = 13
    assert pauc_turn((0.0, 10.0), preds, judge, omega=0) == pytest.approx(13 / 20)
    # a late *higher* score is kept
    up = TableJudge({"a": 2, "a b": 3})
    assert pauc_turn((0.0, 10.0), preds, up, omega=0, related=(0.0, 4.0)) == pytest.approx((1 + 4 + 8) / 20)


def test_unparseable_judge_answer_drops_the_point():
    judge = TableJudge({"a": None, "a b": 3})
    # only (6, 2) remains: 6*0.5 + 4*2 = 11 over 20
    assert pauc_turn((0.0, 10.0), [(2.0, "a"), (6.0, "b")], judge, omega=0) == pytest.approx(11 / 20)
    # text answers are parsed like the official scorer (first character 1-3), anything else drops
    texty = TableJudge({"a": "Score: 3", "a b": " 3 (mostly covered)"})
    assert pauc_turn((0.0, 10.0), [(2.0, "a"), (6.0, "b")], texty, omega=0) == pytest.approx(11 / 20)
    # every answer unparseable: like an unanswered turn
    assert pauc_turn((0.0, 10.0), [(2.0, "a")], TableJudge({"a": 7}), omega=0) == 0.25


def _official(span, preds, levels, omega, related_end):
    """The official ProactiveVideoQA scorer, transcribed (dict of judge scores keyed by time, then
    `_area_under_line_ratio`), as an independent reference."""
    ts0, ts1 = span
    added, judge_scores = [], {}
    for t, s in preds:
        if not ts0 <= t <= ts1 or s in added:
            continue
        added.append(s)
        m = re.match(r"[123]", str(levels[" ".join(added)]).strip())
        if m:
            judge_scores[t] = int(m.group()) - 1
    if len(judge_scores) > 1:
        last, drop = 0, []
        for t, sc in sorted(judge_scores.items()):
            if t <= related_end:
                last = sc
            elif sc < last:
                drop.append(t)
        for t in drop:
            del judge_scores[t]
    if not judge_scores:
        return 0.25
    pts = sorted([[t - ts0, s] for t, s in judge_scores.items()])
    pts = [(x * (1 - omega), y) for x, y in pts]
    max_x = ts1 - ts0
    pts.append((max_x, pts[-1][1]))
    prev_y, prev_x, area = 0.5, 0, 0.0
    for x1, y1 in pts:
        area += (x1 - prev_x) * prev_y
        prev_x, prev_y = x1, y1
    return area / (max_x * 2)


@settings(max_examples=150, deadline=None)
@given(
    times=st.lists(st.integers(0, 40), max_size=6),
    words=st.lists(st.sampled_from(["x", "y", "z"]), min_size=6, max_size=6),
    seed=st.integers(0, 10**6),
    omega=st.sampled_from([0, 0.25, 0.5, 1]),
    related_end=st.sampled_from([None, 15.0, 22.0]),
)
def test_matches_official_transcription(times, words, seed, omega, related_end):
    preds = sorted((float(t), w) for t, w in zip(times, words))
    levels = {}

    def judge(q, g, text):
        return levels.setdefault(text, ["1", "2", "3", "?"][hash((text, seed)) % 4])

    got = pauc_turn((10.0, 30.0), preds, judge, omega=omega, related=(10.0, related_end) if related_end else None)
    want = _official((10.0, 30.0), preds, levels, omega, related_end if related_end else 30.0)
    assert got == pytest.approx(want)


def _pvqa_episode(eid, spans, subset=None):
    targets = [Target(a, f"gold{i}", (a, b), None) for i, (a, b) in enumerate(spans)]
    meta = {"question": f"Q {eid}"} | ({"subset": subset} if subset else {})
    return Episode(id=eid, task="pvqa", duration=100.0, instruction=f"Q {eid}", targets=targets, meta=meta)


def test_score_pauc_turn_and_video_weighting():
    episodes = [_pvqa_episode("v1", [(0.0, 10.0), (20.0, 30.0)]), _pvqa_episode("v2", [(0.0, 10.0)])]
    preds = {"v1": [(0.0, "right")], "v2": [(0.0, "wrong")], "stray": [(1.0, "x")]}
    calls = []

    def judge(q, g, text):
        calls.append((q, g, text))
        return 3 if text == "right" else 1

    res = score_pauc(episodes, preds, judge, progress=False)
    # v1 turn 0: 1.0; v1 turn 1: no prediction -> 0.25; v2 turn 0: 0.0 (at every omega)
    summary = res.summary()["overall"]
    assert summary["omega=0.5"] == pytest.approx(100 * (1.0 + 0.25 + 0.0) / 3)
    assert summary["video_omega=0.5"] == pytest.approx(100 * ((1.0 + 0.25) / 2 + 0.0) / 2)
    assert summary["num_turns"] == 3 and summary["num_videos"] == 2
    assert sorted(calls) == [("Q v1", "gold0", "right"), ("Q v2", "gold0", "wrong")]
    assert res.unknown_ids == ["stray"]
    assert [t.pauc[0] for t in res.turns] == [1.0, 0.25, 0.0]


def test_score_pauc_batches_through_score_many(monkeypatch):
    import proactive_eval.benchmarks.pvqa.metric as pauc_mod

    monkeypatch.setattr(pauc_mod, "pauc_prompt", lambda q, g, p: f"{q}|{g}|{p}")

    class BatchJudge:
        def __init__(self):
            self.batches = []

        def score_many(self, prompts, progress=True):
            self.batches.append(list(prompts))
            return [3 if p.endswith("|a") else "garbage" for p in prompts]

    judge = BatchJudge()
    episodes = [_pvqa_episode("v1", [(0.0, 10.0)]), _pvqa_episode("v2", [(0.0, 10.0)])]
    preds = {"v1": [(2.0, "a"), (6.0, "b")], "v2": [(4.0, "a")]}
    res = pauc_mod.score_pauc(episodes, preds, judge, omegas=(0,), progress=False)
    assert len(judge.batches) == 1  # one batch with every prompt
    assert sorted(judge.batches[0]) == ["Q v1|gold0|a", "Q v1|gold0|a b", "Q v2|gold0|a"]
    # v1: (2, 2) and the unparseable point dropped -> 2*0.5 + 8*2 = 17/20; v2: 4*0.5 + 6*2 = 14/20
    assert [t.pauc[0] for t in res.turns] == pytest.approx([0.85, 0.7])
    assert res.summary()["overall"]["unparseable"] == 1


def test_target_without_window_is_an_error():
    ep = Episode(id="e", task="pvqa", duration=10.0, instruction="q", targets=[Target(1.0, "g")])
    with pytest.raises(ValueError, match="targets\\[0\\].*window"):
        score_pauc([ep], {}, lambda q, g, p: 3, progress=False)


def test_one_level_parser_two_readings():
    """The metric reads text like the official scorer (first character); the judges read it leniently first."""
    from proactive_eval.benchmarks.pvqa.metric import parse_judge_level
    from proactive_eval.judges import parse_level

    # (text, official reading, judge reading), by hand from `re.match(r"[123]", text.strip())` and the judge rules
    cases = [("3", 3, 3), (" 2\n", 2, 2), ("Score: 3", None, 3), ("2.5", 2, None), ("<think>1</think>3", None, 3)]
    for text, official, lenient in cases:
        assert (parse_judge_level(text), parse_level(text)) == (official, lenient), text
    assert [parse_judge_level(x) for x in (1, 3, 0, 4, True, None)] == [1, 3, None, None, None, None]
