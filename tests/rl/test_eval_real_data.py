"""`proactive-rl eval` and the training callback on real, imperfect data (docs/spec.md §1, §4, §13).

- 6 episodes, one video missing and one cut short: rc 0, metrics over the 4 playable, both failures named with
  their reasons, coverage 4/6 printed beside the metrics; a second run replays nothing already finished;
- intervention PRS in the callback credits "please stop" against "stop" with the reward's token-F1 (2/3), and asks
  the judge when one is configured.

The numbers are checked against references that do not use the evaluator: `proactive_eval.benchmarks.p3i.metric.score_prs` over
the predictions file the run wrote (4 episodes), and the synthetic oracle, which answers every target on time
(PRS 100, docs/spec.md §4).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proactive_eval.benchmarks.p3i.metric import score_prs
from proactive_eval.episodes import load_episodes
from proactive_eval.predictions import load_predictions
from proactive_eval.streaming import ScriptedPolicy
from proactive_eval.video import write_video
from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model
from proactive_rl.synthetic import generate_episodes, render_frames
from tests.support.fake_openai import FakeOpenAI
from tests.support.media import cut, write_head_indexed_video

PLAYABLE = ["ep0", "ep1", "ep2", "ep3"]


@pytest.fixture(scope="module")
def six_episodes(tmp_path_factory) -> Path:
    """Synthetic counting episodes as real mp4s: ep4's video is missing, ep5's cut short (it opens, then stops)."""
    root = tmp_path_factory.mktemp("data")
    (root / "videos").mkdir()
    records = []
    for k, episode in enumerate(generate_episodes("atomic", 6, 5, duration=(10, 10), size=32)):
        record = {**episode.to_dict(), "id": f"ep{k}", "video": f"videos/ep{k}.mp4"}
        record["meta"] = {}
        if k < 4:
            write_video(root / "videos" / f"ep{k}.mp4", [f for _, f in render_frames(episode)], fps=1.0)
        elif k == 5:
            record["duration"] = 20.0  # the cut file says 20 s
            cut(write_head_indexed_video(root / "videos" / "ep5.mp4", 20))
        records.append(record)
    path = root / "episodes.json"
    path.write_text(json.dumps(records))
    return path


def _config(tmp_path: Path, episodes: Path, **extra) -> Path:
    path = tmp_path / "eval.yaml"
    evaluator = {"type": "prs", "episodes": [{"source": str(episodes)}], "max_new_tokens": 4, **extra}
    path.write_text(json.dumps({"evaluators": [evaluator]}))
    return path


@pytest.mark.slow
def test_proactive_rl_eval_skips_unplayable_episodes_and_resumes(six_episodes, tmp_path, capsys, monkeypatch):
    import proactive_eval.streaming as streaming
    from proactive_rl.cli import main

    played = []
    run_episode = streaming.run_episode

    def counting(policy, episode, *args, **kwargs):
        played.append(episode.id)
        return run_episode(policy, episode, *args, **kwargs)

    monkeypatch.setattr(streaming, "run_episode", counting)
    config, out = _config(tmp_path, six_episodes), tmp_path / "res"
    argv = ["eval", "--config", str(config), "--model", "tiny:qwen2_5_vl:xs", "--out", str(out), "--no-plots"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "| prs | prs_b |" in printed and "| 4/6 |" in printed.split("| prs | prs_b |")[1].splitlines()[0]
    assert "ep4 not played" in printed and "ep5 not played" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["complete"]
    entry = results["evaluators"]["prs"]
    reasons = {f["id"]: f["reason"] for f in entry["summary"]["failures"]}
    assert "ep4.mp4: file not found" in reasons["ep4"] and "ep5.mp4: truncated video" in reasons["ep5"]
    assert entry["summary"]["overall"]["coverage"] == "4/6"
    assert (
        results["metrics"]["prs/coverage"] == pytest.approx(4 / 6) and results["metrics"]["prs/failed_episodes"] == 2
    )
    # the metrics are those of the 4 playable episodes, recomputed from the predictions the run wrote
    predictions = load_predictions(out / "prs" / "predictions.jsonl")
    assert sorted(predictions) == PLAYABLE
    playable = [e for e in load_episodes(six_episodes) if e.id in PLAYABLE]
    reference = score_prs(playable, predictions).summary()["overall"]
    assert results["metrics"]["prs/prs_b"] == pytest.approx(reference["prs_b"])
    assert results["metrics"]["prs/prs_u"] == pytest.approx(reference["prs_u"])
    assert sorted(played) == sorted(PLAYABLE + ["ep4", "ep5"])

    # a second run replays nothing already finished: only the two unplayable episodes are tried again
    before = (out / "prs" / "predictions.jsonl").read_text()
    played.clear()
    assert main(argv) == 0
    assert sorted(played) == ["ep4", "ep5"]
    again = json.loads((out / "results.json").read_text())
    assert again["metrics"] == results["metrics"] and again["evaluators"]["prs"]["resumed_items"] == 4
    assert (out / "prs" / "predictions.jsonl").read_text() == before
    assert not list((out / "prs").glob("partial-rank*.jsonl"))


def test_callback_counts_only_playable_episodes(six_episodes, tmp_path, monkeypatch):
    """With the oracle (every target on time: 100), a metric over 6 with the failures as zeros would read 66.67."""
    from proactive_rl.models import build_tiny
    from proactive_rl.synthetic import OraclePolicy

    monkeypatch.setattr("proactive_rl.evaluation.policy.model_policy", lambda *a, **k: OraclePolicy())
    config = EvalCallbackConfig.from_dict({"evaluators": [{"type": "prs", "episodes": [str(six_episodes)]}]})
    results = evaluate_model(*build_tiny("qwen2_5_vl", "xs", seed=0), build_evaluators(config.evaluators))
    assert results["complete"]
    assert results["metrics"]["prs/prs_b"] == pytest.approx(100.0)
    assert results["evaluators"]["prs"]["summary"]["overall"]["coverage"] == "4/6"
    # resuming: a second run with the same settings replays nothing finished; other settings replay everything
    import proactive_eval.streaming as streaming

    played, run_episode = [], streaming.run_episode
    monkeypatch.setattr(
        streaming, "run_episode", lambda p, e, *a, **k: played.append(e.id) or run_episode(p, e, *a, **k)
    )
    tiny = build_tiny("qwen2_5_vl", "xs", seed=0)
    everything = sorted(PLAYABLE + ["ep4", "ep5"])
    for turn_length, expected, resumed in ((4, everything, 0), (4, ["ep4", "ep5"], 4), (3, everything, 0)):
        raw = {"type": "prs", "episodes": [str(six_episodes)], "max_new_tokens": turn_length}
        evaluators = build_evaluators(EvalCallbackConfig.from_dict({"evaluators": [raw]}).evaluators)
        played.clear()
        results = evaluate_model(*tiny, evaluators, out_dir=tmp_path / "r", meta={"checkpoint": "x"}, resume=True)
        assert results["metrics"]["prs/prs_b"] == pytest.approx(100.0) and sorted(played) == expected
        assert results["evaluators"]["prs"]["resumed_items"] == resumed
    assert (tmp_path / "r" / "prs" / "predictions.jsonl.stale").is_file()  # the other run's, set aside
    raising = EvalCallbackConfig.from_dict(
        {"evaluators": [{"type": "prs", "episodes": [str(six_episodes)], "on_error": "raise"}]}
    )
    results = evaluate_model(*build_tiny("qwen2_5_vl", "xs", seed=0), build_evaluators(raising.evaluators))
    assert not results["complete"] and "ep4.mp4: file not found" in results["incomplete"][0]["error"]


# ---- intervention content scorer in the callback -----------------------------------------------------------


def _intervention(tmp_path: Path) -> Path:
    import numpy as np

    path = tmp_path / "intervention.json"
    write_video(tmp_path / "i1.mp4", [np.full((16, 16, 3), 30 * k, np.uint8) for k in range(8)], fps=1.0)
    record = {"id": "i1", "task": "intervention", "video": "i1.mp4", "duration": 8.0, "instruction": "Act."}
    path.write_text(json.dumps([{**record, "targets": [{"time": 5.0, "text": "stop", "window": [4.0, 8.0]}]}]))
    return path


def _say(monkeypatch, text: str) -> None:
    script = {"i1": [(5.0, text)]}
    monkeypatch.setattr(
        "proactive_rl.evaluation.policy.model_policy", lambda *a, **k: ScriptedPolicy(script, raw=True)
    )


def test_callback_intervention_prs_uses_token_f1_and_the_one_turn_rule(tmp_path, monkeypatch):
    from proactive_rl.models import build_tiny

    tiny = build_tiny("qwen2_5_vl", "xs", seed=0)
    config = EvalCallbackConfig.from_dict(
        {"evaluators": [{"type": "prs", "episodes": [str(_intervention(tmp_path))]}]}
    )
    _say(monkeypatch, "</Response> please stop")
    results = evaluate_model(*tiny, build_evaluators(config.evaluators))
    # "please stop" against "stop": token-F1 2/3 inside the window, the intervention reward's credit
    assert results["metrics"]["prs/prs_b"] == pytest.approx(100 * 2 / 3)
    assert results["evaluators"]["prs"]["summary"]["groups"]["intervention"]["content_scorer"] == "rule:token_f1"
    # a bare turn breaks the state-token protocol: malformed, 0 (as the reward scores it; docs/spec.md §13)
    _say(monkeypatch, "please stop")
    results = evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=tmp_path / "bare")
    assert results["metrics"]["prs/prs_b"] == 0.0
    line = json.loads((tmp_path / "bare" / "prs" / "predictions.jsonl").read_text())
    assert line["responses"] == [{"time": 5.0, "text": "please stop", "malformed": True}]


def test_callback_intervention_prs_uses_the_configured_judge(tmp_path, monkeypatch):
    from proactive_rl.models import build_tiny

    _say(monkeypatch, "</Response> please stop")
    with FakeOpenAI(lambda messages: "2") as server:  # "partially covered": c = 1/2
        judge = {"type": "openai", "base_url": server.base_url, "model": "judge", "api_key": "test"}
        evaluator = {"type": "prs", "episodes": [str(_intervention(tmp_path))], "judge": judge}
        config = EvalCallbackConfig.from_dict({"evaluators": [evaluator]})
        results = evaluate_model(*build_tiny("qwen2_5_vl", "xs", seed=0), build_evaluators(config.evaluators))
        asked = [m["content"] for body in server.bodies for m in body["messages"] if m["role"] == "user"]
    assert results["metrics"]["prs/prs_b"] == pytest.approx(50.0)
    assert any("Ground Truth Answer: stop" in a and "Predicted Answer: please stop" in a for a in asked)
    assert results["evaluators"]["prs"]["summary"]["overall"]["content_scorer"] == f"openai:judge@{server.base_url}"
