"""Episode loading and validation (docs/spec.md §1): every malformed record names file, id and field, or is skipped."""

import json

import pytest

from proactive_eval import Episode, EpisodeError, load_episodes, save_episodes
from proactive_rewards import Target


def good(rid="e1", **over):
    record = {
        "id": rid,
        "task": "atomic",
        "duration": 60.0,
        "fps": 1.0,
        "instruction": "count plates",
        "targets": [{"time": 10.0, "text": "1"}, {"time": 40.0, "text": "2", "window": [40.0, 44.0]}],
    }
    record.update(over)
    return record


def _targets(*items):
    return [dict(t) for t in items]


# (name, record, field named in the error)
MALFORMED = [
    ("missing field", {k: v for k, v in good("bad").items() if k != "duration"}, "duration"),
    ("missing target time", good("bad", targets=[{"text": "1"}]), "targets[0]"),
    ("negative time", good("bad", targets=_targets({"time": -1.0, "text": "1"})), "targets[0].time"),
    ("nan time", good("bad", targets=_targets({"time": float("nan"), "text": "1"})), "targets[0].time"),
    ("infinite time", good("bad", targets=_targets({"time": float("inf"), "text": "1"})), "targets[0].time"),
    ("non-finite duration", good("bad", duration=float("inf")), "duration"),
    ("after video end", good("bad", targets=_targets({"time": 61.0, "text": "1"})), "targets[0].time"),
    (
        "unsorted targets",
        good("bad", targets=_targets({"time": 30.0, "text": "2"}, {"time": 10.0, "text": "1"})),
        "targets[1].time",
    ),
    (
        "window a == b",
        good("bad", targets=_targets({"time": 5.0, "text": "1", "window": [5.0, 5.0]})),
        "targets[0].window",
    ),
    (
        "window a > b",
        good("bad", targets=_targets({"time": 5.0, "text": "1", "window": [6.0, 5.0]})),
        "targets[0].window",
    ),
    ("unknown task", good("bad", task="cooking"), "task"),
    ("user turn after end", good("bad", user_turns=[{"time": 99.0, "text": "hi"}]), "user_turns[0].time"),
]


@pytest.mark.parametrize("name, record, field", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_record_raises_naming_file_id_field(tmp_path, name, record, field):
    path = tmp_path / "eps.json"
    # json.dumps writes NaN / Infinity literals, which Python's reader accepts: the loader must reject them
    path.write_text(json.dumps([good("ok1"), record, good("ok2")]))
    with pytest.raises(EpisodeError) as info:
        load_episodes(path)
    err = info.value
    assert (err.file, err.record, err.field) == (str(path), "bad", field)
    assert str(path) in str(err) and "'bad'" in str(err) and field in str(err)


@pytest.mark.parametrize("name, record, field", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_record_is_skipped_and_counted(tmp_path, name, record, field):
    path = tmp_path / "eps.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in [good("ok1"), record, good("ok2")]) + "\n")
    episodes = load_episodes(path, on_error="skip")
    assert [e.id for e in episodes] == ["ok1", "ok2"]
    assert len(episodes.skipped) == 1 and episodes.skipped[0].field == field


def test_duplicate_id(tmp_path):
    path = tmp_path / "eps.json"
    path.write_text(json.dumps([good("a"), good("b"), good("a")]))
    with pytest.raises(EpisodeError) as info:
        load_episodes(path)
    assert (info.value.record, info.value.field) == ("a", "id")
    kept = load_episodes(path, on_error="skip")
    assert [e.id for e in kept] == ["a", "b"] and "duplicate" in str(kept.skipped[0])


def test_record_without_id_is_located_by_index(tmp_path):
    path = tmp_path / "eps.json"
    path.write_text(json.dumps([good("a"), {"task": "atomic"}]))
    with pytest.raises(EpisodeError) as info:
        load_episodes(path)
    assert info.value.record == "#1" and info.value.field == "id"


@pytest.mark.parametrize("content", [None, b"\xff\xfe not utf-8", b"[{broken json", b'{"not": "a list"}'])
def test_unreadable_file(tmp_path, content):
    path = tmp_path / "eps.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(EpisodeError) as info:
        load_episodes(path, on_error="skip")  # a file that cannot be read is never "skipped"
    assert info.value.file == str(path) and str(path) in str(info.value)


def test_round_trip_and_meta(tmp_path):
    record = good("e1", meta={"seed": 3}, extra_field="kept", video="v.mp4")
    record["targets"][0]["related"] = [8.0, 8.0]  # a related span may be an instant
    path = tmp_path / "eps.json"
    path.write_text(json.dumps([record]))
    (episode,) = load_episodes(path)
    assert episode.targets[0] == Target(10.0, "1", None, (8.0, 8.0))
    assert episode.meta == {"seed": 3, "extra_field": "kept"}
    assert episode.video_path() == tmp_path / "v.mp4"
    out = tmp_path / "again.json"
    save_episodes(out, [episode])
    assert load_episodes(out) == [episode]


def test_from_dict_in_memory():
    ep = Episode.from_dict(good("m", id=7))
    assert ep.id == "7" and ep.targets[1].window == (40.0, 44.0)
