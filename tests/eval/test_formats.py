"""Converters (ProactiveVideoQA, P³I-style, ProactiveBench) and predictions files."""

import json

import pytest

from proactive_eval import EpisodeError
from proactive_eval.benchmarks.p3i.format import convert_p3i
from proactive_eval.benchmarks.proactivebench.format import load_proactivebench, save_proactivebench
from proactive_eval.benchmarks.pvqa.format import convert_pvqa
from proactive_eval.predictions import PredictionWriter, load_predictions, save_predictions, turn_output
from proactive_rewards import Response, Target

# Two records in the published anno.json layout ([WEB] subset).
ANNO = [
    {
        "video": "LGgaMq1eZGw.52.mp4",
        "question_id": "LGgaMq1eZGw.52.mp4",
        "answer": [
            {
                "role": "assistant",
                "content": "A donkey.",
                "related_timespan": [3.1, 5.0],
                "reply_timespan": [3.1, 6.0],
            },
            {
                "role": "assistant",
                "content": "A creature with wings.",
                "related_timespan": [0.0, 3.07],
                "reply_timespan": [0.0, 4.07],
            },
        ],
        "conversation": [
            {"role": "user", "content": "What creatures are shown in the video?", "time": 0},
            {"role": "user", "content": "(subtitle) hello", "time": 2.5},
        ],
        "duration": 12.866666666666667,
    },
    {
        "video": "gaQwC5QbLeQ.31.mp4",
        "question_id": "gaQwC5QbLeQ.31.mp4",
        "answer": [{"content": "Two crowns.", "related_timespan": [1.77, 10.63], "reply_timespan": [1.77, 10.67]}],
        "conversation": [{"role": "user", "content": "What appears in the video?", "time": 0}],
        "duration": 10.67,
    },
]


def write_anno(tmp_path, records, subset="WEB"):
    folder = tmp_path / subset
    (folder / "videos").mkdir(parents=True)
    path = folder / "anno.json"
    path.write_text(json.dumps(records))
    return path


def test_pvqa_conversion(tmp_path):
    path = write_anno(tmp_path, ANNO)
    first, second = convert_pvqa(path)
    assert (first.id, first.task, first.duration) == ("LGgaMq1eZGw.52.mp4", "pvqa", 12.866666666666667)
    assert first.instruction == first.meta["question"] == "What creatures are shown in the video?"
    assert first.meta["subset"] == "WEB"
    # targets sorted by reply start; window = reply span, related = related span, text = gold
    assert first.targets == [
        Target(0.0, "A creature with wings.", (0.0, 4.07), (0.0, 3.07)),
        Target(3.1, "A donkey.", (3.1, 6.0), (3.1, 5.0)),
    ]
    assert [(u.time, u.text) for u in first.user_turns] == [(2.5, "(subtitle) hello")]
    assert first.video_path() == path.parent / "videos" / "LGgaMq1eZGw.52.mp4"
    assert second.targets[0].window == (1.77, 10.67)


def test_pvqa_without_duration_is_estimated(tmp_path):
    record = {k: v for k, v in ANNO[1].items() if k != "duration"}
    (episode,) = convert_pvqa(write_anno(tmp_path, [record], subset="misc"))
    assert episode.duration == 10.67 and episode.meta["duration_estimated"] is True
    assert "subset" not in episode.meta


def _broken(path_field, value):
    record = json.loads(json.dumps(ANNO[0]))
    keys = path_field.split(".")
    node = record
    for k in keys[:-1]:
        node = node[int(k)] if k.isdigit() else node[k]
    if value is KeyError:
        del node[keys[-1]]
    else:
        node[keys[-1]] = value
    return record


PVQA_BAD = [
    ("answer.0.reply_timespan", [6.0, 3.1], "answer[0].reply_timespan"),
    ("answer.0.reply_timespan", [-1.0, 3.1], "answer[0].reply_timespan"),
    ("answer.0.reply_timespan", KeyError, "answer[0].reply_timespan"),
    ("answer.1.related_timespan", [3.0, 1.0], "answer[1].related_timespan"),
    ("answer.1.content", None, "answer[1].content"),
    ("conversation.0.content", KeyError, "conversation[0].content"),
    ("duration", float("nan"), "duration"),
    ("question_id", KeyError, "question_id"),
]


