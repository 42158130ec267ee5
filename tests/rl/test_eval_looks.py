"""Does the model look? The blind row and the swap counterfactual in the evaluators, their results and reports,
and in the training callback's logs (docs/spec.md §14)."""

from __future__ import annotations

import json

import pytest
import torch

from proactive_eval.benchmarks.p3i.blind import blind_prs_summary
from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model

SHORT = {"duration": [10, 10]}


def prs_eval(n=3, seed=99, task="atomic", **extra):
    source = {"source": "synthetic", "task": task, "num_episodes": n, "seed": seed, "knobs": SHORT}
    return {"type": "prs", "episodes": [source], "max_new_tokens": 4, **extra}


@pytest.fixture(scope="module")
def tiny():
    from proactive_rl.models import build_tiny

    return build_tiny("qwen2_5_vl", "xs", seed=0)


class FirstPixel:
    """A scripted policy that looks: at its first frame it says the episode's first target text when the frame is
    its own episode's (the mean pixel it was told), else "0"."""

    def __init__(self, own_means):
        self.own_means = own_means

    def reset(self, episode):
        self.episode = episode

    def step(self, observation):
        if observation.step != 0:
            return "</Silence>"
        mean = float(observation.frames[0].mean())
        own = abs(mean - self.own_means[self.episode.id]) < 1e-6
        return "</Response> " + (self.episode.targets[0].text if own else "0")


def test_prs_evaluator_reports_the_blind_row_and_the_swap(tiny, monkeypatch, tmp_path):
    from proactive_rl.synthetic import OraclePolicy

    monkeypatch.setattr("proactive_rl.evaluation.policy.model_policy", lambda *a, **k: OraclePolicy())
    config = EvalCallbackConfig.from_dict({"evaluators": [prs_eval(counterfactual=["swap", "freeze"])]})
    [evaluator] = build_evaluators(config.evaluators)
    results = evaluate_model(*tiny, [evaluator], out_dir=tmp_path)
    m = results["metrics"]
    # the oracle reads the episode's ground truth, not its frames: swapping them changes nothing
    assert m["prs/prs_b"] == m["prs/prs_b_swap"] == m["prs/prs_b_freeze"] == pytest.approx(100.0)
    assert m["prs/vision_gain_prs_b"] == 0.0 and m["prs/atomic/vision_gain_prs_b"] == 0.0
    # the blind row is the blind schedule of proactive_eval.benchmarks.p3i.blind, scored by the evaluator's scorer
    expected = blind_prs_summary(evaluator.items())
    assert (
        m["prs/blind_prs_b"] == expected["overall"]["prs_b"] and m["prs/blind_prs_u"] == expected["overall"]["prs_u"]
    )
    assert m["prs/atomic/blind_prs_b"] == expected["groups"]["atomic"]["prs_b"]
    summary = json.loads((tmp_path / "results.json").read_text())["evaluators"]["prs"]["summary"]
    assert summary["blind"]["fit"] == {"atomic": "leave_one_out"}
    assert summary["blind"]["schedules"]["atomic"]["prs_b"]["responses"]
    report = (tmp_path / "prs" / "report.md").read_text()
    assert "↳ blind schedule" in report and "frames swapped (swap)" in report and "Does the model look?" in report
    lines = (tmp_path / "prs" / "predictions_counterfactual.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["id"] for x in lines) == sorted(
        f"{e.id}#{k}" for e in evaluator.items() for k in ("swap", "freeze")
    )
    # each counterfactual's per-episode scores, for the paired intervals (docs/spec.md §15)
    for kind in ("swap", "freeze"):
        rows = [json.loads(x) for x in (tmp_path / "prs" / f"prs_episodes_{kind}.jsonl").read_text().splitlines()]
        assert sorted(r["episode_id"] for r in rows) == sorted(e.id for e in evaluator.items())
        assert all(r["prs_b"] == pytest.approx(1.0) for r in rows)  # the oracle: 100 with any frames


