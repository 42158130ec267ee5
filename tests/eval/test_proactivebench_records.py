"""One ProactiveBench record schema (docs/spec.md §6) for the format reader and the environments, on the authors' layouts.

The records below follow the fields the authors' ``environment.py`` reads per dataset (integer ids and
``reference_image`` ids, named ``{image}`` / ``{level}`` / ``{informative}`` templates, ImageNet-C starting at
level 5); the expected image names are written out by hand.
"""

import json

import pytest

from proactive_eval.benchmarks.proactivebench.environments import ProactiveBenchEnvironment, load_environments
from proactive_eval.benchmarks.proactivebench.format import load_proactivebench, parse_record
from proactive_eval.episodes import EpisodeError

CATEGORIES = ["goldfish", "tench", "hen", "cock"]


def authors(rid=0, **over):
    record = {
        "id": rid,
        "image_template": "x/obj_{image}.png",
        "first_image": 3,
        "num_images": 6,
        "reference_image": 3,
        "prompt": "What is behind the box?",
        "options": ["Move the box to the left.", "Move the box to the right.", "I do not know."],
        "categories": CATEGORIES,
        "answer": "tench",
    }
    record.update(over)
    return record


def write(folder, name, *records):
    path = folder / name
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_authors_records_per_dataset_load_with_their_image_names(tmp_path):
    rod = load_proactivebench(write(tmp_path, "Realistic-Occlusion-Dataset_preprocessed.jsonl", authors()))[0]
    assert (rod.id, rod.rule, rod.answer) == ("0", "ROD", "tench")
    assert rod.image_path(4) == tmp_path / "x/obj_4.png" and rod.reference_path() == tmp_path / "x/obj_3.png"

    vsod = authors(7, image_template="v/{image}.jpg", first_image=12, num_images=40, strong_occlusions=True)
    (vsod,) = load_proactivebench(write(tmp_path, "OcclusionDataSet-MM20_preprocessed.jsonl", vsod))
    assert vsod.image_path(12) == tmp_path / "v/0012.jpg" and vsod.extra == {"strong_occlusions": True}

    mvp = authors(5, image_template="m/{informative}_{image}.png", first_image=10, valid_images=[10, 11, 12])
    (mvp,) = load_proactivebench(write(tmp_path, "MVP-N_preprocessed.jsonl", dict(mvp, num_images=3)))
    assert mvp.image_path(11) == tmp_path / "m/0_0011.png"
    assert mvp.image_path(12, informative=True) == tmp_path / "m/1_0012.png"

    # ImageNet-C starts at corruption level 5 with num_images = 5: first_image is a level, not a position.
    inc = authors(2, image_template="c/{level}/n01443537.JPEG", first_image=5, num_images=5, reference_image=1)
    (inc,) = load_proactivebench(write(tmp_path, "ImageNet-C_preprocessed.jsonl", inc))
    assert (inc.rule, inc.first_image) == ("IN-C", 5) and inc.image_path(5) == tmp_path / "c/5/n01443537.JPEG"

    cit = authors(3, image_template="t/{image}.jpg", first_image=0, num_images=30, step_size=5, max_steps=6)
    assert load_proactivebench(write(tmp_path, "ChangeIt_preprocessed.jsonl", cit))[0].image_path(25).name == "25.jpg"

    coco = authors(
        4,
        image_template="val2014/COCO_val2014_000000000042.jpg",
        direction="left",
        granularity=3,
        horizontal_step=40,
        vertical_step=0,
        crop={"top": 0, "left": 120, "height": 300, "width": 400},
    )
    (coco,) = load_proactivebench(write(tmp_path, "coco2014_preprocessed.jsonl", coco))
    assert coco.image_path(0) == coco.image_path(9) == tmp_path / "val2014/COCO_val2014_000000000042.jpg"


