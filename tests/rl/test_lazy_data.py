"""The lazy data pipeline: measured without pixels, cached, encoded per batch, same batches as the eager path."""

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch

from proactive_eval.episodes import Episode, EpisodeError, load_episodes
from proactive_eval.video import frame_plan, iter_frames
from proactive_rl.data import load_mixture, parse_mixture
from proactive_rl.data.lazy import (
    EpisodeEncoder,
    EpisodeMeasure,
    LazyEpisodeCollator,
    episode_rows,
    measure_dataset,
    select_valid,
)
from proactive_rl.models import build_tiny
from proactive_rl.sft.main import build_trainer, make_parser
from proactive_rl.synthetic import generate_episodes
from proactive_rl.synthetic.export import export_dataset

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def processor():
    return build_tiny("qwen2_5_vl", "xs")[1]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Synthetic episodes exported as mp4 files + an episodes JSON (the train split)."""
    out = tmp_path_factory.mktemp("exported")
    export_dataset(out, ["accident", "crime"], 6, seed=0, progress=False, duration=(10, 14))
    return out / "train" / "episodes.json"


def args(tmp_path, *extra, steps=2, mixture=None):
    """The tiny recipe's arguments (optionally another ``dataset_mixture``), a few steps, a private cache."""
    import yaml

    recipe = yaml.safe_load((ROOT / "recipes/tiny/sft.yaml").read_text())
    if mixture is not None:
        recipe["dataset_mixture"] = mixture
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "recipe.yaml").write_text(yaml.safe_dump(recipe))
    argv = ["--config", str(tmp_path / "recipe.yaml"), "--output_dir", str(tmp_path / "out")]
    argv += ["--max_steps", str(steps), "--save_strategy", "no", "--logging_steps", "1", "--disable_tqdm", "true"]
    argv += ["--data_cache_dir", str(tmp_path / "cache"), *extra]
    return make_parser().parse_args_and_config(argv)


def test_plan_and_measured_length_equal_the_real_encoding(exported, processor, tmp_path):
    """Frame times/sizes from packets equal the decoded ones; the measured length equals the real encoding's."""
    videos = list(load_episodes(exported))[:3]
    folder = tmp_path / "frames"
    folder.mkdir()
    for k, (_, frame) in enumerate(iter_frames(videos[0])):
        from PIL import Image

        Image.fromarray(frame[:, :48]).save(folder / f"{k}.png")
    framed = Episode.from_dict({**videos[0].to_dict(), "id": "framed", "video": {"frames_dir": str(folder)}})
    synthetic = generate_episodes("object", 2, seed=5, duration=(10, 12))
    for episode in [*videos, framed, *synthetic]:
        if episode.video is not None:
            decoded = [(t, f.shape[:2]) for t, f in iter_frames(episode)]
            assert frame_plan(episode) == decoded
        for max_length in (None, 300):  # 300 forces drop_frames truncation
            real = EpisodeEncoder(processor, max_length)(episode)
            measured = EpisodeMeasure(EpisodeEncoder(processor, max_length, process_images=False))
            row = episode_rows([episode])[0]
            assert measured(row) == {"length": len(real["input_ids"]), "error": ""}


@pytest.mark.slow
def test_lazy_batches_and_losses_equal_the_eager_path(tmp_path):
    """Acceptance 2: same batches (ids, labels, pixels) and the same 20-step loss curve on the tiny recipe."""
    trainers = {p: build_trainer(*args(tmp_path / p, "--data_pipeline", p, steps=20)) for p in ("eager", "lazy")}
    loaders = {p: iter(t.get_train_dataloader()) for p, t in trainers.items()}
    for _ in range(3):
        eager, lazy = next(loaders["eager"]), next(loaders["lazy"])
        assert lazy.pop("skipped_records").item() == 0
        assert sorted(eager) == sorted(lazy)
        for key in ("input_ids", "labels", "attention_mask", "image_grid_thw", "mm_token_type_ids"):
            assert torch.equal(eager[key], lazy[key]), key
        assert torch.allclose(eager["pixel_values"], lazy["pixel_values"], atol=1e-6, rtol=0)
    losses = {}
    for p, trainer in trainers.items():
        trainer.train()
        losses[p] = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert len(losses["lazy"]) == 20
    assert losses["lazy"] == pytest.approx(losses["eager"], abs=1e-5, rel=0)


