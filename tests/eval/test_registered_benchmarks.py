"""P³I-Bench, ProactiveVideoQA and ProactiveBench through the registry: ``score``, ``baseline`` and ``run
--benchmark p3i|pvqa`` give the numbers of the episode path (``score|baseline --episodes``, the independent
reference: its own reading, matching and report code), ``score --benchmark proactivebench`` those of ``mcqa
--policy replay:``, and a results file cannot lift its score by saying an episode was not played or an environment
was won."""

from __future__ import annotations

import json

import numpy as np
import pytest

from proactive_eval.benchmarks import benchmark_names, get_benchmark
from proactive_eval.cli import main
from proactive_eval.video import write_video
from tests.eval.test_formats import ANNO, write_anno
from tests.eval.test_mcqa_cli import data_dir

TIMES = {"a": (4.0, 6.0), "b": (8.0,), "c": (3.0,)}


@pytest.fixture
def p3i(tmp_path):
    """Three accident episodes on one 10-frame video, and predictions that answer a and c (c 2 s late)."""
    write_video(tmp_path / "v.mp4", [np.full((16, 16, 3), 9 * k, np.uint8) for k in range(10)], fps=1.0)
    records = [
        {"id": eid, "task": "accident", "duration": 10.0, "instruction": "warn me", "video": "v.mp4",
         "targets": [{"time": t, "text": "Warning"} for t in times]}
        for eid, times in TIMES.items()
    ]  # fmt: skip
    (tmp_path / "p3i.json").write_text(json.dumps(records))
    lines = [
        {"id": "a", "responses": [{"time": 4.0, "text": "</Response> Warning"}, {"time": 9.0, "text": "Warning"}]},
        {"id": "c", "responses": [{"time": 5.0, "text": "</Response> Warning"}]},
        {"id": "stray", "responses": []},
    ]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return tmp_path / "p3i.json", tmp_path / "p.jsonl"


def _results(folder):
    return json.loads((folder / "results.json").read_text())


def test_p3i_and_pvqa_are_runnable_benchmarks_and_evaluator_types():
    assert set(benchmark_names("runnable")) == {"ovo_bench", "p3i", "pvqa", "streamingbench_po"}
    for name in ("p3i", "pvqa"):
        bench = get_benchmark(name)
        assert bench.protocols == bench.policy_protocols == ("streaming",) and bench.results_file == "predictions.json"