@pytest.mark.parametrize("where, value, field", PVQA_BAD)
def test_pvqa_errors_name_file_record_field(tmp_path, where, value, field):
    path = write_anno(tmp_path, [ANNO[1], _broken(where, value)])
    with pytest.raises(EpisodeError) as info:
        convert_pvqa(path)
    assert info.value.file == str(path) and info.value.field == field
    assert info.value.record in ("LGgaMq1eZGw.52.mp4", "#1")
    skipped = convert_pvqa(path, on_error="skip")
    assert [e.id for e in skipped] == ["gaQwC5QbLeQ.31.mp4"] and len(skipped.skipped) == 1


def test_pvqa_reply_after_video_end(tmp_path):
    record = _broken("duration", 2.0)
    with pytest.raises(EpisodeError, match="after the video end"):
        convert_pvqa(write_anno(tmp_path, [record]))


def test_p3i_aliases_and_sorting(tmp_path):
    path = tmp_path / "p3i.jsonl"
    rec = {
        "question_id": "q1",
        "task": "atomic",
        "duration": 30.0,
        "query": "count",
        "answers": [{"timestamp": 20.0, "content": "2"}, {"timestamp": 5.0, "content": "1", "span": [4.0, 6.0]}],
    }
    path.write_text(json.dumps(rec) + "\n" + json.dumps(dict(rec, question_id="q2", task="nope")) + "\n")
    with pytest.raises(EpisodeError) as info:
        convert_p3i(path)
    assert (info.value.record, info.value.field) == ("q2", "task")
    (episode,) = convert_p3i(path, on_error="skip")
    assert episode.instruction == "count"
    assert episode.targets == [Target(5.0, "1", (4.0, 6.0)), Target(20.0, "2")]


def _pb(rid="r1", **over):
    rec = {
        "id": rid,
        "image_template": "frames/{:03d}.jpg",
        "first_image": 0,
        "num_images": 5,
        "reference_image": "ref.jpg",
        "prompt": "What is behind the blocks?",
        "options": ["A. move left", "B. move right", "C. I don't know", "D. cat", "E. dog", "F. cow", "G. pig"],
        "categories": ["cat", "dog", "cow", "pig"],
        "answer": "dog",
        "dataset": "ROD",
    }
    rec.update(over)
    return rec


def test_proactivebench_reader(tmp_path):
    path = tmp_path / "rod.jsonl"
    path.write_text(json.dumps(_pb()) + "\n" + json.dumps(_pb("r2", answer=0, image_template="f_%02d.png")) + "\n")
    first, second = load_proactivebench(path)
    assert first.answer == "dog" and first.extra == {"dataset": "ROD"}
    assert first.image_path(3) == tmp_path / "frames" / "003.jpg"
    assert second.answer == "cat" and second.image_path(7) == tmp_path / "f_07.png"
    out = tmp_path / "out.jsonl"
    save_proactivebench(out, [first, second])
    assert [r.to_dict() for r in load_proactivebench(out)] == [first.to_dict(), second.to_dict()]


@pytest.mark.parametrize(
    "over, field",
    [
        ({"prompt": None}, "prompt"),
        ({"num_images": 0}, "num_images"),
        ({"first_image": 5}, "first_image"),
        ({"options": []}, "options"),
        ({"answer": "horse"}, "answer"),
        ({"answer": 9}, "answer"),
        ({"image_template": "no_index.jpg"}, "image_template"),
    ],
)
def test_proactivebench_errors(tmp_path, over, field):
    path = tmp_path / "x.jsonl"
    path.write_text(json.dumps(_pb("bad", **over)) + "\n")
    with pytest.raises(EpisodeError) as info:
        load_proactivebench(path)
    assert (info.value.file, info.value.record, info.value.field) == (str(path), "bad", field)
    assert load_proactivebench(path, on_error="skip") == []


def test_proactivebench_missing_field(tmp_path):
    path = tmp_path / "x.jsonl"
    rec = _pb("bad")
    del rec["categories"]
    path.write_text(json.dumps(rec) + "\n")
    with pytest.raises(EpisodeError, match="categories.*missing"):
        load_proactivebench(path)


