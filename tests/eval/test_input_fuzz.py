"""Bounded fuzzing of every file ``proactive-eval`` reads (issue 55): episodes (project, P³I, ProactiveVideoQA),
predictions (project and official), ProactiveBench environment files and MCQA replay answers.

Every malformed file is exit 2 with exactly one stderr line and no traceback, within `CASE_SECONDS`; randomly
mutated files (fixed seed) may be valid, but are never a traceback or a hang. The malformed values are wrong types,
nulls, NaN / Infinity, huge strings and integers, deep nesting, absurd times, duplicate ids, empty and truncated
files. `proactive_eval.cli.main` is called in-process; `test_real_processes` runs the installed command.
"""

from __future__ import annotations

import copy
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from proactive_eval.cli import main

CASE_SECONDS = 20
SEED = 55
NAN, INF = float("nan"), float("inf")
HUGE = "x" * 1_000_000


class Deep:
    """``n`` nested JSON lists, written as text (json.dumps itself would recurse too deep)."""

    def __init__(self, n: int):
        self.n = n


class BigInt:
    """An integer literal of 5000 digits (past Python's int-from-text limit)."""


def encode(value) -> str:
    """JSON text of `value`, with NaN / Infinity literals, `Deep` and `BigInt` written out."""
    if isinstance(value, Deep):
        return "[" * value.n + "]" * value.n
    if isinstance(value, BigInt):
        return "9" * 5000
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {encode(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(encode(v) for v in value) + "]"
    return json.dumps(value)


def file_text(records, jsonl: bool) -> str:
    return "".join(encode(r) + "\n" for r in records) if jsonl else encode(records)


# ---- valid inputs ---------------------------------------------------------------------------------------

EPISODES = [
    {"id": "e0", "task": "accident", "duration": 10.0, "fps": 1.0, "instruction": "warn me", "video": "v.mp4",
     "targets": [{"time": 4.0, "text": "Warning", "window": [3.0, 6.0]}], "user_turns": [{"time": 2.0, "text": "hi"}],
     "meta": {"x": 1}},
    {"id": "e1", "task": "intervention", "duration": 12.0, "instruction": "help", "targets": [{"time": 5.0, "text": "stop"}]},
]  # fmt: skip
P3I = [
    {"question_id": "p0", "task": "accident", "duration": 10.0, "query": "warn", "video": "v.mp4",
     "answers": [{"timestamp": 5.0, "content": "Warning", "span": [4.0, 6.0]}]},
    {"question_id": "p1", "task": "object", "duration": 8.0, "query": "obj", "answers": [{"timestamp": 2.0, "content": "cup"}]},
]  # fmt: skip
ANNO = [
    {"video": "v1.mp4", "question_id": "v1", "duration": 40.0,
     "answer": [{"content": "a brown donkey", "related_timespan": [0.0, 4.0], "reply_timespan": [0.0, 10.0]}],
     "conversation": [{"role": "user", "content": "What appears?", "time": 0}, {"role": "user", "content": "[TV] x", "time": 5}]},
    {"video": "v2.mp4", "question_id": "v2", "duration": 20.0,
     "answer": [{"content": "a red car", "related_timespan": [5.0, 8.0], "reply_timespan": [5.0, 15.0]}],
     "conversation": [{"role": "user", "content": "What drives by?", "time": 0}]},
]  # fmt: skip
PREDICTIONS = [
    {"id": "e0", "responses": [{"time": 4.0, "text": "Warning"}, {"time": 5.0, "text": "</Silence>"}]},
    {"id": "e1", "responses": [{"time": 5.0, "text": "stop", "malformed": True}]},
]
OFFICIAL = [
    {"question_id": "v1", "model_response_list": [{"time": 2.0, "content": "a donkey", "role": "assistant"},
                                                  {"time": 1.0, "content": "q", "role": "user"}]},
    {"question_id": "v2", "model_response_list": []},
]  # fmt: skip
ROD = [
    {"id": i, "image_template": "rod/obj_{image}.png", "first_image": 3, "num_images": 6, "reference_image": 3,
     "prompt": "What is behind the red box?", "categories": ["cat", "dog", "cow", "hen"], "answer": "dog",
     "options": ["Move the red box to the left.", "Move the red box to the right.", "I do not know."]}
    for i in range(3)
]  # fmt: skip
COCO = [
    {"id": i, "image_template": "img.png", "first_image": 0, "num_images": 1, "prompt": "What is it?",
     "options": ["Move the camera to the left.", "I cannot tell."], "categories": ["zebra", "cat", "dog", "cow"],
     "answer": "zebra", "direction": "left", "granularity": 3, "horizontal_step": 10, "vertical_step": 8,
     "crop": {"top": 60, "left": 80, "height": 120, "width": 150}}
    for i in range(3)
]  # fmt: skip
ANSWERS = [{"id": 0, "dataset": "ROD", "answers": ["A", "E"]}]
ROD_FILE, COCO_FILE = "Realistic-Occlusion-Dataset_preprocessed.jsonl", "coco2014_preprocessed.jsonl"

# ---- malformed values, by field of the first record (each one alone makes the file invalid) -------------

PATHS = [3, [], {"x": 1}, HUGE, "a\x00b", "", "d/" + "y" * 300 + ".mp4"]
BAD_EPISODE = {
    ("id",): [None, [1], {}, "", True, 1.5],
    ("task",): [None, 3, [1], "cooking", HUGE],
    ("duration",): [None, "10", -1.0, 0, NAN, INF, -INF, 1e308, 86401.0, BigInt(), True],
    ("fps",): [None, 0, -1.0, NAN, 1e9, "1"],
    ("instruction",): [None, 3, []],
    ("video",): [*PATHS, {"frames_dir": 3}, {"frames_dir": "d", "fps": 1e9}, {"frames_dir": HUGE}],
    ("targets",): [
        None,
        "x",
        {},
        [1],
        [{"text": "x"}],
        [{"time": 5.0, "text": {}}],
        [{"time": 5.0, "text": "x"}, {"time": 1.0, "text": "y"}],
    ],  # fmt: skip
    ("targets", 0, "time"): ["4", None, True, NAN, INF, -1.0, 1e308, 10.5, BigInt()],
    ("targets", 0, "window"): [[5.0, 1.0], [0.0, 1e308], [0.0, NAN], "x", [1.0]],
    ("user_turns",): ["x", [{"time": 99.0, "text": "x"}], [{"time": 1.0, "text": 3}], [{"time": NAN, "text": "x"}]],
    ("meta",): [3, "x", Deep(100), {"x": NAN}],
}
BAD_P3I = {
    ("question_id",): [None, [1], ""],
    ("query",): [None, 3],
    ("answers",): ["x", [1], None],
    ("answers", 0, "timestamp"): [NAN, "x", -1.0, 1e308, None],
    ("video",): PATHS,
}
BAD_ANNO = {
    ("question_id",): [None, [1], "", True, {}],
    ("conversation",): [None, [], [1], "x", [{"content": 3}]],
    ("conversation", 1, "content"): [3, [1]],
    ("conversation", 1, "time"): ["x", NAN, 1e308, -1.0],
    ("answer",): [None, "x", [1], [{"content": 3, "reply_timespan": [0, 1]}], [{"content": "x"}]],
    ("answer", 0, "reply_timespan"): [
        [5.0, 1.0],
        [-1.0, 2.0],
        [0.0, NAN],
        [0.0, 1e308],
        "x",
        None,
        [1.0],
        [50.0, 60.0],
    ],
    ("answer", 0, "related_timespan"): [[3.0, 1.0], "x", [0.0, INF]],
    ("duration",): [-1.0, NAN, 1e308, "x", 0, 86401.0],
    ("video",): PATHS,
}
BAD_PREDICTIONS = {
    ("id",): [None, [1], {}, "", True, 1.5],
    ("responses",): [None, "x", {}, [1], [{"text": "x"}]],
    ("responses", 0, "time"): ["soon", NAN, INF, None, True, BigInt(), [1]],
    ("responses", 0, "text"): [3, [1], {"a": 1}],
}
BAD_OFFICIAL = {
    ("question_id",): [[1], "", True],
    ("model_response_list",): ["x", [1], None],
    ("model_response_list", 0, "time"): ["x", NAN],
    ("model_response_list", 0, "content"): [3],
}
BAD_ROD = {
    ("id",): [None, [1], "", True, {}],
    ("image_template",): [None, *PATHS, "{image:>99999999}", "%099999999d", "{bad", "noindex.png"],
    ("first_image",): [-1, "1", NAN, 6, BigInt(), None, 1.5, 10**40],
    ("num_images",): [0, -1, "6", 10**40, NAN, None],
    ("prompt",): [None, 3, ""],
    ("options",): [None, [], [1], "x"],
    ("categories",): [None, [], [3], "x"],
    ("answer",): ["zzz", 99, None, [1], True],
    ("reference_image",): [-1, [1], {}, "a\x00b", 1.5, HUGE],
    ("extra",): [NAN, Deep(100)],
}
BAD_COCO = {
    ("crop",): [
        "x",
        {"top": -1, "left": 0, "height": 10, "width": 10},
        {"top": 1e9, "left": 0, "height": 1, "width": 1},
        {"top": 1},
    ],  # fmt: skip
    ("granularity",): [0, 10**6, "3"],
    ("direction",): [3, "sideways", "x" * 100],
    ("horizontal_step",): [NAN, -1, 1e9],
}
BAD_ANSWERS = {("id",): [None, [1]], ("dataset",): [3, "XYZ", None], ("answers",): ["A", [1], None]}
BAD_RECORDS = [None, 5, "x", [1], Deep(100_000), Deep(70)]
EMPTY_FILES = ["", "\n  \n", "[]", '{"episodes": []}']


def with_value(records: list, path: tuple, value) -> list:
    out = copy.deepcopy(records)
    holder = out[0]
    for key in path[:-1]:
        holder = holder[key]
    holder[path[-1]] = value
    return out


def malformed(records: list, table: dict, jsonl: bool, rng: random.Random) -> list[tuple[str, str]]:
    """``(label, file text)`` of every malformed file of `records`: each table value, bad records, empty files,
    truncated text (cut strictly inside), a duplicated first record."""
    cases = [(f"{'.'.join(map(str, p))}={encode(v)[:40]}", file_text(with_value(records, p, v), jsonl))
             for p, values in table.items() for v in values]  # fmt: skip
    cases += [(f"record={encode(r)[:20]}", file_text([r, *records[1:]], jsonl)) for r in BAD_RECORDS]
    cases += [(f"file={text!r}", text) for text in EMPTY_FILES]
    whole = file_text(records, False)  # a JSON list: every proper prefix is invalid
    cases += [(f"truncated at {n}", whole[:n]) for n in sorted(rng.sample(range(1, len(whole) - 1), 4))]
    cases += [("NaN literal", whole.replace("[", "[NaN, ", 1))]
    return cases


# ---- running -----------------------------------------------------------------------------------------


def _alarm(signum, frame):
    raise TimeoutError(f"a case ran past {CASE_SECONDS} s")


def call(argv: list[str], capsys) -> tuple[int, str, float]:
    """``(exit status, stderr, seconds)`` of ``proactive-eval ARGV`` in-process, stopped after `CASE_SECONDS`."""
    capsys.readouterr()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, CASE_SECONDS)
    start = time.monotonic()
    try:
        code = main(argv)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return code, capsys.readouterr().err, time.monotonic() - start


def problem(code: int, err: str, seconds: float, must_fail: bool) -> str | None:
    """What is wrong with one run (`None`: nothing): a malformed file is exit 2 with one stderr line."""
    lines = [line for line in err.splitlines() if line.strip()]
    if seconds > CASE_SECONDS:
        return f"took {seconds:.1f} s"
    if "Traceback" in err:
        return "printed a traceback"
    if code == 2 and (len(lines) != 1 or not lines[0].startswith("proactive-eval: error: ")):
        return f"exit 2 with {len(lines)} stderr lines: {err[:300]!r}"
    if must_fail and code != 2:
        return f"exit {code} (expected 2): {err[-200:]!r}"
    if code not in (0, 2):
        return f"exit {code}: {err[-200:]!r}"
    return None


def check_all(cases, commands, tmp_path: Path, capsys, name: str, must_fail: bool = True, setup=None) -> int:
    """Write each case's text to `name` in its own folder and run every command on it; fail listing problems."""
    failures, runs = [], 0
    for k, (label, text) in enumerate(cases):
        folder = tmp_path / f"c{k}"
        folder.mkdir(parents=True)
        if setup is not None:
            setup(folder)
        (folder / name).write_text(text, encoding="utf-8")
        for command in commands:
            argv = command(folder, folder / name)
            code, err, seconds = call(argv, capsys)
            runs += 1
            found = problem(code, err, seconds, must_fail)
            if found:
                failures.append(f"{label} | {argv[0]}: {found}")
    assert not failures, f"{len(failures)} of {runs} runs:\n" + "\n".join(failures[:20])
    return runs


def write_episodes(folder: Path) -> None:
    (folder / "episodes.json").write_text(json.dumps(EPISODES))
    (folder / "anno.json").write_text(json.dumps(ANNO))
    (folder / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in PREDICTIONS))
    (folder / "official.jsonl").write_text("".join(json.dumps(p) + "\n" for p in OFFICIAL))


