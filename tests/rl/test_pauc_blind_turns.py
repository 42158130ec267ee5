"""The PAUC evaluator saves its blind answer's per-turn scores (``pauc_turns_blind.jsonl``, docs/spec.md §14, §15)
beside the model's (``pauc_turns.jsonl``): the same turns, and their mean is the ``blind_pauc_w0.5`` it reports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proactive_rl.evaluation import EvaluatorConfig, PAUCEvaluator

QUESTION = "Tell me whenever a new shape appears: what colour and shape is it?"


def _episodes(path: Path, golds: list[list[str]]) -> Path:
    """One episode per entry of `golds`, a turn per gold text, reply spans [1, 5] and [7, 11] (no video needed:
    the records are given, nothing is played)."""
    records = [
        {"id": f"{path.stem}{i}", "video": "none.mp4", "duration": 12.0, "instruction": QUESTION, "task": "pvqa",
         "meta": {"question": QUESTION},
         "targets": [{"time": 1.0 + 6 * k, "text": g, "window": [1.0 + 6 * k, 5.0 + 6 * k]} for k, g in enumerate(gs)]}
        for i, gs in enumerate(golds)
    ]  # fmt: skip
    path.write_text(json.dumps(records))
    return path


def _score(tmp_path: Path, train: list[list[str]], test: list[list[str]], said: dict[str, list]) -> tuple:
    config = EvaluatorConfig.from_dict(
        {"type": "pauc", "episodes": [{"source": str(_episodes(tmp_path / "test.json", test))}],
         "baseline_episodes": [{"source": str(_episodes(tmp_path / "train.json", train))}],
         "judge": {"type": "rule", "kind": "token_f1"}},
        "test.pauc",
    )  # fmt: skip
    evaluator = PAUCEvaluator(config, progress=False)
    records = [{"id": e.id, "responses": said.get(e.id, [])} for e in evaluator.items()]
    scored = evaluator.score(records, tmp_path / "out", plots=False)
    read = [
        [json.loads(line) for line in (tmp_path / "out" / name).read_text().splitlines()]
        for name in ("pauc_turns.jsonl", "pauc_turns_blind.jsonl")
    ]
    return scored, *read


def test_the_blind_answers_turns_are_saved_beside_the_models(tmp_path):
    train = [["A red circle appears.", "A red square appears."], ["A red circle appears."]]
    test = [["A blue square appears.", "A green circle appears."], ["A red circle appears."]]
    scored, model, blind = _score(tmp_path, train, test, {"test0": [(1.0, "A blue square appears.", False)]})
    assert [(t["episode_id"], t["turn"]) for t in blind] == [(t["episode_id"], t["turn"]) for t in model]
    # fitted on train: "A red circle appears." at the start of every reply span; token-F1 against each gold:
    # 1/3 ("appears": level 2, y = 1, PAUC 0.5), 2/3 (level 3, 1.0), 1 (level 3, 1.0)
    assert [t["predictions"] for t in blind] == [[{"time": 1.0, "text": "A red circle appears."}],
                                                 [{"time": 7.0, "text": "A red circle appears."}],
                                                 [{"time": 1.0, "text": "A red circle appears."}]]  # fmt: skip
    assert [t["levels"] for t in blind] == [[2], [3], [3]]
    assert [t["pauc"]["0.5"] for t in blind] == pytest.approx([0.5, 1.0, 1.0])
    mean = 100 * sum(t["pauc"]["0.5"] for t in blind) / len(blind)
    assert scored.metrics["blind_pauc_w0.5"] == pytest.approx(mean)
    for omega in ("0", "1"):  # every ω the evaluator reports
        assert scored.metrics[f"blind_pauc_w{omega}"] == pytest.approx(
            100 * sum(t["pauc"][omega] for t in blind) / len(blind)
        )
    assert scored.files["pauc_turns_blind"] == str(tmp_path / "out" / "pauc_turns_blind.jsonl")


def test_where_silence_is_the_floor_its_turns_score_silence(tmp_path):
    # fitted on train: "Red car." at 0 of every span; on test its token-F1 is 0 (level 1, y = 0): below silence
    scored, _, blind = _score(tmp_path, [["Red car."]] * 2, [["Blue boat."], ["Green bus."]], {})
    assert [t["pauc"]["0.5"] for t in blind] == [0.25, 0.25]
    assert scored.metrics["blind_pauc_w0.5"] == pytest.approx(25.0)
