"""OVO-Bench and StreamingBench PO scores come from the annotations alone: a results file changes a score only
through its responses (issue 55). Unknown ids, duplicates, rewritten gold and fake tasks are ignored and counted;
the blind floor is fast and equal to trying every delay; wrong-benchmark files are named; ``score`` says where it
wrote (issue 57)."""

from __future__ import annotations

import copy
import json
import random
import re
import subprocess
import sys
import time

import pytest

from proactive_eval.benchmarks.streamingbench_po.format import hms_seconds, load_streamingbench_po
from proactive_eval.benchmarks.streamingbench_po.metric import score_streamingbench_po
from proactive_eval.benchmarks.streamingbench_po.score import po_blind_floor, po_blind_results
from proactive_eval.cli import main
from proactive_eval.records import EpisodeError
from tests.eval.test_ovo_bench import make_annotations
from tests.eval.test_ovo_bench import make_results as make_ovo_results
from tests.eval.test_streamingbench import make_questions, one, stamp
from tests.eval.test_streamingbench import make_results as make_po_results

SCORES = ("tasks", "categories", "overall", "counts", "malformed", "coverage")


def score(tmp_path, benchmark, annotations, results, *extra) -> tuple[int, dict]:
    (tmp_path / "a.json").write_text(json.dumps(annotations))
    (tmp_path / "p.json").write_text(json.dumps(results))
    argv = ["score", "--benchmark", benchmark, "--annotations", str(tmp_path / "a.json"), "--predictions"]
    rc = main([*argv, str(tmp_path / "p.json"), "--out", str(tmp_path / "r"), *extra])
    return rc, json.loads((tmp_path / "r" / "results.json").read_text()) if rc == 0 else {}


# ---- OVO-Bench ---------------------------------------------------------------------------------------


@pytest.fixture
def ovo():
    rng = random.Random(7)
    records = make_annotations(rng)
    return records, make_ovo_results(rng, records)


def _ovo_attacks(records: list[dict], honest: dict) -> dict[str, tuple[dict, dict]]:
    """name -> (results file, the ignored counts it must report)."""
    attacks = {}
    forged = copy.deepcopy(honest)
    for k in range(100):  # unknown ids whose ground truth equals their response
        forged["realtime"].append({"id": 10_000 + k, "task": "OCR", "response": "A", "ground_truth": "A"})
    attacks["unknown ids"] = forged, {"unknown_ids": 100}
    forged = copy.deepcopy(honest)
    for item in forged["backward"] + forged["realtime"]:  # the gold rewritten to the response, or emptied
        item["ground_truth"] = item["response"] if isinstance(item["response"], str) and item["response"] else ""
    attacks["rewritten gold"] = forged, {"gold_differs": sum(1 for i in forged["backward"] + forged["realtime"]
                                                                if i["ground_truth"] != honest_gold(records, i))}  # fmt: skip
    forged = copy.deepcopy(honest)
    right = next(i for i in forged["realtime"] if i["response"] == i["ground_truth"])
    forged["realtime"] += [copy.deepcopy(right) for _ in range(50)]  # a right answer counted 50 more times
    attacks["duplicates"] = forged, {"duplicates": 50}
    forged = copy.deepcopy(honest)
    forged["forward"].append({"id": 20_000, "task": "ZZZ", "test_info": [{"type": 1, "response": "Yes"}]})
    forged["backward"][0]["task"] = "ZZZ"  # a known id under a fake task
    forged["extra"] = [{"id": 0, "task": "ZZZ", "response": "A", "ground_truth": "A"}]  # not a category
    attacks["fake tasks"] = forged, {"unknown_ids": 1, "gold_differs": 1}
    forged = copy.deepcopy(honest)
    for item in forged["forward"]:  # each probe's gold rewritten to its response, and a probe added
        for p in item["test_info"]:
            p["count" if item["task"] == "REC" else "type"] = p["response"]
        item["test_info"].append({"count": 1, "type": 1, "response": "1"})
    attacks["forward gold"] = forged, {"gold_differs": len(forged["forward"]), "extra_probes": len(forged["forward"])}
    forged = copy.deepcopy(honest)  # a backward result moved to the realtime list: its annotation's category counts
    forged["realtime"].insert(0, forged["backward"].pop())
    attacks["moved"] = forged, {"gold_differs": 1}
    return attacks


def honest_gold(records: list[dict], item: dict) -> str:
    return chr(65 + next(r["gt"] for r in records if r["id"] == item["id"]))


def test_ovo_results_file_changes_the_score_only_through_its_responses(tmp_path, ovo):
    records, honest = ovo
    assert score(tmp_path, "ovo_bench", records, honest)[0] == 0
    expected = json.loads((tmp_path / "r" / "results.json").read_text())
    assert expected["ignored"] == {"unknown_ids": 0, "duplicates": 0, "gold_differs": 0, "extra_probes": 0}
    for name, (forged, ignored) in _ovo_attacks(records, honest).items():
        rc, report = score(tmp_path, "ovo_bench", records, forged)
        assert rc == 0, name
        assert {k: report[k] for k in SCORES} == {k: expected[k] for k in SCORES}, name
        assert report["ignored"] == {**expected["ignored"], **ignored}, name
        assert "ZZZ" not in report["tasks"]