def test_p3i_score_equals_the_episode_path(p3i, tmp_path, capsys):
    episodes, predictions = p3i
    assert main(["score", "--episodes", str(episodes), "--predictions", str(predictions), "--out", str(tmp_path / "e"),
                 "--no-plots", "--no-progress"]) == 0  # fmt: skip
    assert main(["score", "--benchmark", "p3i", "--annotations", str(episodes), "--predictions", str(predictions),
                 "--out", str(tmp_path / "b")]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    reference, summary = _results(tmp_path / "e"), _results(tmp_path / "b")
    for key in ("prs_u", "prs_b"):
        assert summary["prs"]["overall"][key] == pytest.approx(reference["prs"]["overall"][key])
        assert summary["blind_floor"]["overall"][key] == pytest.approx(reference["prs"]["blind"]["overall"][key])
    # by hand, PRS-B: a 1 (4 s, on time; the 9 s "Warning" is its second target's only match, 3 s late), c e^-0.1
    a = (1 + np.exp(-0.05 * 3)) / 2
    assert summary["prs"]["overall"]["prs_b"] == pytest.approx(100 * (a + 0 + np.exp(-0.05 * 2)) / 3, abs=1e-3)
    gain = summary["gain_over_blind"]["prs_b"]
    diff = summary["prs"]["overall"]["prs_b"] - summary["blind_floor"]["overall"]["prs_b"]
    assert (
        gain["diff"] == pytest.approx(diff, abs=1e-3)
        and gain["low"] <= gain["diff"] <= gain["high"]
        and gain["n"] == 3
    )
    assert summary["coverage"] == {"episodes": 3, "with_predictions": 2, "not_played": 0,
                                   "ids_matching_no_episode": 1, "duplicates_ignored": 0,
                                   "responses_outside_video": 0}  # fmt: skip
    assert "| model − blind (95 % CI) |" in printed and "coverage: 2 of 3 episodes" in printed

    capsys.readouterr()
    assert main(["baseline", "--benchmark", "p3i", "--annotations", str(episodes)]) == 0
    assert json.loads(capsys.readouterr().out)["blind_floor"]["overall"] == summary["blind_floor"]["overall"]


def test_a_results_file_cannot_leave_out_an_episode(p3i, tmp_path):
    """Saying the missed episode b "failed" (not played) scores it as silence, as leaving it out does."""
    episodes, predictions = p3i
    records = [json.loads(line) for line in predictions.read_text().splitlines()]
    claimed = tmp_path / "claimed.json"
    claimed.write_text(json.dumps([*records, {"id": "b", "responses": [], "failed": "video unreadable"}]))
    for name, path in (("plain", predictions), ("claimed", claimed)):
        argv = ["score", "--benchmark", "p3i", "--annotations", str(episodes), "--predictions", str(path)]
        assert main([*argv, "--out", str(tmp_path / name)]) == 0
    plain, claimed = _results(tmp_path / "plain"), _results(tmp_path / "claimed")
    assert claimed["prs"]["overall"] == plain["prs"]["overall"] and claimed["prs"]["overall"]["num_episodes"] == 3
    assert claimed["coverage"]["not_played"] == 1


def test_p3i_run_writes_the_predictions_it_scores(p3i, tmp_path, capsys):
    episodes, predictions = p3i
    argv = ["run", "--benchmark", "p3i", "--annotations", str(episodes), "--policy", f"replay:{predictions}"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 0
    official = json.loads((tmp_path / "r" / "predictions.json").read_text())
    assert [r["id"] for r in official] == ["a", "b", "c"] and official[1]["responses"] == []
    assert [r["time"] for r in official[0]["responses"]] == [4.0, 9.0]
    summary = _results(tmp_path / "r")
    assert summary["protocol"] == "streaming" and summary["speed"]["video_frames"] == 30
    argv = ["score", "--benchmark", "p3i", "--annotations", str(episodes), "--predictions"]
    assert main([*argv, str(tmp_path / "r" / "predictions.json"), "--out", str(tmp_path / "s")]) == 0
    assert _results(tmp_path / "s")["prs"] == summary["prs"]


def test_pvqa_score_equals_the_episode_path_under_the_rule_judge(tmp_path, capsys):
    anno = write_anno(tmp_path, ANNO)
    predictions = tmp_path / "p.jsonl"
    lines = [{"id": "LGgaMq1eZGw.52.mp4", "responses": [{"time": 1.0, "text": "A creature with wings."},
                                                        {"time": 3.5, "text": "A donkey."}]}]  # fmt: skip
    predictions.write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert main(["score", "--episodes", str(anno), "--predictions", str(predictions), "--judge", "rule:token_f1",
                 "--out", str(tmp_path / "e"), "--no-plots", "--no-progress"]) == 0  # fmt: skip
    argv = ["score", "--benchmark", "pvqa", "--annotations", str(anno), "--predictions", str(predictions)]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    reference, summary = _results(tmp_path / "e"), _results(tmp_path / "b")
    for omega in ("omega=0", "omega=0.5", "omega=1"):
        assert summary["pauc"]["overall"][omega] == pytest.approx(reference["pauc"]["overall"][omega])
        assert summary["blind_floor"]["overall"][omega] == pytest.approx(reference["pauc"]["blind"]["overall"][omega])
    assert summary["gain_over_blind"]["omega=0.5"]["n"] == 3 and summary["judge"] == "rule:token_f1"


def test_each_benchmark_refuses_the_others_episodes(p3i, tmp_path, capsys):
    episodes, predictions = p3i
    pvqa = tmp_path / "pvqa_episodes.json"
    pvqa.write_text(json.dumps([{"id": "q", "task": "pvqa", "duration": 10.0, "instruction": "What is shown?",
                                 "video": "v.mp4", "targets": [{"time": 1.0, "text": "A dog.", "window": [1, 3]}]}]))  # fmt: skip
    assert main(["score", "--benchmark", "p3i", "--annotations", str(pvqa), "--predictions", str(predictions)]) == 2
    assert "episode 'q' has task 'pvqa': score it with --benchmark pvqa" in capsys.readouterr().err
    assert (
        main(["score", "--benchmark", "pvqa", "--annotations", str(episodes), "--predictions", str(predictions)]) == 2
    )
    assert "p3i.json" in capsys.readouterr().err  # not a ProactiveVideoQA anno.json: its loader names the file
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["score", "--benchmark", "p3i", "--annotations", str(episodes), "--predictions", str(empty)]) == 2
    assert "empty.jsonl" in capsys.readouterr().err


def test_proactivebench_score_equals_mcqa_replay_and_trusts_no_outcome(tmp_path, capsys):
    root = data_dir(tmp_path)
    answers = tmp_path / "answers.jsonl"
    # ROD env 0: move left, then "E" (dog, the answer); env 1 claims a win it did not play; the rest give up
    lines = [{"id": 0, "dataset": "ROD", "answers": ["A", "E"]},
             {"id": 1, "dataset": "ROD", "answers": [], "success": True, "turns": 1}]  # fmt: skip
    answers.write_text("".join(json.dumps(x) + "\n" for x in lines))
    argv = ["mcqa", "--data-dir", str(root), "--datasets", "ROD", "--policy", f"replay:{answers}"]
    assert main([*argv, "--out", str(tmp_path / "m")]) == 0
    rod = root / "Realistic-Occlusion-Dataset_preprocessed.jsonl"
    argv = ["score", "--benchmark", "proactivebench", "--annotations", str(rod), "--predictions", str(answers)]
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    reference, summary = _results(tmp_path / "m"), _results(tmp_path / "b")
    assert summary["datasets"] == reference["datasets"] == {"ROD": {"acc": 25.0, "ps": 0.25, "n": 4}}
    assert summary["blind_floor"] == reference["blind_floor"]
    gain = summary["gain_over_blind"]["acc"]
    assert gain["diff"] == pytest.approx(25.0 - summary["blind_floor"]["acc"]) and gain["n"] == 4
    assert "model − blind acc" in capsys.readouterr().out

    capsys.readouterr()
    assert main(["baseline", "--benchmark", "proactivebench", "--annotations", str(rod)]) == 0
    assert json.loads(capsys.readouterr().out)["blind_floor"]["acc"] == summary["blind_floor"]["acc"]
    wrong = tmp_path / "rod.jsonl"
    wrong.write_text(rod.read_text())
    assert main(["baseline", "--benchmark", "proactivebench", "--annotations", str(wrong)]) == 2
    assert "rod.jsonl is not one of the authors' files (Realistic-Occlusion-Dataset_preprocessed.jsonl" in (
        capsys.readouterr().err
    )


def test_run_names_a_protocol_the_benchmark_lacks(p3i, tmp_path, capsys):
    episodes, predictions = p3i
    argv = ["run", "--benchmark", "p3i", "--annotations", str(episodes), "--policy", "silent", "--out", str(tmp_path)]
    assert main([*argv, "--protocol", "official"]) == 2
    assert "--protocol: benchmark 'p3i' has streaming, got 'official'" in capsys.readouterr().err
    argv = ["run", "--benchmark", "ovo_bench", "--annotations", str(episodes), "--policy", "silent"]
    assert main([*argv, "--out", str(tmp_path)]) == 2
    assert "--protocol official asks an openai:MODEL@BASE_URL server" in capsys.readouterr().err