@pytest.mark.parametrize(
    "name, record, field",
    [
        (
            "ImageNet-C_preprocessed.jsonl",
            authors(9, image_template="{level}.png", first_image=2, num_images=5),
            "first_image",
        ),
        ("MVP-N_preprocessed.jsonl", authors(9, valid_images=[1, 2]), "valid_images"),
        ("ChangeIt_preprocessed.jsonl", authors(9, max_steps=4), "step_size"),
        ("ChangeIt_preprocessed.jsonl", authors(9, step_size=0, max_steps=4), "step_size"),
        ("ImageNet-C_preprocessed.jsonl", authors(9, first_image=5, quality_answer="Sharpen."), "quality_answer"),
        ("coco2014_preprocessed.jsonl", authors(9), "direction"),
        ("Realistic-Occlusion-Dataset_preprocessed.jsonl", authors(9, image_template="a/{foo}.png"), "image_template"),
        ("Realistic-Occlusion-Dataset_preprocessed.jsonl", authors(9, image_template="a/fixed.png"), "image_template"),
        ("Realistic-Occlusion-Dataset_preprocessed.jsonl", authors(9, reference_image=-1), "reference_image"),
        ("Realistic-Occlusion-Dataset_preprocessed.jsonl", authors(9, reference_image=True), "reference_image"),
        ("Realistic-Occlusion-Dataset_preprocessed.jsonl", authors(9, first_image=6), "first_image"),
        ("Realistic-Occlusion-Dataset_preprocessed.jsonl", authors(True), "id"),
    ],
)
def test_errors_name_file_record_and_field_in_both_loaders(tmp_path, name, record, field):
    path = write(tmp_path, name, record)
    with pytest.raises(EpisodeError) as info:
        load_proactivebench(path)
    assert (info.value.file, info.value.record, info.value.field) == (str(path), str(record["id"]), field)
    dataset = name.removesuffix("_preprocessed.jsonl")
    if dataset != "coco2014":  # no image-sequence environment for COCO
        with pytest.raises(EpisodeError) as env_info:
            load_environments(path, dataset, load_images=False, protocol="unfiltered")
        assert (env_info.value.file, env_info.value.record, env_info.value.field) == (
            str(path),
            str(record["id"]),
            field,
        )


def test_the_dataset_comes_from_the_argument_then_the_record_then_the_file_name(tmp_path):
    # An export that names its rule in the record (positional template, reference stored as a path).
    synthetic = authors(
        "s0",
        image_template="img/{:01d}.png",
        first_image=4,
        num_images=5,
        reference_image="img/0.png",
        dataset="synthetic_corruption",
        dataset_rule="IN-C",
    )
    (rec,) = load_proactivebench(write(tmp_path, "corruption.jsonl", synthetic))
    assert rec.rule == "IN-C" and rec.reference_path() == tmp_path / "img/0.png" and rec.image_path(4).name == "4.png"
    # No dataset anywhere: only the common checks (first_image may be any non-negative integer).
    (plain,) = load_proactivebench(write(tmp_path, "plain.jsonl", authors(first_image=60)))
    assert plain.rule is None
    with pytest.raises(EpisodeError, match="first_image"):
        load_proactivebench(write(tmp_path, "plain.jsonl", authors(first_image=60)), dataset="ROD")
    with pytest.raises(ValueError, match="unknown ProactiveBench dataset"):
        load_proactivebench(tmp_path / "plain.jsonl", dataset="MNIST")


def test_environment_accepts_a_validated_record_and_walks_imagenet_c_from_level_5(tmp_path):
    record = authors(
        1,
        image_template="c/{level}.JPEG",
        first_image=5,
        num_images=5,
        options=["Denoise the image.", "Deblur the image.", "I cannot answer."],
        quality_answer="Denoise the image.",
    )
    parsed = parse_record(record, tmp_path / "ImageNet-C_preprocessed.jsonl")
    env = ProactiveBenchEnvironment(parsed, "ImageNet-C", tmp_path, load_images=False)
    paths = [env.reset().image_path]
    for _ in range(4):
        result = env.step("A")
        if result.observation is not None:
            paths.append(result.observation.image_path)
    # levels 5 -> 4 -> 3 -> 2 -> 1; the fifth turn is the last step, where a denoise is no longer valid.
    assert paths == [str(tmp_path / f"c/{level}.JPEG") for level in (5, 4, 3, 2, 1)]
    assert (env.step("A").outcome, env.done) == ("fail", True)


def test_a_saved_copy_keeps_the_dataset_rules(tmp_path):
    from proactive_eval.benchmarks.proactivebench.format import save_proactivebench

    vsod = authors(7, image_template="v/{image}.jpg", first_image=12, num_images=40)
    (rec,) = load_proactivebench(write(tmp_path, "OcclusionDataSet-MM20_preprocessed.jsonl", vsod))
    save_proactivebench(tmp_path / "copy.jsonl", [rec])  # the file name no longer names the dataset
    (copy,) = load_proactivebench(tmp_path / "copy.jsonl")
    assert copy.rule == "VSOD" and copy.image_path(12) == tmp_path / "v/0012.jpg"
    assert copy.to_dict() == rec.to_dict() == dict(vsod, id="7", dataset_rule="VSOD")
