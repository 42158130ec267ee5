"""The demo's ``comparisons.json`` and interval tables, from hand-written evaluation folders (no training)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proactive_rl.demo import comparisons, report, seeds

META = {"date": "today", "machine": "test", "wall_s": 1.0, "command": "proactive-rl demo"}


def _stage(key, evaluated=True):
    return {
        "key": key,
        "name": key,
        "status": "ok" if evaluated else "failed: x",
        "metrics": {} if evaluated else None,
    }


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def _evaluation(out: Path, key: str, prs_b: list[float], pauc: list[float], acc: list[bool], swap=None) -> None:
    """``<out>/eval/<key>``: episodes e0, e1 of accident and e2, e3 of atomic (PRS-U = PRS-B / 2), one PAUC turn per
    entry of `pauc`, one MCQA environment per entry of `acc` (and `swap`: the swapped images' outcomes)."""
    tasks = ["accident", "accident", "atomic", "atomic"]
    rows = [
        {"episode_id": f"e{i}", "group": t, "prs_u": b / 2, "prs_b": b} for i, (t, b) in enumerate(zip(tasks, prs_b))
    ]
    _jsonl(out / "eval" / key / "prs" / "prs_episodes.jsonl", rows)
    _jsonl(out / "eval" / key / "pauc" / "pauc_turns.jsonl",
           [{"episode_id": "p0", "turn": i, "pauc": {"0.5": s, "1.0": 0.0}} for i, s in enumerate(pauc)])  # fmt: skip
    _jsonl(out / "eval" / key / "mcqa" / "outcomes.jsonl", [{"id": f"m{i}", "success": s} for i, s in enumerate(acc)])
    if swap is not None:
        swapped = [{**r, "prs_b": r["prs_b"] / 2, "prs_u": r["prs_u"] / 2} for r in rows[:3]]  # e3: not swapped
        _jsonl(out / "eval" / key / "prs" / "prs_episodes_swap.jsonl", swapped)
        _jsonl(out / "eval" / key / "mcqa" / "outcomes_swap.jsonl",
               [{"id": f"m{i}", "success": s} for i, s in enumerate(swap)])  # fmt: skip


STAGES = [_stage("untrained"), _stage("grounding"), _stage("sft"), _stage("grpo_streaming", False), _stage("final")]


def _run(out: Path, shift: float = 0.0) -> list[dict]:
    _evaluation(out, "untrained", [0.0, 0.1, 0.2, 0.0], [0.1, 0.2, 0.3], [False, True, False, False])
    (out / "eval" / "grounding" / "caption").mkdir(parents=True)  # caption scores only: compared with nothing
    _evaluation(out, "sft", [0.5 + shift, 0.7, 0.4, 0.2], [0.3, 0.2, 0.5], [True, True, False, False])
    _evaluation(out, "grpo_streaming", [1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [True] * 4)  # stale: not run now
    _evaluation(
        out, "final", [0.6, 0.7, 0.6, 0.2], [0.3, 0.3, 0.5], [True, True, True, False], [False, True, False, False]
    )
    return STAGES


def _by_key(rows):
    return {(r["a"], r["b"], r["metric"], r["task"]): r for r in rows}


def test_every_comparison_with_its_hand_computed_difference(tmp_path):
    rows = comparisons.comparisons(tmp_path, _run(tmp_path))
    assert all(set(r) == {"a", "b", "metric", "task", "diff", "ci_low", "ci_high", "n"} for r in rows)
    got = _by_key(rows)
    cells = [(m, t) for m in ("prs_u", "prs_b") for t in ("accident", "atomic", "all")] + [
        ("pauc", "all"),
        ("acc", "all"),
    ]
    # each stage against the previous evaluated stage with that metric (grounding has none; grpo_streaming did not
    # run, its folder is stale), and the final PRS and MCQA accuracy against its swapped frames (PAUC saves none)
    expected = {("sft", "untrained", *c) for c in cells} | {("final", "sft", *c) for c in cells}
    swaps = {("final", "final swapped frames", *c) for c in cells if c[0] != "pauc"}
    assert set(got) == expected | swaps
    hand = {
        ("sft", "untrained", "prs_b", "accident"): (100 * (0.5 + 0.6) / 2, 2),
        ("sft", "untrained", "prs_u", "all"): (50 * (0.5 + 0.6 + 0.2 + 0.2) / 4, 4),
        ("final", "sft", "prs_b", "atomic"): (100 * (0.2 + 0.0) / 2, 2),
        ("final", "sft", "pauc", "all"): (100 * 0.1 / 3, 3),
        ("sft", "untrained", "acc", "all"): (25.0, 4),
        ("final", "final swapped frames", "acc", "all"): (50.0, 4),
        ("final", "final swapped frames", "prs_b", "atomic"): (100 * 0.6 / 2, 1),  # e3 was not played swapped
        ("final", "final swapped frames", "prs_b", "all"): (100 * (0.6 + 0.7 + 0.6) / 2 / 3, 3),
    }
    for key, (diff, n) in hand.items():
        assert (got[key]["diff"], got[key]["n"]) == (pytest.approx(diff), n), key
    for r in rows:
        assert r["ci_low"] <= r["diff"] <= r["ci_high"], r
    # the final stage's accident PRS-B gains 0.1 on e0 and 0 on e1: the interval spans exactly those two means
    accident = got[("final", "sft", "prs_b", "accident")]
    assert (accident["ci_low"], accident["ci_high"]) == pytest.approx((0.0, 10.0))


def test_the_report_writes_comparisons_json_and_a_table(tmp_path):
    stages = _run(tmp_path)
    files = report.write_report(tmp_path, stages, [], META)
    rows = json.loads(files["comparisons"].read_text())
    assert files["comparisons"] == tmp_path / "report" / "comparisons.json"
    assert rows == comparisons.comparisons(tmp_path, stages)
    text = files["markdown"].read_text()
    line = next(x for x in text.splitlines() if x.startswith("| final | final swapped frames | acc | all |"))
    assert "+50.00 [" in line and line.endswith("| 4 |")


def test_pooled_over_seeds_is_the_mean_of_the_seeds_differences(tmp_path):
    runs = {0: _run(tmp_path / "seed0"), 1: _run(tmp_path / "seed1", shift=0.3)}
    path = seeds.write_seeds_report(tmp_path, runs, ("accident",), META)
    rows = json.loads((tmp_path / "report" / "comparisons.json").read_text())
    got = _by_key(rows)
    pooled = got[("sft", "untrained", "prs_b", "accident")]
    one = _by_key(comparisons.comparisons(tmp_path / "seed0", STAGES))[("sft", "untrained", "prs_b", "accident")]
    assert pooled["diff"] == pytest.approx(one["diff"] + 100 * 0.3 / 2 / 2)  # seed 1 gains 0.3 more on one of two
    assert (pooled["n"], pooled["seeds"]) == (4, 2)
    assert all(r["ci_low"] <= r["diff"] <= r["ci_high"] for r in rows)
    assert "| sft | untrained | prs_b | accident |" in path.read_text()


def test_each_stage_against_the_blind_schedules_own_episode_scores(tmp_path):
    """``prs_episodes_blind.jsonl`` (the blind schedule's per-episode scores, written beside the model's) gives a
    paired row against the blind schedule per PRS metric and task."""
    stages = _run(tmp_path)
    blind = [{"episode_id": f"e{i}", "group": t, "prs_u": 0.1, "prs_b": 0.2}
             for i, t in enumerate(["accident", "accident", "atomic", "atomic"])]  # fmt: skip
    _jsonl(tmp_path / "eval" / "sft" / "prs" / "prs_episodes_blind.jsonl", blind)
    got = _by_key(comparisons.comparisons(tmp_path, stages))
    row = got[("sft", comparisons.BLIND, "prs_b", "accident")]
    assert (row["diff"], row["n"]) == (pytest.approx(100 * ((0.5 - 0.2) + (0.7 - 0.2)) / 2), 2)
    assert got[("sft", comparisons.BLIND, "prs_u", "all")]["diff"] == pytest.approx(
        100 * ((0.25 + 0.35 + 0.2 + 0.1) / 4 - 0.1)
    )
    assert not [k for k in got if k[0] == "final" and k[1] == comparisons.BLIND]  # final's folder has no blind file


def test_each_task_mean_with_its_interval_and_the_widest_named(tmp_path):
    """`task_means`: every evaluated stage's PRS mean per task (hand-computed) with a bootstrap interval that
    spans the episodes' own range; the blind schedule once; the reports name the widest interval."""
    stages = _run(tmp_path)
    blind = [{"episode_id": f"e{i}", "group": t, "prs_u": 0.1, "prs_b": 0.2}
             for i, t in enumerate(["accident", "accident", "atomic", "atomic"])]  # fmt: skip
    for key in ("sft", "final"):
        _jsonl(tmp_path / "eval" / key / "prs" / "prs_episodes_blind.jsonl", blind)
    rows = comparisons.task_means(tmp_path, stages)
    got = {(r["stage"], r["metric"], r["task"]): r for r in rows}
    assert {s for s, _, _ in got} == {"untrained", "sft", comparisons.BLIND, "final"}  # blind once, no stale stage
    assert {t for _, _, t in got} == {"accident", "atomic"}  # per task, not "all"
    sft = got[("sft", "prs_b", "accident")]  # episodes 0.5 and 0.7
    assert (sft["mean"], sft["n"]) == (pytest.approx(60.0), 2)
    assert (sft["ci_low"], sft["ci_high"]) == pytest.approx((50.0, 70.0))  # two items: the resampled means' range
    assert got[("sft", "prs_u", "atomic")]["mean"] == pytest.approx(100 * (0.2 + 0.1) / 2)
    assert comparisons.half_width(sft) == pytest.approx(10.0)
    flat = got[(comparisons.BLIND, "prs_b", "atomic")]
    assert (flat["mean"], flat["ci_low"], flat["ci_high"]) == pytest.approx((20.0, 20.0, 20.0))
    # the widest: the final atomic PRS-B, episodes 0.6 and 0.2 (±20; every other is ±10 or less)
    text = report.write_report(tmp_path, stages, [], META)["markdown"].read_text()
    assert "the widest is ±20.0 (final, atomic prs_b)" in text
    assert "| sft | 30.0 [25.0, 35.0] | 60.0 [50.0, 70.0] | 15.0 [10.0, 20.0] | 30.0 [20.0, 40.0] | 2 |" in text
    assert "| blind schedule | 10.0 [10.0, 10.0] | 20.0 [20.0, 20.0] |" in text
    runs = {0: _run(tmp_path / "seed0"), 1: _run(tmp_path / "seed1", shift=0.3)}
    # seed 1's final atomic PRS-B episodes are 0.3 and 0.2 (its final stage is shifted): ±5
    _evaluation(tmp_path / "seed1", "final", [0.6, 0.7, 0.3, 0.2], [0.3], [True])
    seeds_md = seeds.write_seeds_report(tmp_path, runs, ("accident",), META).read_text()
    assert "is ±20.0 (seed 0, final, atomic prs_b, 2 held-out episodes" in seeds_md
    _evaluation(tmp_path / "seed0", "final", [0.6, 0.7, 0.3, 0.2], [0.3], [True])
    seeds_md = seeds.write_seeds_report(tmp_path, runs, ("accident",), META).read_text()
    # now ±10 at most (untrained atomic PRS-B 0.2 and 0.0 comes first, in the stages' order)
    assert "is ±10.0 (seed 0, untrained, atomic prs_b, 2 held-out episodes" in seeds_md


def test_each_stage_against_the_blind_answers_own_pauc_turns(tmp_path):
    """``pauc_turns_blind.jsonl`` (the blind answer's per-turn PAUC, the same turn ids as the model's) gives a
    paired PAUC row against the blind schedule."""
    stages = _run(tmp_path)
    _jsonl(tmp_path / "eval" / "sft" / "pauc" / "pauc_turns_blind.jsonl",
           [{"episode_id": "p0", "turn": i, "pauc": {"0.5": 0.25}} for i in range(3)])  # fmt: skip
    got = _by_key(comparisons.comparisons(tmp_path, stages))
    row = got[("sft", comparisons.BLIND, "pauc", "all")]  # sft's turns: 0.3, 0.2, 0.5
    assert (row["diff"], row["n"]) == (pytest.approx(100 * (0.05 - 0.05 + 0.25) / 3), 3)
    assert row["ci_low"] <= row["diff"] <= row["ci_high"]
    assert ("final", comparisons.BLIND, "pauc", "all") not in got  # final's folder has no blind turns
    assert {r["stage"] for r in comparisons.task_means(tmp_path, stages)} == {"untrained", "sft", "final"}


# One seed's PAUC turns (ω = 0.5) of the final model and of the blind answer, which says "A red circle appears." at
# the start of every reply span: token-F1 2/3 or more (level 3, PAUC 1) where the colour or the shape matches the
# gold's, 1/3 (level 2, PAUC 0.5: only "appears") where neither does. The model: silent in turn 0 (0.25), right
# 2 s late (0.8), right 4 s late (0.6), wrong on time (level 1: 0).
GOLD = ["A red circle appears.", "A blue circle appears.", "A blue square appears.", "A green triangle appears."]
BLIND_TURNS = [(0.0, "A red circle appears.", 3, 1.0), (0.0, "A red circle appears.", 3, 1.0),
               (0.0, "A red circle appears.", 2, 0.5), (0.0, "A red circle appears.", 2, 0.5)]  # fmt: skip
MODEL_TURNS = [None, (2.0, "A blue circle appears.", 3, 0.8), (4.0, "A blue square appears.", 3, 0.6),
               (0.0, "Three.", 1, 0.0)]  # fmt: skip


def _pauc_turns(out: Path, turns, name: str) -> None:
    """``<out>/eval/grpo_suggestion/pauc/<name>``: turn i of episode q0, reply span [10 i, 10 i + 8]."""
    rows = []
    for i, (gold, turn) in enumerate(zip(GOLD, turns)):
        said, levels, score = ([], [], 0.25) if turn is None else ([{"time": 10 * i + turn[0], "text": turn[1]}],
                                                                    [turn[2]], turn[3])  # fmt: skip
        rows.append({"episode_id": "q0", "turn": i, "span": [10 * i, 10 * i + 8], "gold": gold,
                     "predictions": said, "levels": levels, "pauc": {"0.5": score}})  # fmt: skip
    _jsonl(out / "eval" / "grpo_suggestion" / "pauc" / name, rows)


FINAL_STAGES = [_stage("grpo_suggestion")]


# a model right on time in every span, against a blind answer that is only partially right in each: it beats it
RIGHT = [(0.0, gold, 3, 1.0) for gold in GOLD]
PARTIAL = [(0.0, "A pink star appears.", 2, 0.5)] * 4


def _floor_run(out: Path, model=MODEL_TURNS, blind=BLIND_TURNS) -> list[dict]:
    _pauc_turns(out, model, "pauc_turns.jsonl")
    _pauc_turns(out, blind, "pauc_turns_blind.jsonl")
    return FINAL_STAGES


def test_the_pauc_floor_is_explained_when_the_final_model_does_not_beat_it(tmp_path):
    from proactive_rl.demo.pauc_floor import floor_note

    gains = comparisons.comparisons(tmp_path, _floor_run(tmp_path))
    row = _by_key(gains)[("grpo_suggestion", comparisons.BLIND, "pauc", "all")]
    assert (row["diff"], row["n"]) == (pytest.approx(100 * (0.25 + 0.8 + 0.6 + 0.0) / 4 - 75.0), 4)
    note = floor_note([tmp_path / "eval" / "grpo_suggestion"], gains)
    assert note.startswith("**On PAUC the final model does not beat the blind schedule**: 41.2 vs 75.0, a gain of "
                           "-33.8 [")  # fmt: skip
    assert "over 4 held-out turns" in note
    assert "says 'A red circle appears.' at 0.0 of every reply span" in note
    assert "mostly covered (F1 >= 0.5) on 50 % of the turns and partially covered (F1 >= 0.2) on 50 % (it shares " \
           "'appears' with every gold answer, so it is never rated incorrect): a fixed sentence earns 75 of 100 " \
           "without looking." in note  # fmt: skip
    assert note.endswith("The final model's commonest answer in the reply spans is 'A blue circle appears.', and 0 % "
                         "of its answers (3 distinct texts) are the blind answer's own text: turn by turn it scores "
                         "below the blind answer on 3 of 4 turns (1 silent, 1 answered later, 1 on time with worse "
                         "words), as much on 0 and more on 1.")  # fmt: skip
    # a model that says the blind answer's text, on time but in one span: it ties, and is silent in the others
    tie = [(0.0, "A red circle appears.", 3, 1.0), None, None, None]
    note = floor_note([tmp_path / "eval" / "grpo_suggestion"],
                      comparisons.comparisons(tmp_path, _floor_run(tmp_path, tie)))  # fmt: skip
    assert note.endswith("is 'A red circle appears.', and 100 % of its answers (1 distinct text) are the blind "
                         "answer's own text, so at best it ties the blind answer: turn by turn it scores below the "
                         "blind answer on 3 of 4 turns (3 silent, 0 answered later, 0 on time with worse words), as "
                         "much on 1 and more on 0.")  # fmt: skip
    # a model that beats the floor: nothing to explain
    gains = comparisons.comparisons(tmp_path, _floor_run(tmp_path, RIGHT, PARTIAL))
    assert _by_key(gains)[("grpo_suggestion", comparisons.BLIND, "pauc", "all")]["ci_low"] == pytest.approx(50.0)
    assert floor_note([tmp_path / "eval" / "grpo_suggestion"], gains) == ""
    assert floor_note([tmp_path / "eval" / "grpo_suggestion"], []) == ""  # no row: not evaluated


def test_the_seeds_report_explains_the_pauc_floor_iff_the_pooled_claim_fails(tmp_path):
    runs = {0: _floor_run(tmp_path / "seed0"), 1: _floor_run(tmp_path / "seed1")}
    text = seeds.write_seeds_report(tmp_path, runs, ("accident",), META).read_text()
    note = next(line for line in text.splitlines() if line.startswith("**On PAUC"))
    assert note.startswith("**On PAUC the final model does not beat the blind schedule** over 2 seeds: 41.2 vs 75.0")
    assert "over 8 held-out turns" in note
    assert "says 'A red circle appears.' / 'A red circle appears.' (each seed's, fitted on its training split)" in note
    assert "(2 silent, 2 answered later, 2 on time with worse words), as much on 0 and more on 2." in note
    # right below the claims table
    lines = text.splitlines()
    assert lines[lines.index(note) - 1] == "" and lines[lines.index(note) - 2].startswith("| ")
    runs = {0: _floor_run(tmp_path / "seed0", RIGHT, PARTIAL), 1: _floor_run(tmp_path / "seed1", RIGHT, PARTIAL)}
    assert "On PAUC" not in seeds.write_seeds_report(tmp_path, runs, ("accident",), META).read_text()
