"""Records are validated before the first step and fail naming the record, or are skipped and counted (acceptance 7)."""

import json

import pytest
import torch

from proactive_eval.episodes import Episode, EpisodeError
from proactive_rewards import Target
from proactive_rl.data import EpisodeCollator, apply_weight, load_mixture, prepare_examples
from proactive_rl.data.mixture import parse_mixture
from proactive_rl.sft.config import SFTScriptArguments


def fake_encode(episode):
    n = int(episode.duration) * 10
    return {"input_ids": list(range(n)), "labels": [-100] * (n - 1) + [5]}


def good(i):
    return Episode(id=f"ok{i}", task="atomic", duration=10.0, instruction="count", targets=[Target(3.0, "1")])


def bad_records(tmp_path):
    late = Episode(id="late", task="atomic", duration=10.0, instruction="x", targets=[Target(12.0, "1")])
    novideo = Episode(
        id="novideo", task="atomic", duration=5.0, instruction="x", video="missing.mp4", base_dir=tmp_path
    )
    long = Episode(id="long", task="atomic", duration=50.0, instruction="x")
    return [late, novideo, long]


@pytest.mark.parametrize("which,field", [(0, "targets[0].time"), (1, "video"), (2, "max_length")])
def test_bad_record_fails_naming_it(tmp_path, which, field):
    episodes = [good(0), bad_records(tmp_path)[which], good(1)]
    with pytest.raises(EpisodeError) as err:
        prepare_examples(episodes, fake_encode, max_length=200, truncation="error")
    assert err.value.record == episodes[1].id and err.value.field == field
    assert episodes[1].id in str(err.value)


def test_skip_and_count(tmp_path):
    episodes = [good(0), *bad_records(tmp_path), good(1)]
    data = prepare_examples(episodes, fake_encode, max_length=200, on_error="skip")
    assert [e.id for e in data.episodes] == ["ok0", "ok1"]
    assert sorted(e.record for e in data.skipped) == ["late", "long", "novideo"]
    assert "max_length" in data.skip_summary()


def test_file_record_after_video_end_names_file_and_record(tmp_path):
    path = tmp_path / "eps.json"
    records = [good(0).to_dict(), {**good(1).to_dict(), "id": "late", "targets": [{"time": 99.0, "text": "1"}]}]
    path.write_text(json.dumps(records))
    with pytest.raises(EpisodeError, match="late") as err:
        load_mixture(parse_mixture([str(path)]))
    assert str(path) in str(err.value)
    episodes, skipped = load_mixture(parse_mixture([str(path)]), on_error="skip")
    assert [e.id for e in episodes] == ["ok0"] and [s.record for s in skipped] == ["late"]


def test_weights_repeat_and_subsample():
    eps = [good(i) for i in range(10)]
    assert len(apply_weight(eps, 2.0)) == 20
    half = apply_weight(eps, 0.5, seed=3)
    assert len(half) == 5 and half == apply_weight(eps, 0.5, seed=3)
    assert len(apply_weight(eps, 1.5)) == 15


def test_mixture_schema_errors_name_the_field():
    with pytest.raises(ValueError, match=r"dataset_mixture\[0\].weight"):
        parse_mixture([{"source": "a.json", "weight": 0}])
    with pytest.raises(ValueError, match="unknown keys"):
        parse_mixture([{"source": "a.json", "wieght": 1}])
    with pytest.raises(ValueError, match="needs 'task'"):
        parse_mixture([{"source": "synthetic"}])
    with pytest.raises(ValueError, match="on_bad_record"):
        SFTScriptArguments(dataset_mixture=["a.json"], on_bad_record="ignore")


@pytest.mark.parametrize(
    "source,problem",
    [("", "must be a non-empty path string"), ("\x00", "a NUL byte"), ("a" * 300, "a name of 300")],
    ids=["empty", "nul", "name-over-255"],
)
@pytest.mark.parametrize("as_string", [False, True], ids=["mapping", "string"])
def test_unusable_source_names_are_one_line_input_errors(tmp_path, monkeypatch, source, problem, as_string):
    """'' once read the working directory as a dataset folder, '\\x00' passed as a Hub id, a 300-character name
    raised a raw OSError (File name too long): each is an `InputError` naming the key and the fix."""
    from proactive_rl.data.mixture import DatasetSource, check_source
    from proactive_rl.errors import InputError

    monkeypatch.chdir(tmp_path)
    entry = source if as_string else {"source": source}
    with pytest.raises(InputError) as err:
        parse_mixture(["synthetic.json", entry] if as_string else [entry], "dataset_mixture")
    message = str(err.value)
    index = 1 if as_string else 0
    assert message.startswith(f"dataset_mixture[{index}].source: ") and problem in message, message
    assert "name an episode file, a dataset folder, a Hub id or 'synthetic'" in message and "\n" not in message
    with pytest.raises(InputError, match=r"^eval_mixture\[0\]\.source: "):  # a source built in code, checked later
        check_source(DatasetSource(source), "eval_mixture[0]")


def test_collator_pads_labels_and_concatenates_frames():
    examples = [
        {
            "input_ids": [1, 2, 3],
            "labels": [-100, 2, 3],
            "pixel_values": torch.ones(4, 2),
            "image_grid_thw": torch.tensor([[1, 2, 2]]),
        },
        {
            "input_ids": [4],
            "labels": [4],
            "pixel_values": torch.zeros(8, 2),
            "image_grid_thw": torch.tensor([[1, 2, 4]]),
        },
    ]
    batch = EpisodeCollator(examples, pad_token_id=0)([{"index": 0}, {"index": 1}])
    assert batch["input_ids"].tolist() == [[1, 2, 3], [4, 0, 0]]
    assert batch["labels"].tolist() == [[-100, 2, 3], [4, -100, -100]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch["pixel_values"].shape == (12, 2) and batch["image_grid_thw"].shape == (2, 3)


def test_real_encoder_too_long_episode_is_named():
    """Through proactive_rl.chat: a synthetic episode over max_length with truncation=error names the record."""
    from proactive_rl.models import build_tiny
    from proactive_rl.sft.main import make_encoder
    from proactive_rl.synthetic import generate_episodes

    _, processor = build_tiny("qwen2_5_vl", "xs")
    episodes = generate_episodes("atomic", 2, seed=0, duration=(10, 12))
    script = SFTScriptArguments(dataset_mixture=["x.json"], truncation="error")
    with pytest.raises(EpisodeError, match=episodes[0].id):
        prepare_examples(episodes, make_encoder(processor, script, 64), max_length=64, truncation="error")
    script = SFTScriptArguments(dataset_mixture=["x.json"], truncation="drop_frames")
    data = prepare_examples(episodes, make_encoder(processor, script, 200), max_length=200)
    assert all(len(x["input_ids"]) <= 200 for x in data.examples)
