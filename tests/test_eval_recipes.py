"""The evaluation recipes (recipes/pvqa, recipes/p3i_bench, recipes/proactivebench/eval_*) parse, cite their paper
section, show their launch command, and dry-run: each evaluator, with its data swapped for a synthetic stand-in of the
same kind and its judge for the rule judge, evaluates a tiny model end to end. OEG reads
ProactiveBench JSONL only, so its stand-in is a synthetic environment exported as a JSONL record with PNG images."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from proactive_eval.episodes import TASKS

ROOT = Path(__file__).resolve().parents[1]
EVAL_RECIPES = sorted(
    [
        *ROOT.glob("recipes/pvqa/*.yaml"),
        *ROOT.glob("recipes/p3i_bench/*.yaml"),
        *ROOT.glob("recipes/proactivebench/eval_*.yaml"),
    ]
)
IDS = [str(p.relative_to(ROOT)) for p in EVAL_RECIPES]


def test_there_are_evaluation_recipes():
    assert {p.parent.name for p in EVAL_RECIPES} >= {"pvqa", "p3i_bench", "proactivebench"}


@pytest.mark.parametrize("path", EVAL_RECIPES, ids=IDS)
def test_recipe_parses_cites_and_shows_its_command(path):
    from proactive_rl.cli import build_parser
    from proactive_rl.evaluation import load_eval_config

    config = load_eval_config(str(path))
    assert config.evaluators
    lines = path.read_text().splitlines()
    command = lines[0].lstrip("# ")
    assert "proactive_rl.cli eval" in command or command.startswith("proactive-rl eval"), lines[0]
    assert f"--config {path.relative_to(ROOT / 'recipes')}" in command, (
        "the launch line must name this file (shipped name)"
    )
    argv = command.split("proactive_rl.cli", 1)[1].split() if "proactive_rl.cli" in command else command.split()[1:]
    build_parser().parse_args(argv)  # the command's flags are the eval command's
    header = "\n".join(line for line in lines if line.startswith("#"))
    assert "§" in header, f"{path}: name the paper section the setting comes from"


def _stand_in(evaluator, data_dir: Path):
    """The evaluator with tiny synthetic data of the same kind, one item, two tokens, and the rule judge."""
    if evaluator.type in ("mcqa", "oeg"):
        kinds = {"ROD": "occlusion", "VSOD": "occlusion", "IN-C": "corruption", "QD": "sketch", "MVP-N": "zoom_out"}
        kind = kinds.get(evaluator.environments[0].get("dataset"), "sketch")
        envs = [{"kind": kind, "n": 1, "seed": 3}]
        if evaluator.type == "oeg":
            envs = [_exported(kind, data_dir)]
        judge = {"judge": {"type": "rule", "kind": "token_f1"}} if evaluator.type == "oeg" else {}  # mcqa: none
        # Synthetic stand-ins are not samples of the filtered benchmark: the unfiltered protocol reads them.
        return dataclasses.replace(
            evaluator, environments=envs, max_items=1, max_new_tokens=2, protocol="unfiltered", **judge
        )
    sources = []
    for src in evaluator.episodes:
        task = Path(src.source).stem if Path(src.source).stem in TASKS else "pvqa"
        sources.append(
            dataclasses.replace(
                src, source="synthetic", task=task, num_episodes=1, seed=5, knobs={"duration": [10, 10]}
            )
        )
    judge = {"type": "rule", "kind": "token_f1"} if evaluator.type == "pauc" else evaluator.judge
    return dataclasses.replace(evaluator, episodes=sources, max_items=1, max_new_tokens=2, judge=judge)


def _exported(kind: str, data_dir: Path) -> dict:
    """One synthetic environment of `kind` written as a ProactiveBench JSONL record (with its rule) and PNG images."""
    import json

    from proactive_rl.synthetic import make_environments
    from proactive_rl.synthetic.export import export_environments

    export_environments(data_dir, kind, make_environments(kind, 1, 3))
    path = data_dir / f"{kind}.jsonl"
    rule = json.loads(path.read_text().splitlines()[0])["dataset_rule"]
    return {"path": str(path), "dataset": rule, "data_dir": str(data_dir)}


@pytest.mark.slow
@pytest.mark.parametrize("path", EVAL_RECIPES, ids=IDS)
def test_recipe_dry_run_on_a_tiny_model(path, tmp_path):
    from proactive_rl.evaluation import build_evaluators, evaluate_model, load_eval_config
    from proactive_rl.models import build_tiny

    config = load_eval_config(str(path))
    evaluators = build_evaluators([_stand_in(e, tmp_path / "data") for e in config.evaluators])
    model, processor = build_tiny("qwen2_5_vl", "xs")
    results = evaluate_model(model.eval(), processor, evaluators, out_dir=tmp_path, plots=False)
    assert results["complete"], results["incomplete"]
    assert {e.name for e in evaluators} == set(results["evaluators"])
    assert all(entry["metrics"] for entry in results["evaluators"].values())