def write_images(folder: Path) -> None:
    (folder / "rod").mkdir()
    for i in range(6):
        Image.fromarray(np.full((2, 3, 3), 10 * i, np.uint8)).save(folder / f"rod/obj_{i}.png")
    Image.fromarray(np.zeros((160, 200, 3), np.uint8)).save(folder / "img.png")
    (folder / ROD_FILE).write_text("".join(json.dumps(r) + "\n" for r in ROD))


QUIET = ["--no-plots", "--no-progress"]


def episode_commands(fmt: str, predictions: str = "p.jsonl"):
    return [
        lambda d, f: ["score", "--episodes", str(f), "--format", fmt, "--predictions", str(d / predictions), *QUIET],
        lambda d, f: ["baseline", "--episodes", str(f), "--format", fmt],
        lambda d, f: [
            "run",
            "--episodes",
            str(f),
            "--format",
            fmt,
            "--policy",
            "silent",
            "--out",
            str(d / "r"),
            *QUIET,
        ],
    ]


def test_malformed_episodes(tmp_path, capsys):
    rng = random.Random(SEED)
    cases = malformed(EPISODES, BAD_EPISODE, False, rng)
    cases.append(("duplicate id", json.dumps([EPISODES[0], EPISODES[1], EPISODES[0]])))
    commands = episode_commands("episodes")
    runs = check_all(cases, commands, tmp_path / "json", capsys, "e.json", setup=write_episodes)
    cases = malformed(EPISODES, BAD_EPISODE, True, rng)[::4]  # JSONL: a sample, every line parsed on its own
    runs += check_all(cases, commands[:2], tmp_path / "jsonl", capsys, "e.jsonl", setup=write_episodes)
    assert runs > 250