def test_ovo_the_issue_attack_no_longer_lifts_the_score(tmp_path):
    """Six OCR questions, five answered right (83.33): 100 unknown-id records with a matching ground truth made
    it 91.50 before."""
    records = [{"id": k, "task": "OCR", "video": "v.mp4", "realtime": 5, "question": "q", "options": ["a", "b"],
                "gt": 0} for k in range(6)]  # fmt: skip
    honest = {"realtime": [{"id": k, "task": "OCR", "response": "A" if k else "B", "ground_truth": "A"}
                           for k in range(6)]}  # fmt: skip
    forged = copy.deepcopy(honest)
    forged["realtime"] += [{"id": 100 + k, "task": "OCR", "response": "B", "ground_truth": "B"} for k in range(100)]
    assert score(tmp_path, "ovo_bench", records, honest)[1]["categories"]["realtime"] == pytest.approx(500 / 6)
    rc, report = score(tmp_path, "ovo_bench", records, forged)
    assert report["categories"]["realtime"] == pytest.approx(500 / 6) and report["ignored"]["unknown_ids"] == 100
    assert report["coverage"] == {"expected": 6, "answered": 6, "missing": 0}


def test_ovo_a_results_file_of_other_ids_is_an_error(tmp_path, ovo, capsys):
    records, honest = ovo
    for item in honest["backward"] + honest["realtime"] + honest["forward"]:
        item["id"] = f"other-{item['id']}"
    assert score(tmp_path, "ovo_bench", records, honest)[0] == 2
    assert "none of its" in capsys.readouterr().err


# ---- StreamingBench Proactive Output -----------------------------------------------------------------


@pytest.fixture
def po():
    rng = random.Random(11)
    entries = make_questions(rng, n_videos=6)
    return entries, make_po_results(rng, entries, "M")


def test_po_results_file_changes_the_score_only_through_its_responses(tmp_path, po):
    entries, honest = po
    assert score(tmp_path, "streamingbench_po", entries, honest)[0] == 0
    expected = json.loads((tmp_path / "r" / "results.json").read_text())
    assert expected["ignored"] == {"unknown_ids": 0, "duplicates": 0, "gold_differs": 0}
    questions = [q for e in honest for q in e["questions"]]

    forged = copy.deepcopy(honest)  # the gold rewritten to whatever the model said, when; a fake task
    for q in (q for e in forged for q in e["questions"] if "M" in q):
        last = q["M"]["dialog_history"][-1]
        q["ground_truth_time_stamp"], q["ground_truth_output"] = stamp(int(last["time"])), last["content"]
    forged[0]["questions"][0]["task_type"] = "ZZZ"
    gold = ("ground_truth_time_stamp", "ground_truth_output", "task_type")
    pairs = zip((q for e in forged for q in e["questions"]), questions)
    rewritten = sum(any(f[k] != h[k] for k in gold) for f, h in pairs)
    assert rewritten > 5
    rc, report = score(tmp_path, "streamingbench_po", entries, forged)
    assert rc == 0 and report["tasks"] == expected["tasks"] and report["stats"] == expected["stats"]
    assert report["ignored"] == {"unknown_ids": 0, "duplicates": 0, "gold_differs": rewritten}

    forged = copy.deepcopy(honest)  # 20 extra answered copies of a question, and 20 unknown questions
    answered = next(e for e in forged if any("M" in q for q in e["questions"]))
    right = copy.deepcopy(next(q for q in answered["questions"] if "M" in q))
    answered["questions"] += [copy.deepcopy(right) for _ in range(20)]
    forged.append(
        {"video_path": "./videos/other.mp4", "questions": [dict(right, question=f"q{k}") for k in range(20)]}
    )
    rc, report = score(tmp_path, "streamingbench_po", entries, forged)
    assert rc == 0 and report["tasks"] == expected["tasks"] and report["stats"] == expected["stats"]
    assert report["ignored"] == {"unknown_ids": 20, "duplicates": 20, "gold_differs": 0}
    assert report["coverage"] == expected["coverage"] and report["coverage"]["missing"] >= 0
    assert len(questions) == report["coverage"]["expected"]


def test_po_outputs_in_the_annotation_file_are_not_scored(tmp_path, po):
    """A results file given as --annotations: its own outputs are not the predictions'."""
    entries, honest = po
    rc, report = score(tmp_path, "streamingbench_po", honest, entries, "--model", "M")
    assert rc == 0 and report["coverage"]["answered"] == 0 and report["tasks"] == {}


