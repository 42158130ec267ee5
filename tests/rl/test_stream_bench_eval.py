"""The tiny model on the synthetic OVO-Bench / StreamingBench files under both protocols, end to end."""

from __future__ import annotations

import json

import pytest

from proactive_eval.benchmarks.ovo_bench.format import load_ovo_bench
from proactive_eval.benchmarks.ovo_bench.run import ovo_video_groups, run_ovo_group
from proactive_eval.cli import main as eval_main
from proactive_rl.evaluation import EvaluatorConfig, build_evaluators, evaluate_model
from proactive_rl.evaluation.stream_bench import ClipPrompter
from proactive_rl.synthetic.streaming_benchmarks import export_streaming_benchmarks


@pytest.fixture(scope="module")
def tiny():
    from proactive_rl.models import build_tiny

    return build_tiny("qwen2_5_vl", "xs", seed=0)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return export_streaming_benchmarks(tmp_path_factory.mktemp("sb"), n=1, seed=0, duration=(10, 10))


def test_both_protocols_give_the_same_answers(tiny, files):
    """Same tokens and the same log-probabilities (to float noise): the streaming prefix is the offline prompt's."""
    model, processor = tiny
    bench = load_ovo_bench(files["ovo_bench"], video_root=files["ovo_bench"].rsplit("/", 1)[0] + "/src_videos")
    group = ovo_video_groups(bench)[0]
    turns, answers = {}, {}
    for protocol in ("official", "streaming"):
        prompter = ClipPrompter(model, processor, max_new_tokens=3)
        out = run_ovo_group(prompter, group, protocol)
        answers[protocol] = [p["response"] for r in out for p in r["test_info"]]
        turns[protocol] = prompter.turns
    assert answers["official"] == answers["streaming"] and len(turns["official"]) >= 2
    for offline, streamed in zip(turns["official"], turns["streaming"]):
        assert offline.token_ids == streamed.token_ids
        assert offline.logprobs[0] == pytest.approx(streamed.logprobs[0], abs=1e-4)
    logprobs = [t.logprobs[0][0] for t in turns["official"]]
    assert max(logprobs) - min(logprobs) > 1e-6  # the probes saw different frames: the check is not vacuous
    assert prompter.speed.frames_encoded <= 10  # streaming: each frame once


def test_evaluators_write_official_results_the_scorer_reads(tiny, files, tmp_path):
    model, processor = tiny
    root = files["ovo_bench"].rsplit("/", 1)[0] + "/src_videos"
    configs = [
        EvaluatorConfig.from_dict(
            {"type": "ovo_bench", "annotations": files["ovo_bench"], "video_root": root, "protocol": "official",
             "max_new_tokens": 2, "max_items": 1}, "e[0]"),
        EvaluatorConfig.from_dict(
            {"type": "streamingbench_po", "annotations": files["streamingbench"], "max_new_tokens": 2}, "e[1]"),
        EvaluatorConfig.from_dict(
            {"type": "streamingbench_po", "name": "po_own_time", "annotations": files["streamingbench"],
             "protocol": "proactive", "max_new_tokens": 2}, "e[2]"),
    ]  # fmt: skip
    assert configs[1].protocol == "streaming"
    results = evaluate_model(model, processor, build_evaluators(configs), tmp_path, plots=False)
    ovo = json.loads((tmp_path / "ovo_bench" / "results.json").read_text())
    assert ovo["protocol"] == "official" and set(ovo["tasks"]) == {"REC"} and ovo["speed"]["frames_encoded"] > 0
    assert "blind_floor" in ovo
    po = json.loads((tmp_path / "streamingbench_po" / "results.json").read_text())
    assert set(po["tasks"]) == {"Proactive Output"} and po["speed"]["calls"] >= 1
    own = json.loads((tmp_path / "po_own_time" / "results.json").read_text())
    assert own["protocol"] == "proactive" and own["coverage"]["answered"] == 1
    assert results is not None
    # The official results files, unchanged, score the same through proactive-eval.
    argv = ["score", "--benchmark", "streamingbench_po", "--annotations", files["streamingbench"], "--predictions",
            str(tmp_path / "streamingbench_po" / "streamingbench_po_results.json"), "--out", str(tmp_path / "s")]  # fmt: skip
    assert eval_main(argv) == 0
    assert json.loads((tmp_path / "s" / "results.json").read_text())["tasks"] == po["tasks"]
    argv = ["score", "--benchmark", "ovo_bench", "--annotations", files["ovo_bench"], "--predictions",
            str(tmp_path / "ovo_bench" / "ovo_bench_results.json"), "--out", str(tmp_path / "o")]  # fmt: skip
    assert eval_main(argv) == 0
    assert json.loads((tmp_path / "o" / "results.json").read_text())["tasks"] == ovo["tasks"]
