"""``proactive-eval baseline`` on converted files of each public format with fixtures here (docs/spec.md §14):
P³I-style JSONL, ProactiveVideoQA ``anno.json`` and ProactiveBench environment JSONL."""

import json

from test_formats import ANNO, _pb, write_anno  # tests/eval is on sys.path (rootdir-relative imports)

from proactive_eval import cli
from proactive_eval.benchmarks.p3i.blind import blind_prs_summary
from proactive_eval.benchmarks.p3i.format import convert_p3i
from proactive_eval.benchmarks.proactivebench.blind import blind_mcqa_summary
from proactive_eval.benchmarks.proactivebench.environments import load_environments
from proactive_eval.benchmarks.pvqa.blind import blind_pauc_summary
from proactive_eval.benchmarks.pvqa.format import convert_pvqa
from proactive_eval.judges import RuleJudge


def _run(capsys, *argv) -> dict:
    assert cli.main(["baseline", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _p3i(path, n, offset=0.0):
    rows = [
        {
            "question_id": f"q{i}",
            "task": "accident",
            "duration": 20.0,
            "query": "warn me",
            "answers": [{"timestamp": 4.0 + (i % 5) + offset, "content": "Warning"}],
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_p3i_files_leave_one_out_and_fitted(tmp_path, capsys):
    test = _p3i(tmp_path / "test.jsonl", 7)
    train = _p3i(tmp_path / "train.jsonl", 9, offset=1.0)
    loo = _run(capsys, "--episodes", str(test), "--format", "p3i")
    assert loo["prs"] == blind_prs_summary(convert_p3i(test))
    fitted = _run(capsys, "--episodes", str(test), "--fit", str(train), "--format", "p3i", "--alpha", "0.1")
    assert fitted["prs"] == blind_prs_summary(convert_p3i(test), convert_p3i(train), alpha=0.1)
    assert fitted["prs"]["fit"] == {"accident": "reference"}
    assert cli.main(["baseline", "--episodes", str(test), "--format", "p3i"]) == 0
    assert "blind schedule" in capsys.readouterr().out
    # the registered benchmark's blind floor is the same row (`proactive_eval.benchmarks.p3i`)
    assert _run(capsys, "--benchmark", "p3i", "--annotations", str(test)) == {
        "benchmark": "p3i",
        "blind_floor": loo["prs"],
    }


def test_pvqa_anno_json_gives_the_blind_pauc(tmp_path, capsys):
    anno = write_anno(tmp_path, ANNO)
    out = _run(capsys, "--episodes", str(anno))
    assert out["pauc"] == blind_pauc_summary(convert_pvqa(anno), RuleJudge("token_f1"))
    # the second record's one turn, fitted on the first record's answers: nothing in common, the empty reply wins
    # unless a text beats 0.25; the blind PAUC is a mean of per-turn values in [0, 100]
    assert 0.0 <= out["pauc"]["overall"]["omega=0.5"] <= 100.0


def test_proactivebench_environment_files_give_the_blind_policy(tmp_path, capsys):
    path = tmp_path / "rod.jsonl"
    answers = ["dog", "dog", "cat", "dog"]
    path.write_text("".join(json.dumps(_pb(f"r{i}", answer=a)) + "\n" for i, a in enumerate(answers)))
    out = _run(capsys, "--episodes", str(path), "--dataset", "ROD", "--protocol", "unfiltered")
    envs = load_environments(path, "ROD", load_images=False, protocol="unfiltered")
    assert out["mcqa"] == blind_mcqa_summary(envs)
    # ROD hides the object at the first image: a category there is wrong, so the blind policy moves once, then
    # names the most common answer of the other three environments (dog): right on the three dogs
    policy = out["mcqa"]["policies"]["ROD"]
    assert policy["suggestions"] == 1 and out["mcqa"]["acc"] == 75.0


class PixelPolicy:
    """Says "bright" or "dark" at the first frame, from its mean pixel (it looks)."""

    def reset(self, episode):
        pass

    def step(self, observation):
        if observation.step:
            return "</Silence>"
        return "</Response> " + ("bright" if observation.frames[0].mean() > 127 else "dark")


def test_run_with_swap_reports_the_blind_row_and_the_vision_gain(tmp_path, monkeypatch):
    import numpy as np

    from proactive_eval.video import write_video

    records = []
    for name, value, text in (("a", 220, "bright"), ("b", 30, "dark")):
        write_video(tmp_path / f"{name}.mp4", [np.full((16, 16, 3), value, np.uint8)] * 4, fps=1.0)
        records.append(
            {"id": name, "task": "accident", "video": f"{name}.mp4", "duration": 4.0, "instruction": "Watch.",
             "targets": [{"time": 0.0, "text": text}]}
        )  # fmt: skip
    episodes = tmp_path / "episodes.json"
    episodes.write_text(json.dumps(records))
    monkeypatch.setattr(cli, "make_policy", lambda spec: PixelPolicy())
    argv = [
        "run",
        "--episodes",
        str(episodes),
        "--policy",
        "silent",
        "--out",
        str(tmp_path / "r"),
    ]
    assert cli.main([*argv, "--counterfactual", "swap", "--no-plots", "--no-progress"]) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())["prs"]
    assert results["overall"]["prs_b"] == 100.0
    swap = results["counterfactual"]["swap"]
    assert swap["overall"]["prs_b"] == 0.0 and swap["vision_gain"]["overall"]["prs_b"] == 100.0  # it looks
    assert results["blind"]["fit"] == {"accident": "leave_one_out"}
    report = (tmp_path / "r" / "report.md").read_text()
    assert "↳ blind schedule" in report and "frames swapped (swap)" in report
    # Does the model look? PRS-U, its blind value (leave-one-out: each episode gets the other's text, wrong), with
    # swapped frames, vision gain; then the same for PRS-B
    assert "| accident | 100.00 | 0.00 | 0.00 | 100.00 | 100.00 | 0.00 | 0.00 | 100.00 |" in report
    assert (tmp_path / "r" / "predictions_swap.jsonl").is_file()
