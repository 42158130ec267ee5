"""Bounded fuzzing of ``proactive-eval score --benchmark ovo_bench|streamingbench_po`` (issue 55).

A fixed seed mutates valid annotation and results files (wrong types, nulls, NaN / inf, huge strings and numbers,
deep nesting, deleted and added fields, duplicated and unknown ids, absurd time stamps, truncated or non-UTF-8
text, the other benchmark's file) and scores each pair in-process: every case ends with exit 0 and a sane
``results.json``, or exit 2 with one line on stderr; none raises, none takes 20 s. A few cases also run as real
subprocesses.
"""

from __future__ import annotations

import copy
import json
import random
import subprocess
import sys
import time

import pytest

from proactive_eval.cli import main
from tests.eval.test_ovo_bench import make_annotations
from tests.eval.test_ovo_bench import make_results as make_ovo_results
from tests.eval.test_streamingbench import make_questions
from tests.eval.test_streamingbench import make_results as make_po_results

CASES = 160  # per benchmark and side (annotations, results): 640 in all
HUGE = "x" * 1_000_000
DEEP, RATHER_DEEP = "__deep__", "__rather_deep__"  # written as raw nested lists (json.dumps would recurse)
VALUES = [None, float("nan"), float("inf"), float("-inf"), -1, 0, 2.5, 10**30, True, False, "", "x", "A", "Yes",
          "9999999:00:00", "00:00:29", "-0:00:05", "24:00:01", "1:2:3:4", [], [1], [[1]], {}, {"a": 1}, -10**6,
          "\u00e9\u4e2d", DEEP, RATHER_DEEP]  # fmt: skip


def bases(benchmark: str, rng: random.Random):
    if benchmark == "ovo_bench":
        records = make_annotations(rng)
        return records, make_ovo_results(rng, records)
    entries = make_questions(rng, n_videos=rng.randint(1, 3))
    return entries, make_po_results(rng, entries, "M")


def slots(tree) -> list[tuple]:
    """Every (container, key) of `tree`, in a fixed order."""
    out, stack = [], [tree]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else ()
        for key in keys:
            out.append((node, key))
            stack.append(node[key])
    return out


