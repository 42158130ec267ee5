"""Bounded fuzzing of ``proactive-eval score --benchmark p3i|pvqa|proactivebench``: a fixed seed mutates valid
annotation and results files (`tests.eval.test_stream_bench_fuzz.mutate`: wrong types, nulls, NaN / inf, huge
strings and numbers, deep nesting, deleted and added fields, duplicated ids, truncated or non-UTF-8 text, another
benchmark's file) and scores each pair in-process: every case ends with exit 0 and a ``results.json`` whose numbers
are in range, or exit 2 with one line on stderr; none raises, none takes 20 s."""

from __future__ import annotations

import json
import random
import time

import pytest

from proactive_eval.cli import main
from tests.eval.test_environments import rod_record
from tests.eval.test_formats import ANNO
from tests.eval.test_mcqa_cli import data_dir
from tests.eval.test_stream_bench_fuzz import mutate

CASES = 40  # per benchmark and side (annotations, results)
ROD = "Realistic-Occlusion-Dataset_preprocessed.jsonl"
NAMES = {"p3i": "p3i.json", "pvqa": "anno.json", "proactivebench": ROD}


def bases(benchmark: str, rng: random.Random):
    """A valid (annotations, results) pair of `benchmark`, drawn from `rng`."""
    if benchmark == "p3i":
        episodes = [
            {"id": f"e{k}", "task": rng.choice(["accident", "intervention"]), "duration": 10.0,
             "instruction": "warn me", "video": "v.mp4",
             "targets": [{"time": float(rng.randint(0, 9)), "text": "Warning"} for _ in range(rng.randint(1, 2))]}
            for k in range(rng.randint(1, 3))
        ]  # fmt: skip
        preds = [
            {"id": e["id"], "responses": [{"time": float(rng.randint(0, 9)), "text": "Warning"}]} for e in episodes
        ]
        return episodes, preds
    if benchmark == "pvqa":
        preds = [{"id": r["question_id"], "responses": [{"time": 1.0, "text": "A donkey."}]} for r in ANNO]
        return json.loads(json.dumps(ANNO)), preds
    records = [rod_record(id=i) for i in range(rng.randint(1, 4))]
    answers = [{"id": r["id"], "dataset": "ROD", "answers": [rng.choice("ABCDE") for _ in range(2)]} for r in records]
    return records, answers


def jsonl(data: bytes) -> bytes:
    """A JSON list's items one per line (the authors' ``.jsonl``); any other bytes as they are."""
    try:
        tree = json.loads(data)
    except (ValueError, RecursionError):
        return data
    return b"".join(json.dumps(item).encode() + b"\n" for item in tree) if isinstance(tree, list) else data


def check_report(benchmark: str, report: dict) -> None:
    gain = report["gain_over_blind"]
    assert all(g["low"] <= g["diff"] + 1e-9 and g["diff"] <= g["high"] + 1e-9 for g in gain.values()), gain
    if benchmark == "p3i":
        assert all(0 <= report["prs"]["overall"][k] <= 100 for k in ("prs_u", "prs_b"))
        assert 0 <= report["coverage"]["with_predictions"] <= report["coverage"]["episodes"]
    elif benchmark == "pvqa":
        assert all(0 <= report["pauc"]["overall"][f"omega={o}"] <= 100 for o in (0, 0.5, 1))
    else:
        assert 0 <= report["avg"]["acc"] <= 100 and report["avg"]["ps"] >= 0


@pytest.mark.parametrize("benchmark", ["p3i", "pvqa", "proactivebench"])
def test_fuzzed_files_exit_0_or_2_with_one_line(tmp_path, capsys, benchmark):
    rng = random.Random(56)
    folder = data_dir(tmp_path) if benchmark == "proactivebench" else tmp_path
    annotations_path, results_path = folder / NAMES[benchmark], tmp_path / "results.json"
    others = [b for b in NAMES if b != benchmark]
    outcomes = {"annotations": [], "results": []}
    for case in range(2 * CASES):
        annotations, results = bases(benchmark, rng)
        foreign = bases(others[case % 2], rng)[case // 2 % 2]
        side = "annotations" if case % 2 == 0 else "results"
        if side == "annotations":
            files = mutate(rng, annotations, foreign), json.dumps(results).encode()
        else:
            files = json.dumps(annotations).encode(), mutate(rng, results, foreign)
        annotations_path.write_bytes(jsonl(files[0]) if benchmark == "proactivebench" else files[0])
        results_path.write_bytes(files[1])
        (tmp_path / "r" / "results.json").unlink(missing_ok=True)
        argv = ["score", "--benchmark", benchmark, "--annotations", str(annotations_path), "--predictions"]
        start = time.perf_counter()
        rc = main([*argv, str(results_path), "--out", str(tmp_path / "r")])
        assert time.perf_counter() - start < 20
        captured = capsys.readouterr()
        if rc == 2:
            assert captured.err.count("\n") == 1 and captured.err.startswith("proactive-eval: error: "), captured.err
        else:
            assert rc == 0, captured.err
            check_report(benchmark, json.loads((tmp_path / "r" / "results.json").read_text()))
        outcomes[side].append(rc)
    for side, rcs in outcomes.items():  # both outcomes are reached from both sides: the fuzzing is not vacuous
        assert rcs.count(2) > CASES // 5 and rcs.count(0) > CASES // 10, (side, rcs.count(0), rcs.count(2))