def test_a_policy_that_looks_has_a_vision_gain(tiny, monkeypatch):
    from proactive_rl.data.frames import frames_of

    config = EvalCallbackConfig.from_dict({"evaluators": [prs_eval(n=4, counterfactual=["swap"])]})
    [evaluator] = build_evaluators(config.evaluators)
    means = {e.id: float(frames_of(e)[0][1].mean()) for e in evaluator.items()}
    assert len(set(means.values())) == len(means)  # every episode's first frame differs
    monkeypatch.setattr("proactive_rl.evaluation.policy.model_policy", lambda *a, **k: FirstPixel(means))
    m = evaluate_model(*tiny, [evaluator])["metrics"]
    assert m["prs/prs_b_swap"] < m["prs/prs_b"]
    assert m["prs/vision_gain_prs_b"] == pytest.approx(m["prs/prs_b"] - m["prs/prs_b_swap"])


def test_baseline_episodes_fit_the_blind_schedule_on_another_split(tiny, monkeypatch):
    from proactive_rl.synthetic import SilentPolicy

    monkeypatch.setattr("proactive_rl.evaluation.policy.model_policy", lambda *a, **k: SilentPolicy())
    train = {"source": "synthetic", "task": "atomic", "num_episodes": 6, "seed": 5, "knobs": SHORT}
    config = EvalCallbackConfig.from_dict({"evaluators": [prs_eval(baseline_episodes=[train])]})
    [evaluator] = build_evaluators(config.evaluators)
    results = evaluate_model(*tiny, [evaluator])
    expected = blind_prs_summary(evaluator.items(), reference=evaluator.baseline_items())
    assert results["metrics"]["prs/blind_prs_b"] == expected["overall"]["prs_b"]
    assert results["evaluators"]["prs"]["summary"]["blind"]["fit"] == {"atomic": "reference"}


def test_bad_counterfactual_names_the_field():
    with pytest.raises(ValueError, match=r"evaluators\[0\].counterfactual: expected a list out of swap, freeze"):
        EvalCallbackConfig.from_dict({"evaluators": [prs_eval(counterfactual=["mirror"])]})


@pytest.mark.slow
def test_training_callback_logs_the_blind_row_and_the_vision_gain(tmp_path):
    import yaml

    from proactive_rl.evaluation import ProactiveEvalCallback
    from proactive_rl.sft import main as sft_main

    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    recipe = yaml.safe_load((root / "recipes/tiny/sft.yaml").read_text())
    source = {"source": "synthetic", "task": "atomic", "num_episodes": 4, "seed": 1, "knobs": SHORT}
    recipe.update(
        dataset_mixture=[source],
        max_steps=2,
        save_steps=2,
        logging_steps=1,
        per_device_train_batch_size=2,
        output_dir=str(tmp_path / "out"),
        report_to="none",
        disable_tqdm=True,
        eval_callback={"evaluators": [prs_eval(n=2, counterfactual=["swap"])]},
    )
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(recipe))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        trained = sft_main.main(*sft_main.make_parser().parse_args_and_config(["--config", str(path)]))
    finally:
        torch.set_num_threads(threads)
    [callback] = [c for c in trained.callback_handler.callbacks if isinstance(c, ProactiveEvalCallback)]
    metrics = callback.history[-1]["metrics"]
    logged = next(e for e in trained.state.log_history if "eval_prs/blind_prs_b" in e)
    for key in ("blind_prs_b", "blind_prs_u", "atomic/blind_prs_b", "vision_gain_prs_b", "prs_b_swap"):
        assert logged[f"eval_prs/{key}"] == pytest.approx(metrics[f"prs/{key}"])
    assert logged["eval_prs/vision_gain_prs_b"] == pytest.approx(metrics["prs/prs_b"] - metrics["prs/prs_b_swap"])