def test_malformed_pvqa_and_p3i(tmp_path, capsys):
    rng = random.Random(SEED)
    cases = malformed(ANNO, BAD_ANNO, False, rng)
    cases.append(("duplicate question_id", json.dumps([ANNO[0], ANNO[0]])))
    commands = episode_commands("pvqa", "official.jsonl")[:2]
    commands.append(lambda d, f: ["convert", "--from", "pvqa", str(f), "--out", str(d / "conv.json")])
    runs = check_all(cases, commands, tmp_path / "pvqa", capsys, "anno.json", setup=write_episodes)
    commands = [
        lambda d, f: ["baseline", "--episodes", str(f), "--format", "p3i"],
        lambda d, f: ["convert", "--from", "p3i", str(f), "--out", str(d / "conv.json")],
    ]
    runs += check_all(malformed(P3I, BAD_P3I, True, rng), commands, tmp_path / "p3i", capsys, "p3i.jsonl")
    assert runs > 150


def test_malformed_predictions(tmp_path, capsys):
    rng = random.Random(SEED)
    commands = [
        lambda d, f: ["score", "--episodes", str(d / "episodes.json"), "--predictions", str(f), *QUIET],
        lambda d, f: ["run", "--episodes", str(d / "episodes.json"), "--policy", f"replay:{f}", "--out", str(d / "r")],
    ]
    cases = malformed(PREDICTIONS, BAD_PREDICTIONS, True, rng) + malformed(PREDICTIONS, BAD_PREDICTIONS, False, rng)
    runs = check_all(cases, commands, tmp_path / "project", capsys, "preds.jsonl", setup=write_episodes)
    commands = [lambda d, f: ["score", "--episodes", str(d / "anno.json"), "--predictions", str(f), *QUIET]]
    cases = malformed(OFFICIAL, BAD_OFFICIAL, True, rng)
    runs += check_all(cases, commands, tmp_path / "official", capsys, "preds.jsonl", setup=write_episodes)
    assert runs > 150


