"""`proactive-rl eval` on ProactiveBench: the MCQA and OEG reports name the protocol and the samples per dataset,
and the filtered benchmark is the default (ProactiveBench §3.3; docs/spec.md §6)."""

import json

import numpy as np
import pytest
from PIL import Image

from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model
from tests.eval.test_coco_environment import record as coco_record


@pytest.fixture(scope="module")
def tiny():
    from proactive_rl.models import build_tiny

    return build_tiny("qwen2_5_vl", "xs", seed=0)


def coco_file(folder):
    """coco2014 records: ids 0 and 1 are in the filtered benchmark, 3 is not."""
    folder.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.full((160, 200, 3), 90, np.uint8)).save(folder / "img.png")
    path = folder / "coco2014_preprocessed.jsonl"
    path.write_text("".join(json.dumps(coco_record("up", id=i, image_template="img.png")) + "\n" for i in (0, 1, 3)))
    return {"path": str(path), "dataset": "COCO", "data_dir": str(folder)}


@pytest.mark.parametrize("protocol, n", [("filtered", 2), ("unfiltered", 3)])
def test_mcqa_report_names_protocol_and_counts(tiny, tmp_path, protocol, n):
    raw = {"type": "mcqa", "name": "pb", "environments": [coco_file(tmp_path / "data")], "max_new_tokens": 2}
    if protocol == "unfiltered":
        raw["protocol"] = "unfiltered"
    config = EvalCallbackConfig.from_dict({"evaluators": [raw]})
    results = evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=tmp_path / "out")
    assert results["complete"], results["incomplete"]
    summary = results["evaluators"]["pb"]["summary"]
    assert summary["protocol"]["protocol"] == protocol and summary["protocol"]["samples"] == {"COCO": n}
    report = (tmp_path / "out" / "pb" / "report.md").read_text()
    assert f"ProactiveBench protocol: {protocol}" in report and f"samples: COCO {n} ({n} in all)" in report
    assert "| steps/s | latency median (s) | latency p95 (s) |" in report and "| blind policy |" in report
    assert summary["speed"]["steps"] >= n and summary["speed"]["latency_p95_s"] >= 0
    assert json.loads((tmp_path / "out" / "results.json").read_text())["evaluators"]["pb"]["summary"]["protocol"]


def test_oeg_report_names_protocol_and_counts(tiny, tmp_path):
    raw = {"type": "oeg", "name": "oeg", "environments": [coco_file(tmp_path / "data")], "max_new_tokens": 2}
    config = EvalCallbackConfig.from_dict({"evaluators": [raw]})
    results = evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=tmp_path / "out")
    assert results["complete"], results["incomplete"]
    assert results["evaluators"]["oeg"]["summary"]["protocol"]["samples"] == {"COCO": 2}
    assert "ProactiveBench protocol: filtered" in (tmp_path / "out" / "oeg" / "report.md").read_text()


def test_a_path_without_dataset_and_a_bad_protocol_fail_at_start_up():
    env = {"path": "x.jsonl"}
    with pytest.raises(ValueError, match=r"environments\[0\]: a ProactiveBench path needs its 'dataset'"):
        EvalCallbackConfig.from_dict({"evaluators": [{"type": "mcqa", "environments": [env]}]})
    with pytest.raises(ValueError, match="protocol: expected one of filtered, unfiltered"):
        EvalCallbackConfig.from_dict({"evaluators": [{"type": "mcqa", "environments": [env], "protocol": "all"}]})
