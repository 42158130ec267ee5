"""The ``oeg`` evaluator (docs/spec.md §6): a tiny model answers handwritten ProactiveBench records, an OpenAI-compatible
judge (a real HTTP server on loopback, with scripted 0/1 lists) scores them, and agg / acc / ps match a hand
computation.

Scripted judge answers and their scores (``PREDICTION_THR``: QD 1, ROD 2, VSOD 3):

    qd-1   "<think>1, 1</think>...\\n1, 0"  over [details, cat]           ps 1  category 0  agg 1
    qd-2   "0, 1"                          over [details, bus]           ps 0  category 1  agg 1
    rod-1  "1"                             over [blocks, camera] (2)     wrong length: 0 0 0
    vsod-1 "0,0,1,0"                       over [wait, rewind, camera, Alice]  ps 1  category 0  agg 1

so over the four: agg 75, acc 25, ps 50; per dataset QD 100 / 50 / 50, ROD 0 / 0 / 0, VSOD 100 / 0 / 100.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from proactive_eval.judges import OEG_SYSTEM_PROMPT
from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model
from tests.support.fake_openai import FakeOpenAI

JUDGE_SAYS = {
    "What is drawn (1)?": "<think>1, 1</think>The output suggests adding details.\n1, 0",
    "What is drawn (2)?": "0, 1",
    "What is behind the box?": "1",
    "Who is speaking?": "0,0,1,0",
}
VALID = {
    "qd-1": "Add more details to the drawing, cat.",
    "qd-2": "Add more details to the drawing, bus.",
    "rod-1": "Move the blocks, Move the camera.",
    "vsod-1": "Wait for the occlusion to disappear, Rewind the video, Move the camera, Alice.",
}


def _image(folder: Path, name: str, value: int) -> None:
    from PIL import Image

    (folder / name).parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((16, 16, 3), value, np.uint8)).save(folder / name)


def _records(folder: Path) -> list[dict]:
    """Three datasets' JSONL files with their images; each record's first image has its own grey level."""
    common = {"first_image": 0, "num_images": 2, "categories": ["cat", "bus", "dog", "cow"]}
    files = {
        "QD": [
            {"id": "qd-1", "prompt": "What is drawn (1)?", "answer": "cat", "image_template": "qd1/{image}.png"},
            {"id": "qd-2", "prompt": "What is drawn (2)?", "answer": "bus", "image_template": "qd2/{image}.png"},
        ],
        "ROD": [{"id": "rod-1", "prompt": "What is behind the box?", "answer": "dog", "image_template": "rod/{}.png"}],
        "VSOD": [
            {"id": "vsod-1", "prompt": "Who is speaking?", "answer": "Alice", "image_template": "vsod/{image}.png"}
        ],
    }
    options = {
        "QD": ["Add more details to the drawing.", "I do not know."],
        "ROD": ["Move the box to the left.", "Move the box to the right.", "I cannot tell."],
        "VSOD": ["Wait for the occlusion to disappear.", "Rewind the video.", "I do not know."],
    }
    specs, level = [], 10
    for dataset, records in files.items():
        for r in records:
            r.update(common, options=options[dataset])
            if dataset == "VSOD":
                r["categories"] = ["Alice", "Bob", "Carol", "Dan"]
            zfill = 4 if dataset in ("QD", "VSOD") else 0
            for k in range(2):
                name = r["image_template"].replace("{}", str(k)).replace("{image}", str(k).zfill(zfill))
                _image(folder, name, level + k)
            level += 20
        path = folder / f"{dataset}_preprocessed_test.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
        specs.append({"path": str(path), "dataset": dataset, "data_dir": str(folder)})
    return specs


def _judge_answer(messages: list[dict]) -> str:
    user = messages[-1]["content"]
    return next(text for question, text in JUDGE_SAYS.items() if f"{question}\n### Correct Answers" in user)


@pytest.fixture(scope="module")
def tiny():
    from proactive_rl.models import build_tiny

    return build_tiny("qwen2_5_vl", "xs", seed=0)


def test_scores_equal_the_hand_computation(tiny, tmp_path, monkeypatch):
    import proactive_rl.evaluation.policy as policy
    import proactive_rl.evaluation.proactivebench as proactivebench

    seen = []  # the images the model was shown
    real = policy.image_answer_fn

    def spy(*args, **kwargs):
        answer = real(*args, **kwargs)
        return lambda image, text: seen.append(np.asarray(image)) or answer(image, text)

    monkeypatch.setattr(proactivebench, "image_answer_fn", spy)  # its use site (imported by name there)
    specs = _records(tmp_path / "data")
    with FakeOpenAI(answer=_judge_answer) as server:
        judge = {"type": "openai", "base_url": server.base_url, "model": "qwen3-8b", "max_retries": 0}
        judge["cache_path"] = str(tmp_path / "judge.sqlite")
        config = EvalCallbackConfig.from_dict(
            {
                "evaluators": [
                    {
                        "type": "oeg",
                        "environments": specs,
                        "max_new_tokens": 4,
                        "judge": judge,
                        "protocol": "unfiltered",
                    }
                ]
            }
        )
        results = evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=tmp_path / "a")
        assert results["complete"], results["incomplete"]
        requests = server.requests
        again = evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=tmp_path / "b")
        # the model's 4 answers, then the blind answer's candidates (docs/spec.md §14): the most common valid answers
        # of each dataset (3, 2 and 4 texts) judged for its records (2, 1 and 1); the re-run is answered from the cache
        assert server.requests == requests == 4 + (3 * 2 + 2 * 1 + 4 * 1)
    expected = {"agg": 75.0, "acc": 25.0, "ps": 50.0}
    expected |= {"QD/agg": 100.0, "QD/acc": 50.0, "QD/ps": 50.0, "ROD/agg": 0.0, "ROD/acc": 0.0, "ROD/ps": 0.0}
    expected |= {"VSOD/agg": 100.0, "VSOD/acc": 0.0, "VSOD/ps": 100.0}
    own = {k: v for k, v in results["metrics"].items() if "blind_" not in k}
    assert own == {f"oeg/{k}": v for k, v in expected.items()} and results["metrics"] == again["metrics"]
    # the scripted judge rates by question only: any fixed answer is judged as the model's was
    assert {k: results["metrics"][f"oeg/blind_{k}"] for k in ("agg", "acc", "ps")} == {
        "agg": 75.0,
        "acc": 25.0,
        "ps": 50.0,
    }

    out = tmp_path / "a" / "oeg"
    predictions = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [p["id"] for p in predictions] == list(VALID)
    assert {p["id"]: p["valid_answers"] for p in predictions} == VALID
    assert [p["prompt"] for p in predictions] == [*JUDGE_SAYS][:3] + [
        "This is a frame extracted from a video. Answer the following question. Who is speaking?"
    ]
    # the judge saw the authors' system prompt and each prediction verbatim
    assert {b["messages"][0]["content"] for b in server.bodies} == {OEG_SYSTEM_PROMPT}
    users = sorted(b["messages"][1]["content"] for b in server.bodies)
    assert all(any(u.endswith(f"### System Output:\n{p['answer']}") for u in users) for p in predictions)
    judged = {r["id"]: (r["proactive_suggestion"], r["category_prediction"], r["aggregate"]) for r in _lines(out)}
    assert judged == {"qd-1": (1, 0, 1), "qd-2": (0, 1, 1), "rod-1": (0, 0, 0), "vsod-1": (1, 0, 1)}
    report = (out / "report.md").read_text()
    assert "| QD | 2 | 100.0 | 50.0 | 50.0 |" in report
    assert "| answers/s | latency median (s) | latency p95 (s) |" in report
    assert "| blind floor (never looks) | 4 | 75.0 | 25.0 | 50.0 |" in report
    # each model call saw its record's first image, decoded from disk (grey levels 10, 30, 50, 70)
    assert [int(img.mean()) for img in seen[:4]] == [10, 30, 50, 70] and seen[0].shape == (16, 16, 3)


def _lines(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "judgments.jsonl").read_text().splitlines()]


def test_hint_and_rule_judge(tiny, tmp_path):
    specs = _records(tmp_path / "data")[:1]
    raw = {
        "type": "oeg",
        "name": "qd",
        "environments": specs,
        "max_new_tokens": 2,
        "hint": True,
        "protocol": "unfiltered",
    }
    config = EvalCallbackConfig.from_dict({"evaluators": [raw]})
    results = evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=tmp_path)
    assert results["complete"], results["incomplete"]
    [row, _] = _lines(tmp_path / "qd")
    assert (
        row["prompt"]
        == "What is drawn (1)? If you cannot answer this question, please tell me what I should do to help you."
    )
    assert row["judge"].count(",") == 1  # the rule judge answers one bit per valid answer


@pytest.mark.parametrize(
    "evaluator, message",
    [
        ({"type": "oeg"}, "evaluators[0].environments: expected a list"),
        (
            {"type": "oeg", "environments": [{"kind": "sketch", "n": 2}]},
            "environments[0]: an oeg evaluator needs 'path'",
        ),
        ({"type": "oeg", "environments": [{"path": "x.jsonl"}], "hint": "yes"}, "evaluators[0].hint: a boolean"),
        (
            {"type": "prs", "episodes": [{"source": "synthetic", "task": "atomic", "num_episodes": 1}], "hint": True},
            "(`hint` is a field of mcqa / oeg evaluators)",
        ),
        (
            {"type": "oeg", "environments": [{"path": "x.jsonl", "dataset": "QD"}], "answer_letters_only": True},
            "(`answer_letters_only` is a field of mcqa evaluators)",
        ),
        (
            {"type": "mcqa", "environments": [{"kind": "corruption", "negatives": "medium"}]},
            "evaluators[0].environments[0]: ",
        ),
        (
            {"type": "oeg", "environments": [{"path": "x.jsonl"}], "judge": {"type": "gpt"}},
            "evaluators[0].judge: expected",
        ),
        (
            {"type": "oeg", "environments": [{"path": "x.jsonl"}], "judge": {"type": "openai", "model": "m"}},
            "evaluators[0].judge: an openai judge needs 'base_url' and 'model'",
        ),
    ],
)
def test_bad_config_names_the_field(evaluator, message):
    with pytest.raises(ValueError, match="eval_callback") as info:
        EvalCallbackConfig.from_dict({"evaluators": [evaluator]})
    assert message in str(info.value)


def test_mcqa_on_jsonl_sees_the_images_too(tiny, tmp_path):
    """The MCQA evaluator answers through the same function: JSONL environments (built without images, 1×1
    placeholders) are decoded from disk; a placeholder made the tiny Qwen2.5-VL fail in generation."""
    specs = _records(tmp_path / "data")[:1]
    config = EvalCallbackConfig.from_dict(
        {"evaluators": [{"type": "mcqa", "environments": specs, "max_new_tokens": 2, "protocol": "unfiltered"}]}
    )
    results = evaluate_model(*tiny, build_evaluators(config.evaluators))
    assert results["complete"], results["incomplete"]
    assert results["evaluators"]["mcqa"]["num_items"] == 2


def test_swap_shows_another_records_first_image_with_the_same_question(tiny, tmp_path, monkeypatch):
    import proactive_rl.evaluation.policy as policy
    import proactive_rl.evaluation.proactivebench as proactivebench

    seen = []
    real = policy.image_answer_fn

    def spy(*args, **kwargs):
        answer = real(*args, **kwargs)
        return lambda image, text: seen.append((int(np.asarray(image).mean()), text)) or answer(image, text)

    monkeypatch.setattr(proactivebench, "image_answer_fn", spy)  # its use site (imported by name there)
    specs = _records(tmp_path / "data")
    with FakeOpenAI(answer=_judge_answer) as server:
        judge = {"type": "openai", "base_url": server.base_url, "model": "qwen3-8b", "max_retries": 0}
        raw = {"type": "oeg", "environments": specs, "max_new_tokens": 2, "judge": judge, "protocol": "unfiltered"}
        raw["counterfactual"] = ["swap"]
        config = EvalCallbackConfig.from_dict({"evaluators": [raw]})
        results = evaluate_model(*tiny, build_evaluators(config.evaluators))
    # QD's two records swap first images (grey 10 <-> 30), questions unchanged; ROD and VSOD have no partner
    assert seen[:4] == [(10, "What is drawn (1)?"), (30, "What is drawn (1)?"), (30, "What is drawn (2)?")] + [
        (10, "What is drawn (2)?")
    ]
    assert len(seen) == 6
    m = results["metrics"]
    assert m["oeg/agg_swap"] == 100.0  # the scripted judge rates by question: QD is judged as the model's answers
    assert m["oeg/vision_gain_agg"] == 0.0
