"""A benchmark from outside the library (`tests/support/toy_benchmark`), registered at run time, goes through
``proactive-eval score|baseline|run --benchmark`` with no library file changed; the numbers are worked by hand.

The annotations ask "how many frames have you seen?" on one 6-second video at 1 frame per second, at 2, 3, 3 and
5 s: the gold answers are "2", "3", "3", "5". The blind floor answers the most frequent gold, "3": 2 of 4 right,
50 %.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from proactive_eval.benchmarks import BENCHMARKS, benchmark_names, get_benchmark
from proactive_eval.cli import main
from proactive_eval.video import write_video
from tests.support.toy_benchmark import BENCHMARK

QUESTION = "How many frames have you seen?"
TIMES = {"a": 2, "b": 3, "c": 3, "d": 5}


@pytest.fixture
def annotations(tmp_path):
    pytest.importorskip("av")
    write_video(tmp_path / "v.mp4", [np.full((32, 32, 3), 20 * k, np.uint8) for k in range(6)], fps=1.0)
    records = [
        {"id": i, "video": "v.mp4", "time": t, "question": QUESTION, "answer": str(t)} for i, t in TIMES.items()
    ]
    (tmp_path / "toy.json").write_text(json.dumps(records))
    return tmp_path / "toy.json"


def test_registering_it_makes_it_a_benchmark_and_the_registry_is_restored(toy):
    assert get_benchmark("toy") is BENCHMARK and BENCHMARK.runnable
    assert "toy" in benchmark_names("runnable") and "toy" in benchmark_names("blind_floor")


def test_unregistered_it_is_an_unknown_name(tmp_path, capsys):
    assert "toy" not in BENCHMARKS  # the fixture of the other tests put the registry back
    argv = ["score", "--benchmark", "toy", "--annotations", "a.json", "--predictions", "p.json"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and "unknown benchmark 'toy'; expected one of ovo_bench, p3i, proactivebench, pvqa, streamingbench_po" in err
    )


def test_score(toy, annotations, tmp_path, capsys):
    """a right, b and d wrong (" 4" is stripped, still wrong), c missing, z unknown: 1 of 4 = 25 %."""
    predictions = [
        {"id": "a", "response": "2"},
        {"id": "b", "response": "4"},
        {"id": "d", "response": " 4"},
        {"id": "z", "response": "3"},
    ]
    (tmp_path / "p.json").write_text(json.dumps(predictions))
    argv = ["score", "--benchmark", "toy", "--annotations", str(annotations), "--predictions",
            str(tmp_path / "p.json"), "--out", str(tmp_path / "r")]  # fmt: skip
    assert main(argv) == 0
    summary = json.loads((tmp_path / "r" / "results.json").read_text())
    assert summary["benchmark"] == "toy" and summary["accuracy"] == 25.0
    assert summary["coverage"] == {"expected": 4, "answered": 3, "missing": 1}
    assert summary["ignored"] == {"unknown_ids": 1}
    assert summary["blind_floor"] == {"answer": "3", "accuracy": 50.0}
    assert summary["meta"]["results_json"] == str(tmp_path / "r" / "results.json")
    assert "toy: accuracy 25.00 | blind floor 50.00 (3/4 answered)" in capsys.readouterr().out


def test_baseline(toy, annotations, capsys):
    assert main(["baseline", "--benchmark", "toy", "--annotations", str(annotations)]) == 0
    assert json.loads(capsys.readouterr().out) == {
        "benchmark": "toy",
        "blind_floor": {"answer": "3", "accuracy": 50.0},
    }


def test_run_through_an_openai_compatible_server(toy, annotations, tmp_path):
    """The fake model answers how many images it was sent, but "many" from 5 on: a, b, c right, d wrong: 75 %.
    Each question's clip is [0, time) at 1 frame per second: 2 + 3 + 3 + 5 = 13 frames in 4 calls."""
    from tests.support.fake_openai import FakeOpenAI

    sent = []

    def answer(messages):
        content = messages[-1]["content"]
        n = sum(part.get("type") == "image_url" for part in content)
        sent.append((n, next(p["text"] for p in content if p.get("type") == "text")))
        return "many" if n >= 5 else str(n)

    with FakeOpenAI(answer) as server:
        argv = ["run", "--benchmark", "toy", "--annotations", str(annotations), "--policy",
                f"openai:m@{server.base_url}", "--out", str(tmp_path / "out")]  # fmt: skip
        assert main(argv) == 0
    assert sorted(sent) == [(n, f"{QUESTION}\nAnswer with one word.") for n in (2, 3, 3, 5)]
    official = json.loads((tmp_path / "out" / "toy_results.json").read_text())
    assert official == [{"id": "a", "response": "2"}, {"id": "b", "response": "3"}, {"id": "c", "response": "3"},
                        {"id": "d", "response": "many"}]  # fmt: skip
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert summary["accuracy"] == 75.0 and summary["blind_floor"]["accuracy"] == 50.0
    assert summary["protocol"] == "official" and summary["missing_videos"] == []
    assert summary["speed"]["frames_encoded"] == 13 and summary["speed"]["calls"] == 4
    assert BENCHMARK.metrics(summary) == {"accuracy": 75.0, "blind_floor": 50.0}