def test_malformed_environments_and_answers(tmp_path, capsys):
    rng = random.Random(SEED)
    unfiltered = ["--protocol", "unfiltered"]

    def commands(dataset: str):
        return [
            lambda d, f: ["mcqa", "--data-dir", str(d), "--datasets", dataset, "--policy", "oracle", *unfiltered],
            lambda d, f: ["baseline", "--episodes", str(f), "--dataset", dataset, *unfiltered],
            lambda d, f: ["convert", "--from", "proactivebench", str(f), "--out", str(d / "conv.jsonl")],
        ]

    cases = malformed(ROD, BAD_ROD, True, rng) + [("duplicate id", file_text([ROD[0], ROD[0]], True))]
    runs = check_all(cases, commands("ROD"), tmp_path / "rod", capsys, ROD_FILE, setup=write_images)
    cases = malformed(COCO, BAD_COCO, True, rng)
    runs += check_all(cases, commands("COCO")[:2], tmp_path / "coco", capsys, COCO_FILE, setup=write_images)
    replay = [lambda d, f: ["mcqa", "--data-dir", str(d), "--datasets", "ROD", "--policy", f"replay:{f}", *unfiltered]]
    cases = malformed(ANSWERS, BAD_ANSWERS, True, rng)
    runs += check_all(cases, replay, tmp_path / "answers", capsys, "answers.jsonl", setup=write_images)
    assert runs > 200