def mutate(rng: random.Random, tree, other) -> bytes:
    """One random mutation of `tree` (a parsed file), as the bytes of a file."""
    tree = copy.deepcopy(tree)
    kind = rng.choice(["value", "value", "value", "delete", "duplicate", "add", "id", "huge", "truncate", "raw",
                       "other", "root"])  # fmt: skip
    places = slots(tree)
    container, key = rng.choice(places) if places else (None, None)
    if kind == "value" and container is not None:
        container[key] = rng.choice(VALUES)
    elif kind == "delete" and container is not None:
        del container[key]
    elif kind == "duplicate":
        lists = [c for c, _ in places if isinstance(c, list) and c]
        if lists:
            target = rng.choice(lists)
            target.append(copy.deepcopy(rng.choice(target)))
    elif kind == "add":
        dicts = [c for c, _ in places if isinstance(c, dict)] or [{}]
        rng.choice(dicts)[rng.choice(["id", "task", "response", "zz", "ground_truth", "questions"])] = rng.choice(
            VALUES
        )
    elif kind == "id":
        holders = [c for c, k in places if k in ("id", "time_stamp", "ground_truth_time_stamp", "video", "realtime")]
        if holders:
            holder = rng.choice(holders)
            field = next(
                k for k in ("id", "time_stamp", "ground_truth_time_stamp", "video", "realtime") if k in holder
            )
            holder[field] = rng.choice([10**6, "new", [1], None, 1.0, "x" * 10_000, "a\0b", "99:99:99", 1e12, -5])
    elif kind == "huge" and container is not None:
        container[key] = rng.choice([HUGE, 10**4000 // 10**3990, "/" + HUGE])
    elif kind == "other":
        return json.dumps(other).encode()
    elif kind == "root":
        tree = rng.choice([None, 1, "x", [], {}, [None], [[]], {"backward": 0.5}, {"realtime": None}])
    text = json.dumps(tree)
    text = text.replace(json.dumps(DEEP), "[" * 5000 + "]" * 5000).replace(
        json.dumps(RATHER_DEEP), "[" * 80 + "]" * 80
    )
    data = text.encode()
    if kind == "truncate":
        data = data[: rng.randrange(len(data))]
    elif kind == "raw":
        data = rng.choice(
            [b"", b"\xff\xfe\x00", b"[" * 10_000, b"NaN", b'["\\ud800"]', b'{"a": 1, "a": 2}', data + b"x"]
        )
    return data


def check_report(benchmark: str, annotations, report: dict) -> None:
    cov = report["coverage"]
    assert 0 <= cov["answered"] <= cov["expected"] and cov["missing"] == cov["expected"] - cov["answered"]
    assert all(isinstance(v, int) and v >= 0 for v in report["ignored"].values())
    if benchmark == "ovo_bench":
        assert set(report["tasks"]) <= {r["task"] for r in annotations}
        assert all(0 <= v <= 100 for v in report["tasks"].values())
    else:
        assert set(report["tasks"]) <= {q["task_type"] for e in annotations for q in e["questions"]}
        assert all(0 <= v[m] <= 1 for v in report["tasks"].values() for m in ("time_accuracy", "answer_accuracy"))


def run_case(tmp_path, capsys, benchmark, annotations: bytes, results: bytes) -> tuple[int, str]:
    (tmp_path / "a.json").write_bytes(annotations)
    (tmp_path / "p.json").write_bytes(results)
    (tmp_path / "r" / "results.json").unlink(missing_ok=True)
    argv = ["score", "--benchmark", benchmark, "--annotations", str(tmp_path / "a.json"), "--predictions"]
    start = time.perf_counter()
    rc = main([*argv, str(tmp_path / "p.json"), "--out", str(tmp_path / "r")])
    assert time.perf_counter() - start < 20
    err = capsys.readouterr().err
    if rc == 2:
        assert err.count("\n") == 1 and err.startswith("proactive-eval: error: ") and "Traceback" not in err, err
    else:
        assert rc == 0 and err == "", err
    return rc, err


@pytest.mark.parametrize("benchmark", ["ovo_bench", "streamingbench_po"])
def test_fuzzed_files_exit_0_or_2_with_one_line(tmp_path, capsys, benchmark):
    rng = random.Random(55)
    other = "streamingbench_po" if benchmark == "ovo_bench" else "ovo_bench"
    outcomes = {"annotations": [], "results": []}
    for case in range(2 * CASES):
        annotations, results = bases(benchmark, rng)
        foreign = bases(other, rng)[case % 2]
        side = "annotations" if case % 2 == 0 else "results"
        if side == "annotations":
            files = mutate(rng, annotations, foreign), json.dumps(results).encode()
        else:
            files = json.dumps(annotations).encode(), mutate(rng, results, foreign)
        rc, _ = run_case(tmp_path, capsys, benchmark, *files)
        outcomes[side].append(rc)
        if rc == 0:
            check_report(benchmark, json.loads(files[0]), json.loads((tmp_path / "r" / "results.json").read_text()))
    for side, rcs in outcomes.items():  # both outcomes are reached from both sides: the fuzzing is not vacuous
        assert rcs.count(2) > CASES // 5 and rcs.count(0) > CASES // 10, (side, rcs.count(0), rcs.count(2))


# ---- the crashes of issue 55, each as a real command -------------------------------------------------


def issue_cases(rng: random.Random) -> list[tuple[str, object, object]]:
    records = make_annotations(rng)
    results = make_ovo_results(rng, records)
    entries = make_questions(rng, n_videos=2)
    po_results = make_po_results(rng, entries, "M")
    cases = []
    for change in (
        lambda a, r: r.__setitem__("realtime", 0.5),
        lambda a, r: a[0].__setitem__("video", None),
        lambda a, r: r["backward"][0].__setitem__("id", [1]),
        lambda a, r: a[0].__setitem__("video", "v" * 1_000_000),
        lambda a, r: a[0].__setitem__("realtime", float("nan")),
    ):
        a, r = copy.deepcopy(records), copy.deepcopy(results)
        change(a, r)
        cases.append(("ovo_bench", a, r))
    for change in (
        lambda a, r: a[0]["questions"][0].__setitem__("ground_truth_time_stamp", "9999999:00:00"),
        lambda a, r: a[0]["questions"][0].__setitem__("time_stamp", float("nan")),
        lambda a, r: r.__setitem__(0, {"questions": 1}),
    ):
        a, r = copy.deepcopy(entries), copy.deepcopy(po_results)
        change(a, r)
        cases.append(("streamingbench_po", a, r))
    return cases


def test_issue_crashes_exit_2_with_one_line_as_real_commands(tmp_path):
    cases = issue_cases(random.Random(3))
    cases.append(("ovo_bench", "[" * 100_000 + "]" * 100_000, {"backward": []}))  # deep nesting
    cases.append(("streamingbench_po", '[{"questions": [', []))  # truncated
    for k, (benchmark, anno, results) in enumerate(cases):
        paths = []
        for name, data in (("a", anno), ("p", results)):
            paths.append(tmp_path / f"{name}{k}.json")
            paths[-1].write_text(data if isinstance(data, str) else json.dumps(data))
        start = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "proactive_eval.cli", "score", "--benchmark", benchmark, "--annotations",
             str(paths[0]), "--predictions", str(paths[1])],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert time.perf_counter() - start < 20
        assert proc.returncode == 2, (k, proc.stderr[-2000:])
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("proactive-eval: error: "), (k, proc.stderr)
        assert len(proc.stderr) < 2000  # a 1 MB value is cut in the message