def test_the_map_runs_once_then_every_rank_and_resume_read_the_cache(exported, processor, tmp_path, monkeypatch):
    """Acceptance 3 (in one process): a second build (another rank, a resume) measures nothing."""
    calls = []
    original = EpisodeMeasure.__call__
    monkeypatch.setattr(EpisodeMeasure, "__call__", lambda self, row: calls.append(1) or original(self, row))
    episodes, _ = load_mixture(parse_mixture([str(exported)]))
    measure = EpisodeMeasure(EpisodeEncoder(processor, 1024, process_images=False))
    first = measure_dataset(episode_rows(episodes), measure, cache_dir=tmp_path)
    assert len(calls) == len(episodes)
    again = measure_dataset(episode_rows(episodes), measure, cache_dir=tmp_path)
    assert len(calls) == len(episodes) and again["length"] == first["length"]
    assert min(first["length"]) > 0 and not any(first["error"])
    # a changed setting (or a changed video file) is measured anew
    measure_dataset(
        episode_rows(episodes),
        EpisodeMeasure(EpisodeEncoder(processor, 512, process_images=False)),
        cache_dir=tmp_path,
    )
    assert len(calls) == 2 * len(episodes)


def test_resumed_build_reads_the_cache(tmp_path, caplog):
    """A resumed run builds its trainer again from the same recipe: it reads the measurement, measures nothing."""
    with caplog.at_level(logging.INFO, logger="proactive_rl.data.lazy"):
        build_trainer(*args(tmp_path))
        assert "measured 80 episodes" in caplog.text
        caplog.clear()
        build_trainer(*args(tmp_path))
        assert "measured" not in caplog.text.replace("measured episodes read from the cache", "")
        assert "read from the cache" in caplog.text


def bad_file(tmp_path, exported):
    records = json.loads(exported.read_text())[:3]
    base = exported.parent
    for r in records:
        r["video"] = str(base / r["video"])
    missing = {**records[1], "id": "novideo", "video": str(tmp_path / "missing.mp4")}
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([records[0], missing, records[2]]))
    return path


def test_bad_records_named_before_step_1_or_skipped(tmp_path, exported, processor):
    """Acceptance 4: a missing video, and a too-long episode (truncation: error), name file, id and field."""
    path = bad_file(tmp_path, exported)
    episodes, _ = load_mixture(parse_mixture([str(path)]))
    measured = measure_dataset(
        episode_rows(episodes),
        EpisodeMeasure(EpisodeEncoder(processor, 1024, process_images=False)),
        cache_dir=tmp_path,
    )
    with pytest.raises(EpisodeError, match="novideo") as err:
        select_valid(measured, "raise")
    assert err.value.field == "video" and err.value.file == str(path)
    kept, skipped = select_valid(measured, "skip")
    assert len(kept) == 2 and [(e.record, e.field) for e in skipped] == [("novideo", "video")]
    short = EpisodeMeasure(EpisodeEncoder(processor, 64, truncation="error", process_images=False))
    with pytest.raises(EpisodeError, match=episodes[0].id) as err:
        select_valid(measure_dataset(episode_rows(episodes[:1]), short, cache_dir=tmp_path), "raise")
    assert err.value.field == "max_length"
    late = {**json.loads(path.read_text())[0], "id": "late", "targets": [{"time": 99.0, "text": "x"}]}
    (tmp_path / "late.json").write_text(json.dumps([late]))
    with pytest.raises(EpisodeError, match="late") as err:
        build_trainer(*args(tmp_path, mixture=[str(tmp_path / "late.json")]))
    assert err.value.field == "targets[0].time"