# ---- random mutations: valid or not, never a traceback or a hang ----------------------------------------

VALUES = [None, [], {}, "", HUGE, [1], {"a": 1}, -1, -1e308, 1e308, 0, 10**40, True, "9999999:00:00", NAN, INF,
          Deep(100_000), Deep(70), "a\x00b", 3.5, [[[]]], -0.0, 86401.0, 86400.0, -5.0, BigInt(), "{image:>99999}",
          {"frames_dir": "d", "fps": 1e9}, [0.0, 1e308], [-1.0, 5.0], [5.0, 1.0], "pvqa", "ZZZ", "accident",
          [{"time": 1.0, "text": "x"}] * 3, {"time": 1e308, "text": "x"}, "y" * 300, {"x": NAN}]  # fmt: skip


def _locations(value, prefix=()):
    yield prefix
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from _locations(item, (*prefix, key))


def mutated(records: list, rng: random.Random) -> list:
    """`records` with 1 to 3 random edits: a value replaced, a key or item deleted, a record repeated."""
    data = copy.deepcopy(records)
    for _ in range(rng.choice((1, 1, 2, 3))):
        where = rng.choice([p for p in _locations(data) if p])
        holder = data
        for key in where[:-1]:
            holder = holder[key]
        roll = rng.random()
        if roll < 0.75:
            holder[where[-1]] = rng.choice(VALUES)
        elif roll < 0.9:
            del holder[where[-1]]
        elif isinstance(data, list) and data:
            data.append(copy.deepcopy(rng.choice(data)))
        if not isinstance(data, list) or not data:
            break
    return data