def test_po_time_written_as_hh_mm_ss_is_read():
    """Issue 57: a dialog time in the question file's own format scores as those seconds."""
    for said, ok in (("00:01:00", 1), ("0:01:02", 1), ("01:03", 0), ("60", 0)):
        output = {"answered": said, "dialog_history": [{"role": "assistant", "content": "3", "time": said}]}
        stats = score_streamingbench_po(one(output), "M")
        assert stats["tasks"]["Proactive Output"]["time_correct"] == ok and stats["malformed"] == (said == "60")


@pytest.mark.parametrize("said", [-1, 49, 65, 10**9, float("nan"), float("inf"), True])
def test_po_response_outside_the_window_is_malformed(said):
    """Asked at 50, due at 60, last poll at 64: a time outside [50, 64] (or not a time) is scored wrong, counted."""
    output = {"answered": said, "dialog_history": [{"role": "assistant", "content": "3", "time": said}]}
    stats = score_streamingbench_po(one(output), "M")
    assert stats["tasks"]["Proactive Output"]["time_correct"] == 0 and stats["malformed"] == 1


# ---- the blind floor: counted, not tried delay by delay ----------------------------------------------


def tried_every_delay(entries: list[dict]) -> dict:
    """The blind floor as it was first written: every delay from 1 s to the longest span + 4 s, each scored."""
    spans = [
        hms_seconds(q["ground_truth_time_stamp"]) - hms_seconds(q["time_stamp"])
        for e in entries
        for q in e["questions"]
    ]
    best = None
    for delay in range(1, max(spans + [0]) + 5):
        stats = score_streamingbench_po(po_blind_results(entries, delay), "blind")
        correct = sum(s["time_correct"] for s in stats["tasks"].values())
        if best is None or correct > best[0]:
            best = (correct, delay, stats)
    tasks = {k: {m: v[m] for m in ("time_accuracy", "answer_accuracy")} for k, v in best[2]["tasks"].items()}
    return {"delay_s": best[1], "tasks": tasks}


def test_blind_floor_equals_trying_every_delay():
    rng = random.Random(5)
    cases = [one(None, truth="00:00:53") + one(None, truth="00:00:54"), one(None, truth="00:00:40")]
    cases += [make_questions(rng, n_videos=rng.randint(1, 8)) for _ in range(60)]
    for entries in cases:
        assert po_blind_floor(entries) == tried_every_delay(entries)


def test_blind_floor_of_a_day_long_span_is_fast_and_absurd_stamps_are_refused(tmp_path, capsys):
    entries = one(None, truth="23:59:59")
    start = time.perf_counter()
    assert po_blind_floor(entries)["delay_s"] == 86_399 - 50 - 2
    assert time.perf_counter() - start < 20
    for stamp_ in ("9999999:00:00", "24:00:01", "-0:00:05", "1:2:3:4"):
        entries = one(None, truth=stamp_)
        (tmp_path / "q.json").write_text(json.dumps(entries))
        with pytest.raises(EpisodeError, match="ground_truth_time_stamp.*H:MM:SS within 24 h"):
            load_streamingbench_po(tmp_path / "q.json")
    entries[0]["questions"][0].update(ground_truth_time_stamp="9999999:00:00", M={})
    start = time.perf_counter()
    assert score(tmp_path, "streamingbench_po", one(None, truth="9999999:00:00"), entries)[0] == 2
    assert time.perf_counter() - start < 20 and "within 24 h" in capsys.readouterr().err


# ---- the wrong benchmark, and where results.json went ------------------------------------------------


def test_a_file_of_the_other_benchmark_is_named(tmp_path, capsys, ovo, po):
    records, ovo_results = ovo
    entries, po_results = po
    cases = [
        ("ovo_bench", entries, ovo_results, "looks like a StreamingBench file.*--benchmark streamingbench_po"),
        ("streamingbench_po", records, po_results, "looks like an OVO-Bench annotation file.*--benchmark ovo_bench"),
        ("ovo_bench", records, po_results, "looks like a StreamingBench file: use --benchmark streamingbench_po"),
        ("streamingbench_po", entries, ovo_results, "looks like an OVO-Bench results file: use --benchmark ovo_bench"),
        ("ovo_bench", ovo_results, ovo_results, "looks like an OVO-Bench results file: pass it as --predictions"),
    ]
    for benchmark, anno, results, message in cases:
        capsys.readouterr()
        assert score(tmp_path, benchmark, anno, results)[0] == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("proactive-eval: error:")
        assert re.search(message, err), err


def test_score_says_where_it_wrote_results_json(tmp_path, ovo):
    records, results = ovo
    (tmp_path / "a.json").write_text(json.dumps(records))
    (tmp_path / "p.json").write_text(json.dumps(results))
    out = tmp_path / "run 1"
    proc = subprocess.run(
        [sys.executable, "-m", "proactive_eval.cli", "score", "--benchmark", "ovo_bench", "--annotations",
         str(tmp_path / "a.json"), "--predictions", str(tmp_path / "p.json"), "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out / 'results.json'}" in proc.stdout.splitlines()
    assert (out / "results.json").is_file()
