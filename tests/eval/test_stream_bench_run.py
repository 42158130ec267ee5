"""`proactive-eval run --benchmark`: the official protocols through an OpenAI-compatible server (a fake one)."""

from __future__ import annotations

import json

import numpy as np

from proactive_eval.benchmarks import get_benchmark
from proactive_eval.benchmarks.streamingbench_po.format import PROACTIVE_TEMPLATE
from proactive_eval.cli import main
from proactive_eval.video import write_video


def images(messages) -> int:
    return sum(part.get("type") == "image_url" for part in messages[-1]["content"])


def text(messages) -> str:
    return next(p["text"] for p in messages[-1]["content"] if p.get("type") == "text")


def write(path, n):
    path.parent.mkdir(parents=True, exist_ok=True)
    write_video(path, [np.full((32, 32, 3), 10 * k, np.uint8) for k in range(n)], fps=1.0)


def test_ovo_official_protocol_clips_to_each_probe(tmp_path):
    """The fake model answers the number of frames it was sent: REC counts equal to the probe times score 100
    only if every clip is [0, realtime) at 1 frame per second."""
    from tests.support.fake_openai import FakeOpenAI

    write(tmp_path / "src" / "v.mp4", 8)
    records = [
        {"id": 0, "task": "REC", "video": "v.mp4", "activity": "jump", "start_times": [1], "end_times": [2],
         "test_info": [{"realtime": 2, "count": 2}, {"realtime": 5, "count": 5}, {"realtime": 7, "count": 6}]},
        {"id": 1, "task": "STU", "video": "v.mp4", "realtime": 3, "question": "q?", "options": ["a", "b"], "gt": 1},
    ]  # fmt: skip
    (tmp_path / "ovo.json").write_text(json.dumps(records))

    def answer(messages):
        prompt = text(messages)
        return "B" if prompt.startswith("\nQuestion: q?") else f"{images(messages)} times"

    with FakeOpenAI(answer) as server:
        argv = ["run", "--benchmark", "ovo_bench", "--annotations", str(tmp_path / "ovo.json"), "--video-root",
                str(tmp_path / "src"), "--policy", f"openai:m@{server.base_url}", "--out", str(tmp_path / "out")]  # fmt: skip
        assert main(argv) == 0
    results = json.loads((tmp_path / "out" / "ovo_bench_results.json").read_text())
    assert [p["response"] for p in results["forward"][0]["test_info"]] == ["2 times", "5 times", "7 times"]
    assert results["realtime"][0]["response"] == "B" and results["realtime"][0]["ground_truth"] == "B"
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert summary["tasks"] == {"STU": 100.0, "REC": 100 * 2 / 3} and summary["protocol"] == "official"
    assert summary["speed"]["frames_encoded"] == 2 + 5 + 7 + 3 and summary["speed"]["calls"] == 4


