"""The blind schedule (docs/spec.md §14): hand-computed optima in both fitting modes, the fast score matrix
against `prs_score` (an independent loop), leave-one-out against refitting on each n - 1 subset."""

import math
import random

import pytest

from proactive_eval import Episode
from proactive_eval.benchmarks.p3i.blind import _Candidates, _content_fn, _ScoreTable, blind_prs_summary, fit_blind_prs
from proactive_rewards import Target, prs_score

E = math.exp


def _warnings(times=(4, 6, 8)):
    return [
        Episode(id=f"w{t}", task="accident", duration=10.0, instruction="warn", targets=[Target(float(t), "Warning")])
        for t in times
    ]


def test_hand_computed_optimum_fitted_and_leave_one_out():
    episodes = _warnings()
    # Fitted on the three: Σ exp(-0.05 |t - τ|) peaks at the median, 6 s: (e^-0.1 + 1 + e^-0.1) / 3.
    fitted = blind_prs_summary(episodes, reference=episodes)
    assert fitted["schedules"]["accident"]["prs_b"]["responses"] == [{"time": 6.0, "text": "Warning"}]
    assert fitted["overall"]["prs_b"] == pytest.approx(100 * (2 * E(-0.1) + 1) / 3, abs=1e-4)  # 93.6558
    # PRS-U credits only targets at or before the response: 8 s, (e^-0.2 + e^-0.1 + 1) / 3.
    assert fitted["schedules"]["accident"]["prs_u"]["responses"] == [{"time": 8.0, "text": "Warning"}]
    assert fitted["overall"]["prs_u"] == pytest.approx(100 * (E(-0.2) + E(-0.1) + 1) / 3, abs=1e-4)
    # Leave-one-out: two targets are best served at either of them (a tie, the earlier time wins):
    # without 4 -> 6 s (scores e^-0.1 on 4), without 6 -> 4 s (e^-0.1 on 6), without 8 -> 4 s (e^-0.2 on 8).
    rows: list = []
    loo = blind_prs_summary(episodes, per_episode=rows)
    assert loo["fit"] == {"accident": "leave_one_out"}
    assert loo["overall"]["prs_b"] == pytest.approx(100 * (2 * E(-0.1) + E(-0.2)) / 3, abs=1e-4)  # 87.6135
    # the same scores per episode (what the demo's paired intervals against the blind schedule read)
    assert [(r["episode_id"], r["group"]) for r in rows] == [
        ("w4", "accident"),
        ("w6", "accident"),
        ("w8", "accident"),
    ]
    assert [r["prs_b"] for r in rows] == pytest.approx([E(-0.1), E(-0.1), E(-0.2)], abs=1e-6)
    assert loo == blind_prs_summary(episodes)  # the summary itself is unchanged
    blind = fit_blind_prs(episodes)
    assert [r.time for r in blind.predictions["B"]["w4"]] == [6.0]
    assert [r.time for r in blind.predictions["B"]["w6"]] == [4.0]
    assert [r.time for r in blind.predictions["B"]["w8"]] == [4.0]


def test_fitted_on_a_reference_split_scores_the_evaluated_episodes():
    train = _warnings((6, 6, 6, 9))
    test = _warnings((3,))
    summary = blind_prs_summary(test, reference=train)
    assert summary["fit"] == {"accident": "reference"}
    assert summary["schedules"]["accident"]["prs_b"]["responses"] == [{"time": 6.0, "text": "Warning"}]
    assert summary["overall"]["prs_b"] == pytest.approx(100 * E(-0.15), abs=1e-4)


def _random_episodes(rng, n, tasks=("atomic",)):
    out = []
    for i in range(n):
        duration = rng.uniform(8, 40)
        times = sorted(round(rng.uniform(0, duration), 2) for _ in range(rng.randint(1, 3)))
        targets = []
        for t in times:
            window = (max(0.0, t - 2), min(duration, t + 3)) if rng.random() < 0.3 else None
            targets.append(Target(t, rng.choice(["1", "2", "Warning"]), window))
        out.append(Episode(f"e{i}", rng.choice(tasks), duration, "x", targets, fps=rng.choice([1.0, 2.0])))
    return out


