"""``proactive-eval mcqa``: the report names the protocol and the samples per dataset; acc / ps by hand."""

import json

import numpy as np
from PIL import Image

from proactive_eval.cli import main
from tests.eval.test_coco_environment import record as coco_record
from tests.eval.test_environments import rod_record, write_images


def data_dir(tmp_path):
    """coco2014: ids 0, 1, 2 are in the filtered benchmark, 3 is not; ROD: 0..3 are, 100 is not."""
    Image.fromarray(np.zeros((160, 200, 3), np.uint8)).save(tmp_path / "img.png")
    coco = [coco_record("left", granularity=3, id=i, image_template="img.png") for i in (0, 1, 2, 3)]
    (tmp_path / "coco2014_preprocessed.jsonl").write_text("".join(json.dumps(r) + "\n" for r in coco))
    write_images(tmp_path, {f"rod/obj_{i}.png": 10 * i for i in range(6)})
    rod = [rod_record(id=i) for i in (0, 1, 2, 3, 100)]
    (tmp_path / "Realistic-Occlusion-Dataset_preprocessed.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rod)
    )
    return tmp_path


def test_filtered_report_names_protocol_and_counts(tmp_path, capsys):
    root = data_dir(tmp_path)
    out = tmp_path / "report"
    assert main(["mcqa", "--data-dir", str(root), "--policy", "oracle", "--out", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "ProactiveBench protocol: filtered (ProactiveBench §3.3)" in text
    assert "samples: ROD 4, COCO 3 (7 in all)" in text
    results = json.loads((out / "results.json").read_text())
    # The oracle: COCO "left" with granularity 3 needs 2 moves then the category; ROD's oracle names the category
    # at once, which the occluded first frame rejects.
    assert results["datasets"]["COCO"] == {"acc": 100.0, "ps": 2.0, "n": 3}
    assert results["datasets"]["ROD"] == {"acc": 0.0, "ps": 0.0, "n": 4}
    assert results["avg"]["acc"] == 50.0 and results["meta"]["records_in_files"] == {"ROD": 5, "COCO": 4}
    assert len((out / "outcomes.jsonl").read_text().splitlines()) == 7
    assert "| steps/s | latency median (s) | latency p95 (s) |" in text and "| blind floor (never looks) |" in text
    assert results["speed"]["pooled"]["steps"] >= 7 and results["speed"]["pooled"]["latency_p95_s"] >= 0
    assert "samples: ROD 4, COCO 3" in capsys.readouterr().out


def test_unfiltered_abstain_and_replay(tmp_path, capsys):
    root = data_dir(tmp_path)
    assert main(["mcqa", "--data-dir", str(root), "--policy", "abstain", "--protocol", "unfiltered"]) == 0
    text = capsys.readouterr().out
    assert "ProactiveBench protocol: unfiltered," in text and "samples: ROD 5, COCO 4 (9 in all)" in text
    assert "| avg | 9 | 0.0 | 0.00 |" in text
    answers = tmp_path / "answers.jsonl"
    # ROD env 0: move left, then "E" (dog, the answer); everything else has no answers and fails.
    answers.write_text(json.dumps({"id": 0, "dataset": "ROD", "answers": ["A", "E"]}) + "\n")
    argv = ["mcqa", "--data-dir", str(root), "--datasets", "ROD", "--policy", f"replay:{answers}"]
    assert main(argv) == 0
    assert "| ROD | 4 | 25.0 | 0.25 |" in capsys.readouterr().out


def test_errors_are_one_line(tmp_path, capsys):
    assert main(["mcqa", "--data-dir", str(tmp_path), "--datasets", "QD", "--policy", "oracle"]) == 2
    assert "QuickDraw_preprocessed.jsonl: no QD file" in capsys.readouterr().err
    data_dir(tmp_path)
    assert main(["mcqa", "--data-dir", str(tmp_path), "--policy", "guess"]) == 2
    assert "unknown MCQA policy 'guess'" in capsys.readouterr().err
