"""One blind floor (docs/spec.md §14): `proactive-eval baseline`, the blind row of `proactive-eval run --policy silent`
and of `proactive-eval score`, and of `proactive-rl eval` (``--model``, ``--watch``) and the training callback give the
same number for the same episodes, and it is never below silence (PRS 0; PAUC 25, no kept answer ⇒ 0.5 / S).
A model whose outputs are mostly malformed is counted and warned about in every report."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from proactive_eval import cli as eval_cli
from proactive_eval.streaming import SilentPolicy
from proactive_eval.video import write_video
from proactive_rl.cli import main as rl_main

# PVQA-style: free-text answers with reply spans. Two answers with no word in common split the episodes evenly, so
# the answer fitted on the other episodes (leave-one-out) is always the wrong one (level 1, y = 0): below silence.
PVQA = [("p0", "red car"), ("p1", "red car"), ("p2", "blue boat"), ("p3", "blue boat")]
PRS = [("w0", 2.0), ("w1", 3.0), ("w2", 3.0), ("w3", 4.0)]
# the blind row's metric key in each path, per data set (PAUC: the paper's ω = 0.5)
KEYS = {"pvqa": ("pauc", "omega=0.5", "pauc_w0.5"), "prs": ("prs", "prs_b", "prs_b")}


def _episodes(folder: Path, kind: str) -> Path:
    records = []
    for k, (eid, value) in enumerate(PVQA if kind == "pvqa" else PRS):
        write_video(folder / f"{eid}.mp4", [np.full((16, 16, 3), 40 * k, np.uint8)] * 6, fps=1.0)
        record = {"id": eid, "video": f"{eid}.mp4", "duration": 6.0, "instruction": "Watch."}
        if kind == "pvqa":
            target = {"time": 1.0, "text": value, "window": [1.0, 5.0]}
            record.update(task="pvqa", targets=[target], meta={"question": "What is shown?"})
        else:
            record.update(task="accident", targets=[{"time": value, "text": "Warning"}])
        records.append(record)
    path = folder / "episodes.json"
    path.write_text(json.dumps(records))
    return path


def _checkpoint(run: Path, step: int) -> Path:
    """A tiny model saved as a Trainer checkpoint (`proactive-rl eval --watch` loads it)."""
    from proactive_rl.models import build_tiny

    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    path = run / f"checkpoint-{step}"
    model.save_pretrained(path)
    processor.save_pretrained(path)
    (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    (run / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


@pytest.mark.parametrize("kind", ["pvqa", "prs"])
def test_every_command_reports_the_same_blind_floor(kind, tmp_path, monkeypatch, capsys):
    metric, key, flat = KEYS[kind]
    episodes = _episodes(tmp_path, kind)
    monkeypatch.setattr("proactive_rl.evaluation.policy.model_policy", lambda *a, **k: SilentPolicy())
    floors = {}

    # proactive-eval baseline
    assert eval_cli.main(["baseline", "--episodes", str(episodes), "--json"]) == 0
    floors["baseline"] = json.loads(capsys.readouterr().out)[metric]["overall"][key]
    # proactive-eval run --policy silent, then score its predictions
    run = tmp_path / "run"
    assert (
        eval_cli.main(["run", "--episodes", str(episodes), "--policy", "silent", "--out", str(run), "--no-plots"]) == 0
    )
    results = json.loads((run / "results.json").read_text())[metric]
    floors["run"], silent = results["blind"]["overall"][key], results["overall"][key]
    argv = ["score", "--episodes", str(episodes), "--predictions", str(run / "predictions.jsonl")]
    assert eval_cli.main([*argv, "--out", str(tmp_path / "score"), "--no-plots"]) == 0
    floors["score"] = json.loads((tmp_path / "score" / "results.json").read_text())[metric]["blind"]["overall"][key]

    # proactive-rl eval --model, --watch, and the training callback, with the same evaluator
    evaluator = {"type": "pauc" if kind == "pvqa" else "prs", "episodes": [{"source": str(episodes)}], "batch_size": 1}
    config = tmp_path / "eval.yaml"
    config.write_text(json.dumps({"evaluators": [evaluator]}))
    argv = [
        "eval",
        "--config",
        str(config),
        "--model",
        "tiny:qwen2_5_vl:xs",
        "--out",
        str(tmp_path / "m"),
        "--no-plots",
    ]
    assert rl_main(argv) == 0
    name = evaluator["type"]
    floors["eval"] = json.loads((tmp_path / "m" / "results.json").read_text())["metrics"][f"{name}/blind_{flat}"]
    training = tmp_path / "training"
    checkpoint = _checkpoint(training, 2)
    argv = ["eval", "--config", str(config), "--watch", str(training), "--once", "--settle", "0", "--no-plots"]
    assert rl_main(argv) == 0
    [row] = json.loads((training / "eval_watch" / "leaderboard.json").read_text())
    floors["watch"] = row["metrics"][f"{name}/blind_{flat}"]

    from proactive_rl.evaluation import ProactiveEvalCallback, load_eval_config
    from proactive_rl.models.spec import load_model_spec

    model, processor = load_model_spec(str(checkpoint))
    callback = ProactiveEvalCallback(load_eval_config(str(config)))
    args = SimpleNamespace(output_dir=str(training), report_to=[], logging_dir=None)
    state = SimpleNamespace(global_step=2, is_world_process_zero=True)
    callback.on_save(args, state, None, model=model, processing_class=processor)
    floors["callback"] = callback.history[-1]["metrics"][f"{name}/blind_{flat}"]

    assert len(set(floors.values())) == 1, floors
    assert floors["baseline"] >= silent == (25.0 if kind == "pvqa" else 0.0)
    capsys.readouterr()


def test_a_model_whose_outputs_are_malformed_is_warned_about(tmp_path, monkeypatch, capsys):
    """Every turn malformed: PAUC counts them (the judge never sees them, so the score is silence's 25) and every
    report says so: `proactive-eval run`'s report, the evaluator's summary and `proactive-rl eval`'s table."""

    class Garbled:
        def reset(self, episode):
            pass

        def step(self, observation):
            return "I think it is a car"  # no state token: malformed (docs/spec.md §13)

    episodes = _episodes(tmp_path, "pvqa")
    monkeypatch.setattr(eval_cli, "make_policy", lambda spec: Garbled())
    argv = ["run", "--episodes", str(episodes), "--policy", "x", "--out", str(tmp_path / "r"), "--no-plots"]
    assert eval_cli.main(argv) == 0
    results = json.loads((tmp_path / "r" / "results.json").read_text())["pauc"]["overall"]
    assert results["omega=0.5"] == 25.0 and results["outputs"] == results["malformed_outputs"] == 6 * len(PVQA)
    report = (tmp_path / "r" / "report.md").read_text()
    assert f"warning: {6 * len(PVQA)} of {6 * len(PVQA)} outputs of the model are malformed" in report

    monkeypatch.setattr("proactive_rl.evaluation.policy.model_policy", lambda *a, **k: Garbled())
    config = tmp_path / "eval.yaml"
    config.write_text(json.dumps({"evaluators": [{"type": "pauc", "episodes": [{"source": str(episodes)}]}]}))
    capsys.readouterr()
    assert (
        rl_main(["eval", "--config", str(config), "--model", "tiny:qwen2_5_vl:xs", "--out", str(tmp_path / "m")]) == 0
    )
    out = capsys.readouterr().out
    entry = json.loads((tmp_path / "m" / "results.json").read_text())["evaluators"]["pauc"]
    assert entry["metrics"]["malformed_outputs"] == 6 * len(PVQA)
    assert entry["summary"]["warnings"] and "outputs of the model (evaluator 'pauc') are malformed" in out
    assert not out.lstrip().startswith("{")  # the table, not the results JSON
