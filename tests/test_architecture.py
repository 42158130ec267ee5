"""The layer contracts of docs/architecture.md hold: `lint-imports` (pyproject's [tool.importlinter]) keeps them all."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_import_layers_and_no_cycles():
    exe = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    if not Path(exe).exists():
        pytest.skip("import-linter is not installed (pip install -e '.[dev]')")
    run = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "0 broken" in run.stdout


PACKAGES = ("proactive_rl", "eval/proactive_eval", "rewards/proactive_rewards")


def undeclared_local_imports(source):
    """Line numbers of imports inside a function whose function has no ``# deferred: <why>`` comment.

    >>> undeclared_local_imports("def f():\\n    import json\\n")
    [2]
    >>> undeclared_local_imports("def f():\\n    # deferred: optional extra\\n    import wandb\\n")
    []
    """
    lines = source.splitlines()
    found = []
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if not any("# deferred:" in line for line in lines[function.lineno - 1 : node.end_lineno]):
                    found.append(node.lineno)
    return sorted(set(found))


def test_imports_are_at_module_top_unless_deferred_on_purpose():
    """A function-local import is allowed only with a ``# deferred: <why>`` comment in its function."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in undeclared_local_imports(path.read_text())
    ]
    assert not offenders, "move these imports to module top or say `# deferred: <why>`:\n" + "\n".join(offenders)


def test_the_local_import_check_can_fail():
    source = "import os\n\n\ndef f():\n    from json import dumps\n    return dumps\n"
    assert undeclared_local_imports(source) == [5]


# --- docs/architecture.md's recipes, followed step by step --------------------------------------------------------


def toy_letter_reward(completion, answer, components=False):
    """Step 1 of "a new reward": 1.0 when the completion starts with the option letter `answer`, else 0.0.

    >>> toy_letter_reward(" C. cat", "C"), toy_letter_reward("B", "C")
    (1.0, 0.0)
    """
    value = float(str(completion).strip()[:1] == answer)
    return {"overall": value} if components else value


def toy_trl_reward(completions, answer, **_):
    """The same reward in TRL form, for a user reward named by import path."""
    return [toy_letter_reward(c, a) for c, a in zip(completions, answer)]


@pytest.fixture
def toy_registries(monkeypatch):
    """The reward and evaluator registries, restored after the test (other tests see the shipped ones only)."""
    import proactive_rewards.registry as rewards
    from proactive_rl.evaluation import base

    monkeypatch.setattr(rewards, "_REGISTRY", dict(rewards._REGISTRY))
    yield
    base.EVALUATORS.pop("toy_letter", None)


def test_a_toy_reward_and_a_toy_evaluator_by_the_recipe(toy_registries, tmp_path):
    import dataclasses
    import json

    from proactive_rewards import RewardSpec, get_reward, register_reward
    from proactive_rl.evaluation import (
        EvalCallbackConfig,
        Evaluator,
        EvaluatorConfig,
        Scored,
        evaluate_model,
        register_evaluator,
    )
    from proactive_rl.evaluation.base import evaluator_class
    from proactive_rl.evaluation.proactivebench import build_environments
    from proactive_rl.models import build_tiny

    # a new reward: steps 2 and 3 (step 1 above); the dotted-path form for user code
    register_reward(RewardSpec("toy_letter", toy_letter_reward, columns=("answer",)))
    reward = get_reward("toy_letter")
    assert reward(["C", " B. dog", "x"], answer=["C", "B", "C"]) == [1.0, 1.0, 0.0]
    assert get_reward(f"{__name__}:toy_trl_reward")(["C", "A"], answer=["C", "C"]) == [1.0, 0.0]

    # a new evaluator: steps 1-4
    @dataclasses.dataclass
    class ToyLetterConfig(EvaluatorConfig):
        environments: list | None = None

    @register_evaluator("toy_letter")
    class ToyLetterEvaluator(Evaluator):
        """Share of environments whose first question the model answers with the correct option's letter."""

        config_class = ToyLetterConfig

        def _load(self):
            return build_environments(self.config.environments)

        def generate(self, model, processor, items):
            from proactive_rl.evaluation import mcqa_answer_fn

            answer = mcqa_answer_fn(model, processor, self.config.max_new_tokens)
            records = []
            for env in items:
                observation = env.reset()
                letter = chr(65 + list(observation.options).index(env.answer))
                records.append({"id": env.id, "answer": answer(observation), "letter": letter})
            return records

        def score(self, records, out_dir, plots=True):
            values = get_reward("toy_letter")([r["answer"] for r in records], answer=[r["letter"] for r in records])
            if out_dir is not None:
                out_dir.mkdir(parents=True, exist_ok=True)
                (out_dir / "answers.json").write_text(json.dumps(records))
            return Scored({"letter_acc": 100 * sum(values) / len(values)}, {"n": len(values)})

    # step 5: from an eval_callback block, through evaluate_model on the tiny model
    block = {"evaluators": [{"type": "toy_letter", "name": "toy", "environments": [{"kind": "occlusion", "n": 3}]}]}
    config = EvalCallbackConfig.from_dict(block)
    assert evaluator_class(f"{__name__}.ToyEvaluatorByPath") is ToyEvaluatorByPath  # the import-path form
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    evaluator = ToyLetterEvaluator(config.evaluators[0])
    results = evaluate_model(model, processor, [evaluator], out_dir=tmp_path)
    assert results["complete"], results["incomplete"]
    records = json.loads((tmp_path / "toy" / "answers.json").read_text())
    assert [r["id"] for r in records] == ["occlusion_s0_00000", "occlusion_s0_00001", "occlusion_s0_00002"]
    by_hand = 100 * sum(r["answer"].strip()[:1] == r["letter"] for r in records) / 3
    assert results["metrics"] == {"toy/letter_acc": by_hand}
    assert results["evaluators"]["toy"]["summary"] == {"n": 3}


def _toy_by_path():
    from proactive_rl.evaluation import Evaluator

    class ToyEvaluatorByPath(Evaluator):
        pass

    return ToyEvaluatorByPath


ToyEvaluatorByPath = _toy_by_path()
