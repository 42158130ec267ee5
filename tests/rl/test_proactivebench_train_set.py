"""The QuickDraw + MS-COCO GRPO training set (ProactiveBench §5, App. A.7, App. C) from a synthetic COCO-format
dataset and synthetic QuickDraw records: proportions, disjointness, crop geometry checked against the boxes, and a
few GRPO steps of the suggestion trainer on the rows."""

import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from proactive_eval.benchmarks.proactivebench.coco import COCOEnvironment
from proactive_eval.benchmarks.proactivebench.environments import proactivebench_summary, run_environment
from proactive_rl.data.proactivebench.coco_records import iou
from proactive_rl.data.proactivebench.negatives import lexical_similarity
from proactive_rl.data.proactivebench.train_set import build_train_set, main
from proactive_rl.synthetic.coco_format import make_coco_dataset
from proactive_rl.synthetic.environments import make_environments
from proactive_rl.synthetic.export import export_environments

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    root = tmp_path_factory.mktemp("pb")
    instances = make_coco_dataset(root / "coco", num_images=30, seed=0)
    export_environments(root / "qd", "sketch", make_environments("sketch", 12, seed=3))
    lines = (root / "qd" / "sketch.jsonl").read_text().splitlines()
    (root / "QuickDraw_preprocessed.jsonl").write_text("\n".join(lines[:3]) + "\n")  # "the benchmark's" drawings
    return root, instances, [json.loads(x)["id"] for x in lines[:3]]


def build(root, instances, out, fraction, **kw):
    return build_train_set(
        out, instances, root / "coco", root / "qd" / "sketch.jsonl", [root / "QuickDraw_preprocessed.jsonl"],
        num_coco=kw.pop("num_coco", 10), num_qd=kw.pop("num_qd", 8), ambiguous_fraction=fraction, seed=1, **kw,
    )  # fmt: skip