def test_streamingbench_official_polling(tmp_path):
    """Polls every second from time_stamp + 1; the question is asked on the same clip after the first yes."""
    from tests.support.fake_openai import FakeOpenAI

    write(tmp_path / "videos" / "sample_1_proactive.mp4", 20)
    q = {"task_type": "Proactive Output", "question": 'When ready, output "go".', "time_stamp": "00:00:03",
         "ground_truth_time_stamp": "00:00:08", "ground_truth_output": "go", "required_ability": "x"}  # fmt: skip
    entries = [{"time": "[0:00:00 - 0:00:20]", "questions": [q], "video_categories": "x",
                "video_path": "./videos/sample_1_proactive.mp4"}]  # fmt: skip
    (tmp_path / "q.json").write_text(json.dumps(entries))
    seen = []

    def answer(messages):
        prompt, n = text(messages), images(messages)
        seen.append((n, prompt))
        if "Is it the right time" in prompt:
            return "Yes." if n >= 4 else "No"  # clip [3, poll): 4 frames at poll 7
        return 'I output "go" now'

    with FakeOpenAI(answer) as server:
        argv = ["run", "--benchmark", "streamingbench_po", "--annotations", str(tmp_path / "q.json"), "--policy",
                f"openai:m@{server.base_url}", "--out", str(tmp_path / "out")]  # fmt: skip
        assert main(argv) == 0
    results = json.loads((tmp_path / "out" / "streamingbench_po_results.json").read_text())
    output = results[0]["questions"][0]["proactive_rl"]
    assert output["answered"] == 7 and [t["time"] for t in output["dialog_history"]] == [4, 4, 5, 5, 6, 6, 7, 7, 7, 7]
    assert [n for n, _ in seen] == [1, 2, 3, 4, 4] and seen[-1][1] == PROACTIVE_TEMPLATE.format(q["question"])
    summary = json.loads((tmp_path / "out" / "results.json").read_text())
    assert summary["tasks"] == {"Proactive Output": {"time_accuracy": 1.0, "answer_accuracy": 1.0}}
    assert summary["speed"]["event_to_response_median_s"] == -1


def test_streamingbench_proactive_protocol_reads_the_first_response(tmp_path):
    """A state-token policy speaking at its own time: the answer is its first response, at that frame's time."""
    from proactive_eval.benchmarks.streamingbench_po.format import load_streamingbench_po
    from proactive_eval.benchmarks.streamingbench_po.metric import score_streamingbench_po
    from proactive_eval.benchmarks.streamingbench_po.run import run_po_proactive

    class SpeaksAt:
        def __init__(self, at):
            self.at, self.seen = at, []

        def reset(self, episode):
            self.seen = []

        def step(self, observation):
            self.seen.append(observation.time)
            return "</Response> go" if observation.time >= self.at else "</Silence>"

    write(tmp_path / "videos" / "sample_1_proactive.mp4", 20)
    q = {"task_type": "Proactive Output", "question": 'output "go"', "time_stamp": "00:00:03",
         "ground_truth_time_stamp": "00:00:08", "ground_truth_output": "go", "required_ability": "x"}  # fmt: skip
    entries = [{"questions": [q], "video_path": "./videos/sample_1_proactive.mp4"}]
    (tmp_path / "q.json").write_text(json.dumps(entries))
    bench = load_streamingbench_po(tmp_path / "q.json")
    policy = SpeaksAt(6.0)  # stream time 6 = video time 9
    output = run_po_proactive(policy, bench, 0)
    assert output == {"answered": 9.0, "dialog_history": [{"role": "assistant", "content": "go", "time": 9.0}]}
    assert policy.seen[0] == 0.0 and policy.seen[-1] == 8.0  # frames 3..11 of the video: [time_stamp, due + 4)
    entries[0]["questions"][0]["M"] = output
    assert score_streamingbench_po(entries, "M")["tasks"]["Proactive Output"]["answer_correct"] == 1
    silent = run_po_proactive(SpeaksAt(99.0), bench, 0)
    assert silent["answered"] is False and silent["dialog_history"][-1]["time"] == 12

    # the same through the registry, as a generic evaluator runs it: item, official results, summary, metrics
    po = get_benchmark("streamingbench_po")
    assert po.items(bench) == [("question-0", 0)] and "proactive" in po.policy_protocols
    item = po.run_item(SpeaksAt(6.0), bench, 0, "proactive")
    assert item == {"index": 0, "output": output}
    official = po.results(bench, [item])
    assert official[0]["questions"][0][po.results_model] == output
    summary = po.summary(bench, official, model=po.results_model)
    assert summary["tasks"] == {"Proactive Output": {"time_accuracy": 1.0, "answer_accuracy": 1.0}}
    assert po.metrics(summary) == {
        "Proactive Output/time_accuracy": 1.0, "Proactive Output/answer_accuracy": 1.0, "frames_per_s": 0.0
    }  # fmt: skip