def test_a_video_that_fails_mid_training_is_skipped_and_counted(tmp_path, exported):
    """Acceptance 4: a video truncated after the measurement is dropped from its batch, counted, no crash."""
    data = tmp_path / "data"
    shutil.copytree(exported.parent, data)
    mixture = [str(data / "episodes.json")]
    trainer = build_trainer(*args(tmp_path, "--dataloader_num_workers", "1", steps=4, mixture=mixture))
    first = sorted((data / "videos").glob("*.mp4"))[0]
    first.write_bytes(first.read_bytes()[:200])  # corrupt after the map ran
    trainer.train()
    assert trainer.skipped_records >= 1
    assert any("skipped_records" in h for h in trainer.state.log_history)


def test_a_save_to_disk_folder_trains(tmp_path, exported):
    """Acceptance 5: a recipe pointing at a `Dataset.save_to_disk` folder (videos relative to it) trains."""
    import datasets

    folder = tmp_path / "saved"
    shutil.copytree(exported.parent / "videos", folder / "videos")
    datasets.Dataset.from_list(json.loads(exported.read_text())).save_to_disk(str(folder))
    trainer = build_trainer(*args(tmp_path, steps=2, mixture=[{"source": str(folder), "weight": 2.0}]))
    assert len(trainer.train_dataset) == 2 * len(json.loads(exported.read_text()))
    trainer.train()
    assert trainer.state.global_step == 2


def test_hub_ids_and_trl_entries_go_to_load_dataset(tmp_path, exported, monkeypatch):
    """A Hub id (and TRL's ``{path, name, split}`` entry) is read with `datasets.load_dataset`, never the Hub here."""
    import datasets

    records = json.loads(exported.read_text())
    for r in records:
        r["video"] = str(exported.parent / r["video"])
    seen = []

    def fake_load_dataset(path, name=None, split=None, **kwargs):
        seen.append((path, name, split))
        return datasets.Dataset.from_list(records)

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    trl_style = {"datasets": [{"path": "org/streams", "name": "v1", "split": "train"}], "seed": 3}
    for mixture in ([{"source": "org/streams", "config": "v1"}], trl_style):
        episodes, _ = load_mixture(parse_mixture(mixture))
        assert [e.id for e in episodes] == [r["id"] for r in records]
    assert seen == [("org/streams", "v1", "train")] * 2
    assert parse_mixture(trl_style)[0].seed == 3


def test_the_collator_holds_one_batch_and_pickles(exported, processor):
    import pickle

    episodes = list(load_episodes(exported))[:2]
    collator = pickle.loads(pickle.dumps(LazyEpisodeCollator(EpisodeEncoder(processor, 1024), 0)))
    batch = collator(list(episode_rows(episodes)))
    assert batch["input_ids"].shape[0] == 2 and batch["skipped_records"].item() == 0


@pytest.mark.distributed
@pytest.mark.slow
def test_two_ddp_processes_measure_once(tmp_path):
    """Acceptance 3: under 2-process DDP the main process measures and the second reads its cache."""
    import os
    import subprocess
    import sys

    cmd = [str(Path(sys.executable).parent / "accelerate"), "launch", "--num_processes", "2"]
    cmd += ["--config_file", "launch/ddp.yaml", "-m", "proactive_rl.sft", "--config", "recipes/tiny/sft.yaml"]
    cmd += ["--max_steps", "1", "--save_strategy", "no", "--report_to", "none", "--disable_tqdm", "true"]
    cmd += ["--per_device_train_batch_size", "2", "--output_dir", str(tmp_path / "out")]
    cmd += ["--data_cache_dir", str(tmp_path / "cache")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-5000:]
    assert log.count("data: measured 80 episodes") == 1, log[-5000:]
    assert log.count("data: 80 measured episodes read from the cache") == 1, log[-5000:]
    assert len([p for p in (tmp_path / "cache").iterdir() if not p.name.startswith(".")]) == 1


def test_length_grouped_batching_uses_the_measured_lengths(tmp_path):
    """Opt-in ``train_sampling_strategy: group_by_length`` reads the map's ``length`` column (no re-encoding)."""
    from transformers.trainer_pt_utils import LengthGroupedSampler

    trainer = build_trainer(*args(tmp_path, "--train_sampling_strategy", "group_by_length"))
    sampler = trainer._get_train_sampler()
    assert isinstance(sampler, LengthGroupedSampler)
    assert sampler.lengths == trainer.train_dataset["length"] and min(sampler.lengths) > 0