def test_mcqa_evaluator_reports_the_blind_policy_and_the_swap(tiny, monkeypatch, tmp_path):
    from proactive_eval.benchmarks.proactivebench.blind import blind_mcqa_summary

    # a constant answer: the same option whatever the image, so swapping the images changes nothing
    monkeypatch.setattr("proactive_rl.evaluation.policy.mcqa_answer_fn", lambda *a, **k: lambda obs, hint: "A.")
    envs = [{"kind": "occlusion", "n": 4, "seed": 0}]
    raw = {"type": "mcqa", "environments": envs, "baseline_environments": envs, "counterfactual": ["swap"]}
    [evaluator] = build_evaluators(EvalCallbackConfig.from_dict({"evaluators": [raw]}).evaluators)
    results = evaluate_model(*tiny, [evaluator], out_dir=tmp_path)
    m = results["metrics"]
    assert m["mcqa/acc_swap"] == m["mcqa/acc"] and m["mcqa/vision_gain_acc"] == 0.0
    expected = blind_mcqa_summary(evaluator.items(), evaluator.baseline_items())
    assert m["mcqa/blind_acc"] == expected["acc"] >= m["mcqa/acc"]  # fitted on these: at least any constant answer
    assert "blind policy" in (tmp_path / "mcqa" / "report.md").read_text()
    assert len((tmp_path / "mcqa" / "outcomes_swap.jsonl").read_text().splitlines()) == 4


def test_the_baseline_command_prints_the_evaluators_blind_row(tiny, monkeypatch, tmp_path, capsys):
    from proactive_eval import cli
    from proactive_eval.episodes import save_episodes
    from proactive_rl.synthetic import OraclePolicy, generate_episodes

    monkeypatch.setattr("proactive_rl.evaluation.policy.model_policy", lambda *a, **k: OraclePolicy())
    files = {}
    for split, seed in (("test", 3), ("train", 4)):
        files[split] = tmp_path / f"{split}.json"
        save_episodes(files[split], [*generate_episodes("accident", 4, seed), *generate_episodes("atomic", 3, seed)])
    raw = prs_eval(n=0) | {"episodes": [str(files["test"])], "baseline_episodes": [str(files["train"])]}
    [evaluator] = build_evaluators(EvalCallbackConfig.from_dict({"evaluators": [raw]}).evaluators)
    metrics = evaluate_model(*tiny, [evaluator])["metrics"]
    assert cli.main(["baseline", "--episodes", str(files["test"]), "--fit", str(files["train"]), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)["prs"]
    for key in ("prs_u", "prs_b"):
        assert metrics[f"prs/blind_{key}"] == printed["overall"][key]
        for task in ("accident", "atomic"):
            assert metrics[f"prs/{task}/blind_{key}"] == printed["groups"][task][key]


def test_leaderboard_has_a_blind_row_and_the_vision_gain(tmp_path):
    from proactive_rl.evaluation.watch import CheckpointWatcher

    watcher = CheckpointWatcher(tmp_path / "run", tmp_path / "watch", [], load=None, plots=True)
    for step, prs_b in ((2, 40.0), (4, 60.0)):
        metrics = {"prs/prs_b": prs_b, "prs/blind_prs_b": 90.0, "prs/prs_b_swap": 40.0}
        metrics |= {"prs/vision_gain_prs_b": prs_b - 40.0, "prs/atomic/prs_b": prs_b, "prs/atomic/blind_prs_b": 85.0}
        watcher.state["checkpoints"][f"checkpoint-{step}"] = {"step": step, "status": "ok", "metrics": metrics}
    written = watcher.write_leaderboard()
    lines = written["markdown"].read_text().splitlines()
    header = [c.strip() for c in lines[2].strip("|").split("|")]
    assert "prs/blind_prs_b" not in header and "prs/vision_gain_prs_b" in header
    blind = [c.strip() for c in lines[-1].strip("|").split("|")]
    assert blind[0] == "blind schedule"
    assert blind[header.index("prs/prs_b")] == "90.00" and blind[header.index("prs/atomic/prs_b")] == "85.00"
    assert blind[header.index("prs/vision_gain_prs_b")] == "–"
    step4 = [c.strip() for c in lines[5].strip("|").split("|")]
    assert step4[header.index("prs/vision_gain_prs_b")] == "20.00"
    assert written["plot"].stat().st_size > 0


def test_bad_baseline_environments_name_the_field():
    raw = {"type": "mcqa", "environments": [{"kind": "occlusion", "n": 2}], "baseline_environments": [{"n": 2}]}
    with pytest.raises(ValueError, match=r"evaluators\[0\].baseline_environments\[0\]"):
        EvalCallbackConfig.from_dict({"evaluators": [raw]})