def rows_of(out):
    return [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("fraction", [0.5, 0.25, 1.0, 0.0])
def test_rows_mix_ambiguous_and_unambiguous_frames_as_asked(sources, tmp_path, fraction):
    root, instances, bench_ids = sources
    manifest = build(root, instances, tmp_path, fraction)
    rows = rows_of(tmp_path)
    for dataset, n in (("COCO", 10), ("QD", 8)):
        part = [r for r in rows if r["dataset"] == dataset]
        assert len(part) == n and sum(r["ambiguous"] for r in part) == round(fraction * n)
        assert manifest["sources"][dataset]["ambiguous"] == round(fraction * n)
    for row in rows:
        # ambiguous: a suggestion is still valid there; unambiguous: fully revealed, only the category is right
        assert bool(row["valid_actions"]) == row["ambiguous"]
        assert row["answer"] in row["options"] and (tmp_path / row["image"]).exists()
    qd = [r for r in rows if r["dataset"] == "QD"]
    assert not {r["env_id"] for r in qd} & set(bench_ids)  # disjoint from the benchmark's drawings
    assert manifest["sources"]["QD"]["excluded_as_benchmark"] == 3
    assert manifest["sources"]["COCO"]["negatives"] == "lexical"


def test_coco_records_keep_single_objects_with_low_iou_crops_that_the_oracle_fully_reveals(sources, tmp_path):
    root, instances, _ = sources
    build(root, instances, tmp_path, 0.5)
    data = json.loads(instances.read_text())
    per_image = {}
    for ann in data["annotations"]:
        per_image.setdefault(ann["image_id"], []).append(ann)
    records = [json.loads(x) for x in (tmp_path / "coco2014_train_preprocessed.jsonl").read_text().splitlines()]
    assert len(records) == sum(len(a) == 1 for a in per_image.values()) < len(data["images"])
    assert {r["direction"] for r in records} > {"zoom"} and {r["granularity"] for r in records} <= {3, 4, 5}
    names = [c["name"] for c in data["categories"]]
    sims = lexical_similarity(names, [c["supercategory"] for c in data["categories"]])
    for record in records:
        (ann,) = per_image[record["coco_image_id"]]
        x, y, w, h = ann["bbox"]
        assert record["first_iou"] < 0.3 and record["first_iou"] == pytest.approx(
            iou(_first(record, root), (x, y, x + w, y + h)), abs=1e-4
        )
        env = COCOEnvironment(record, root / "coco")
        out = run_environment(env, lambda o, env=env: env.oracle_answer())
        assert out.success and out.turns - 1 == env.steps_needed
        full = env.crop_box()
        assert list(full) == record["full_view"] and full[0] <= x and full[1] <= y
        assert full[2] >= x + w and full[3] >= y + h  # the last view holds the whole object
        # Hard negatives: the three categories most similar to the answer (the lexical miner, recomputed here).
        i = names.index(record["answer"])
        expected = sorted((n for n in names if n != record["answer"]), key=lambda n: (-sims[i][names.index(n)], n))[:3]
        assert sorted(record["categories"]) == sorted([record["answer"], *expected])
    assert (
        proactivebench_summary(
            [run_environment(COCOEnvironment(r, root / "coco"), lambda o: "I do not know.") for r in records]
        )["acc"]
        == 0.0
    )


def _first(record, root):
    return COCOEnvironment(record, root / "coco", load_images=False).crop_box()


def test_a_coco_row_image_is_the_crop_of_its_state(sources, tmp_path):
    root, instances, _ = sources
    build(root, instances, tmp_path, 1.0, num_qd=0)
    records = {
        str(json.loads(x)["id"]): json.loads(x)
        for x in (tmp_path / "coco2014_train_preprocessed.jsonl").read_text().splitlines()
    }
    row = next(r for r in rows_of(tmp_path) if r["dataset"] == "COCO")
    env = COCOEnvironment(records[row["env_id"]], root / "coco")
    obs = env.reset()
    for _ in range(row["step"]):
        obs = env.step(env.oracle_answer()).observation
    assert np.array_equal(np.asarray(Image.open(tmp_path / row["image"]).convert("RGB")), obs.image)


def test_cli_and_bad_arguments(sources, tmp_path, capsys):
    root, instances, _ = sources
    argv = ["--out", str(tmp_path), "--coco-annotations", str(instances), "--coco-images", str(root / "coco")]
    assert main(argv + ["--num-coco", "4", "--ambiguous-fraction", "0.5"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 4
    assert main(argv + ["--ambiguous-fraction", "1.5"]) == 2
    assert "ambiguous_fraction: must be in [0, 1]" in capsys.readouterr().err
    assert main(argv + ["--num-coco", "500"]) == 2  # more rows than single-object images
    assert "too few environments" in capsys.readouterr().err


@pytest.mark.slow
def test_the_suggestion_trainer_trains_on_the_rows(sources, tmp_path):
    from proactive_rl.data.mcqa import parse_environments
    from proactive_rl.grpo.suggestion.main import main as train
    from proactive_rl.grpo.suggestion.main import make_parser

    root, instances, _ = sources
    build(root, instances, tmp_path / "data", 0.5, num_coco=6, num_qd=6)
    argv = ["--config", str(ROOT / "recipes/tiny/grpo_suggestion.yaml"), "--output_dir", str(tmp_path / "run")]
    for k, v in {"per_device_train_batch_size": 4, "num_generations": 4, "max_steps": 2, "warm_start_steps": 0,
                 "logging_steps": 1, "eval_before": "false"}.items():  # fmt: skip
        argv += [f"--{k}", str(v)]
    script_args, training_args, model_args = make_parser().parse_args_and_config(argv)
    script_args.environments = parse_environments(
        [{"source": str(tmp_path / "data/rows.jsonl"), "format": "rows"}], "env"
    )
    script_args.eval_environments = None
    trainer = train(script_args, training_args, model_args)
    assert trainer.state.global_step == 2 and len(trainer.train_dataset) == 12
    logs = [h for h in trainer.state.log_history if "rewards/proactive_suggestion/mean" in h]
    assert logs and all(0.0 <= h["rewards/proactive_suggestion/mean"] <= 1.0 for h in logs)
    with pytest.raises(ValueError, match="format: expected one of records, rows"):
        parse_environments([{"source": "x.jsonl", "format": "csv"}], "env")
    with pytest.raises(ValueError, match="holds training rows, not environments"):
        parse_environments([{"source": "x.jsonl", "format": "rows"}], "env")[0].build()