def test_random_mutations_never_crash_or_hang(tmp_path, capsys):
    rng = random.Random(SEED)
    kinds = [
        (EPISODES, "e.json", episode_commands("episodes")[:2], write_episodes),
        (ANNO, "anno.json", episode_commands("pvqa", "official.jsonl")[:2], write_episodes),
        (PREDICTIONS, "preds.jsonl", [lambda d, f: ["score", "--episodes", str(d / "episodes.json"),
                                                    "--predictions", str(f), *QUIET]], write_episodes),
        (ROD, ROD_FILE, [lambda d, f: ["baseline", "--episodes", str(f), "--dataset", "ROD", "--protocol",
                                       "unfiltered"]], write_images),
    ]  # fmt: skip
    runs = 0
    for k, (records, name, commands, setup) in enumerate(kinds):
        cases = [(f"mutation {i}", file_text(mutated(records, rng), name.endswith(".jsonl"))) for i in range(60)]
        runs += check_all(cases, commands, tmp_path / f"k{k}", capsys, name, must_fail=False, setup=setup)
    assert runs >= 300


# ---- the installed command -----------------------------------------------------------------------------


def test_real_processes(tmp_path):
    """``python -m proactive_eval.cli`` on five malformed files: exit 2, one line, no traceback, within 20 s."""
    write_episodes(tmp_path)
    (tmp_path / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (tmp_path / "nan.jsonl").write_text('{"id": "e0", "responses": [{"time": NaN, "text": "x"}]}\n')
    (tmp_path / "empty.json").write_text("[]")
    (tmp_path / "cut.json").write_text(json.dumps(EPISODES)[:-30])
    (tmp_path / "bad.json").write_text(json.dumps([with_value(EPISODES, ("duration",), -1.0)[0]]))
    runs = [
        (["baseline", "--episodes", "deep.json"], "deep.json: JSON nested deeper than 64 levels"),
        (["score", "--episodes", "episodes.json", "--predictions", "nan.jsonl"], "field 'responses[0].time'"),
        (["baseline", "--episodes", "empty.json"], "empty.json: no episodes"),  # issue 57: was exit 0, silent
        (["score", "--episodes", "cut.json", "--predictions", "p.jsonl"], "(the text ends early: a truncated file?)"),
        (["baseline", "--episodes", "bad.json", "--on-error", "skip"], "all 1 records were skipped as bad"),
    ]
    for argv, expected in runs:
        done = subprocess.run(
            [sys.executable, "-m", "proactive_eval.cli", *argv],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=CASE_SECONDS,
        )
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert expected in lines[0], (argv, lines[0])


@pytest.mark.parametrize("value", [None, "", "d/" + "y" * 300 + ".mp4"])
def test_video_null_or_unusable_never_crashes(tmp_path, capsys, value):
    """A ProactiveVideoQA ``"video": null`` is an episode without a video (scored from the annotations); an empty
    or unusable path is an error naming the field."""
    anno = with_value(ANNO, ("video",), value)
    (tmp_path / "anno.json").write_text(json.dumps(anno))
    code, err, _ = call(["baseline", "--episodes", str(tmp_path / "anno.json")], capsys)
    assert "Traceback" not in err
    assert code == 0 if value is None else code == 2 and "field 'video'" in err
