"""The synthetic world written as OVO-Bench forward records and StreamingBench Proactive Output questions."""

from __future__ import annotations

import json

from proactive_eval.benchmarks.ovo_bench.format import load_ovo_bench
from proactive_eval.benchmarks.streamingbench_po.format import load_streamingbench_po
from proactive_eval.commands.benchmark import score_benchmark
from proactive_rl.cli import main
from proactive_rl.synthetic.generate import generate_episodes
from proactive_rl.synthetic.streaming_benchmarks import (
    crr_record,
    export_streaming_benchmarks,
    rec_record,
    ssr_record,
)


def test_records_follow_the_scene():
    atomic = generate_episodes("atomic", 1, 5, duration=(20, 20))[0]
    times = [t.time for t in atomic.targets]
    rec = rec_record(0, atomic, "v.mp4")
    for probe in rec["test_info"]:  # the count is the number of appearances up to the probe
        assert probe["count"] == len([t for t in times if t <= probe["realtime"]])
    assert rec["test_info"][-1] == {"realtime": atomic.duration, "count": len(times)}
    crr = crr_record(1, atomic, "v.mp4")
    assert [p["type"] for p in crr["test_info"]] == [int(p["realtime"] >= times[0]) for p in crr["test_info"]]
    assert crr["test_info"][0]["type"] == 0 and crr["test_info"][-1]["type"] == 1
    tank = generate_episodes("compositional", 1, 5, duration=(20, 20))[0]
    ssr = ssr_record(2, tank, "v.mp4")
    spans = dict(zip(ssr["all_steps"], zip(ssr["start_time"], ssr["end_time"])))
    for probe in ssr["test_info"]:
        start, end = spans[probe["step"]]
        assert probe["type"] == int(start <= probe["realtime"] <= end)
    assert {p["type"] for p in ssr["test_info"]} == {0, 1}


def test_files_load_with_the_official_layout_and_score(tmp_path):
    assert main(["synth", "--out", str(tmp_path), "--n", "2", "--tasks", "atomic", "--envs", "none",
                 "--no-progress", "--duration", "10,12", "--streaming-benchmarks"]) == 0  # fmt: skip
    ovo = load_ovo_bench(tmp_path / "ovo_bench/ovo_bench_new.json", video_root=tmp_path / "ovo_bench/src_videos")
    assert [r["task"] for r in ovo.records] == ["REC", "REC", "SSR", "SSR", "CRR", "CRR"] and ovo.missing == []
    po = load_streamingbench_po(tmp_path / "streamingbench/questions_proactive.json")
    assert len(po.questions) == 2 and po.missing == []
    assert po.questions[0].video == tmp_path / "streamingbench/videos/sample_1_proactive.mp4"
    # A results file answering every probe right scores 100 under the official rules.
    forward = [
        {**r, "test_info": [{**p, "response": str(p["count"]) if "count" in p else "NY"[p["type"]]}
                            for p in r["test_info"]]}
        for r in ovo.records
    ]  # fmt: skip
    (tmp_path / "res.json").write_text(json.dumps({"backward": [], "realtime": [], "forward": forward}))
    report = score_benchmark("ovo_bench", tmp_path / "ovo_bench/ovo_bench_new.json", tmp_path / "res.json")
    assert report["tasks"] == {"REC": 100.0, "SSR": 100.0, "CRR": 100.0} and report["overall"] is None


def test_export_is_deterministic(tmp_path):
    a = export_streaming_benchmarks(tmp_path / "a", n=1, seed=3, videos=False, duration=(10, 12))
    b = export_streaming_benchmarks(tmp_path / "b", n=1, seed=3, videos=False, duration=(10, 12))
    read = lambda path: open(path).read()  # noqa: E731
    assert read(a["ovo_bench"]) == read(b["ovo_bench"]) and read(a["streamingbench"]) == read(b["streamingbench"])