# ---- predictions ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("</Silence>", None),
        (" </Silence>\n", None),
        ("", None),
        ("</Response> Warning", "Warning"),
        ("</Response>3", "3"),
        ("Silence is golden", "Silence is golden"),
        ("a plain answer", "a plain answer"),
        # other models' silence signals are outputs unless declared (docs/spec.md §13)
        ("Silence", "Silence"),
        ("NO REPLY", "NO REPLY"),
    ],
)
def test_stored_text_is_a_response_unless_silent(text, expected):
    """A stored record's text had its state token stripped when stored: bare text is a response (docs/spec.md §13)."""
    output = turn_output(1.0, text, plain=True)
    assert (output.text if output is not None else None) == expected
    assert output is None or not output.malformed


def test_silence_signals_are_per_model():
    assert turn_output(1.0, "NO REPLY", silence_signals=("NO REPLY",), plain=True) is None
    assert turn_output(1.0, "NO REPLY", silence_signals=("NO REPLY",)) is None
    # a raw turn of a state-token model: bare text breaks the protocol
    assert turn_output(1.0, "NO REPLY").malformed


def test_load_project_and_official_formats(tmp_path):
    project = tmp_path / "p.jsonl"
    project.write_text(
        json.dumps({"id": "a", "responses": [{"time": 5, "text": "</Response> 2"}, {"time": 1, "text": "1"}]})
        + "\n"
        + json.dumps({"id": "b", "responses": [{"time": 3, "text": "</Silence>"}]})
        + "\n"
    )
    assert load_predictions(project) == {"a": [Response(1.0, "1"), Response(5.0, "2")], "b": []}
    official = tmp_path / "o.jsonl"
    official.write_text(
        json.dumps(
            {
                "question_id": "v.mp4",
                "model_response_list": [
                    {"time": 0.0, "content": "What is shown?", "role": "user"},
                    {"time": 4.5, "content": "A donkey.", "role": "assistant"},
                    {"time": 5.0, "content": "NO REPLY", "role": "assistant"},
                    {"time": 6.0, "content": "Two donkeys."},
                ],
                "video_duration": 12.0,
            }
        )
        + "\n"
    )
    two = [Response(4.5, "A donkey."), Response(6.0, "Two donkeys.")]
    assert load_predictions(official, silence_signals=("NO REPLY",)) == {"v.mp4": two}
    # undeclared, MMDuet2's silence signal is an output (and the reader warns about it)
    assert load_predictions(official)["v.mp4"] == [two[0], Response(5.0, "NO REPLY"), two[1]]


def test_malformed_outputs_round_trip(tmp_path):
    path = tmp_path / "p.jsonl"
    save_predictions(path, {"a": [Response(1.0, "Warning", True), Response(2.0, "Warning")]})
    assert '"malformed": true' in path.read_text().splitlines()[0]
    assert load_predictions(path) == {"a": [Response(1.0, "Warning", True), Response(2.0, "Warning")]}


@pytest.mark.parametrize(
    "line, field",
    [
        ({"id": "a", "responses": [{"time": "soon", "text": "x"}]}, "responses[0].time"),
        ({"id": "a", "responses": [{"time": float("nan"), "text": "x"}]}, "responses[0].time"),
        ({"id": "a", "responses": [{"text": "x"}]}, "responses[0]"),
        ({"id": "a"}, "responses"),
        ({"responses": []}, "id"),
    ],
)
def test_bad_predictions(tmp_path, line, field):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps(line) + "\n")
    with pytest.raises(EpisodeError) as info:
        load_predictions(path)
    assert info.value.field == field and info.value.file == str(path)


def test_duplicate_prediction_id_keeps_the_first_and_counts_the_rest(tmp_path):
    path = tmp_path / "p.jsonl"
    save_predictions(path, {"a": [(1.0, "x")]})
    first = path.read_text()
    save_predictions(path, {"a": [(2.0, "y")]})
    path.write_text(first + path.read_text() * 2)
    predictions = load_predictions(path)
    assert predictions == {"a": [Response(1.0, "x")]} and predictions.duplicates == ["a", "a"]


def test_writer_appends_and_repairs_a_torn_line(tmp_path):
    path = tmp_path / "run" / "preds.jsonl"
    with PredictionWriter(path) as w:
        w.write("e1", [(1.0, "a")])
        w.write("e2", [])
    # a run killed mid-write leaves half a line
    with path.open("a") as f:
        f.write('{"id": "e3", "respo')
    w = PredictionWriter(path)
    assert w.done_ids == {"e1", "e2"}
    w.write("e3", [Response(2.0, "b")])
    w.close()
    assert load_predictions(path) == {"e1": [Response(1.0, "a")], "e2": [], "e3": [Response(2.0, "b")]}