@pytest.mark.parametrize("mode", ["U", "B"])
def test_score_matrix_equals_prs_score(mode):
    rng = random.Random(1)
    episodes = _random_episodes(rng, 25)
    cands = _Candidates(episodes)
    table = _ScoreTable(episodes, cands, mode, 0.05, _content_fn(None))
    for _ in range(20):
        others = tuple(rng.randrange(len(cands)) for _ in range(rng.randint(0, 3)))
        matrix = table.slot_scores(others)
        for column in [0] + [rng.randrange(1, len(cands) + 1) for _ in range(4)]:
            schedule = others + ((column - 1,) if column else ())
            for row, episode in enumerate(episodes):
                responses = []
                for c in schedule:
                    item = cands.item(c)
                    if item.time_in(episode.duration) <= episode.duration:
                        responses.append((item.time_in(episode.duration), item.text))
                expected = prs_score(responses, episode.targets, mode=mode).score
                assert matrix[row, column] == pytest.approx(expected, abs=1e-12)


def test_leave_one_out_equals_refitting_without_each_episode():
    rng = random.Random(2)
    episodes = _random_episodes(rng, 12)
    blind = fit_blind_prs(episodes)
    for held in episodes:
        others = [e for e in episodes if e is not held]
        refit = fit_blind_prs([held], reference=others)
        for mode in ("U", "B"):
            assert blind.predictions[mode][held.id] == refit.predictions[mode][held.id]


def test_one_response_schedule_is_the_grid_argmax():
    rng = random.Random(3)
    episodes = [e for e in _random_episodes(rng, 15) if len(e.targets) == 1]
    blind = fit_blind_prs(episodes, reference=episodes)
    cands = _Candidates(episodes)
    totals = []
    for c in range(len(cands)):
        item = cands.item(c)
        total = 0.0
        for e in episodes:
            t = item.time_in(e.duration)
            total += prs_score([(t, item.text)] if t <= e.duration else [], e.targets, mode="B").score
        totals.append(total)
    best = max(totals)
    fitted = blind.schedules[("atomic", "B")]
    got = sum(prs_score(fitted.responses(e), e.targets, mode="B").score for e in episodes)
    assert got == pytest.approx(best, abs=1e-9)


def test_the_blind_pauc_answer_is_never_below_silence():
    """Two answers with no word in common, two episodes each: leave-one-out fits each episode on the other three,
    whose most common answer is the other one; said at the start of the reply span it is judged wrong (level 1,
    y = 0 over the whole span, PAUC 0 at every ω: docs/spec.md §5), below silence's 0.25. The floor is silence."""
    from proactive_eval.benchmarks.pvqa.metric import score_pauc
    from proactive_eval.commands.blind import SILENCE, blind_floor
    from proactive_eval.judges import RuleJudge
    from proactive_rewards import Response

    texts = ["red car", "red car", "blue boat", "blue boat"]
    episodes = [
        Episode(id=f"p{k}", task="pvqa", duration=6.0, instruction="What is shown?",
                targets=[Target(1.0, text, window=(1.0, 5.0))])
        for k, text in enumerate(texts)
    ]  # fmt: skip
    judge = RuleJudge("token_f1")
    wrong = {e.id: [Response(1.0, "blue boat" if e.targets[0].text == "red car" else "red car")] for e in episodes}
    assert score_pauc(episodes, wrong, judge, progress=False).summary()["overall"]["omega=0.5"] == 0.0
    floor = blind_floor("pauc", episodes, judge=judge)
    assert SILENCE["pauc"] == 25.0
    assert [floor["overall"][f"omega={o}"] for o in (0, 0.5, 1)] == [25.0, 25.0, 25.0]
    schedule = floor["schedules"]["pvqa"]["pauc"]
    assert (
        schedule["silence_at"] == [0, 0.5, 1]
        and "; silence at ω=0, 0.5, 1 (the fitted answers" in schedule["described"]
    )
    assert floor["fit"] == {"pvqa": "leave_one_out"}
    # fitted on themselves (the empty reply is a candidate), the right answers: above silence
    assert blind_floor("pauc", episodes, episodes, judge=judge)["overall"]["omega=0.5"] > 25.0
