"""OVO-Bench: loader, prompts, and the scorer against a literal transcription of the authors' ``score.py``."""

from __future__ import annotations

import json
import random
import re

import pytest

from proactive_eval.benchmarks.ovo_bench.format import load_ovo_bench, ovo_prompt
from proactive_eval.benchmarks.ovo_bench.metric import mc_score, rec_score, score_ovo_bench, yes_no_score
from proactive_eval.benchmarks.ovo_bench.score import ovo_blind_results
from proactive_eval.cli import main
from proactive_eval.records import EpisodeError

# ---- a literal transcription of the authors' OVOBenchOfflineScore (crashes included) -----------------


def official_ovo(results):
    """The authors' offline score, step for step: returns (per-task percent, per-category percent, total).

    Their forward tasks come from ``list(set(...))``, whose order varies between runs; this takes the order of
    first appearance, as the scorer under test does (the sum differs at most in the last bit otherwise)."""

    def br_get_score(response, gt):
        if response == None:  # noqa: E711 - as written by the authors
            return 0
        return int(gt in response)

    def rec_get_score(response, gt):
        if response == None:  # noqa: E711
            return 0
        response = re.findall(r"\d+", response)
        response = "".join(response)
        return response == str(gt)

    def br(results):
        for i in range(len(results)):
            results[i]["score"] = br_get_score(results[i]["response"], results[i]["ground_truth"])
        scores = {}
        for i in range(len(results)):
            if not results[i]["task"] in scores.keys():  # noqa: E713
                scores[results[i]["task"]] = [results[i]["score"]]
            else:
                scores[results[i]["task"]].append(results[i]["score"])
        return scores

    def fwd(results):
        scores = {}
        tasks = list(dict.fromkeys([result["task"] for result in results]))
        for task in tasks:
            scores[task] = []
        for result in results:
            if result["task"] == "REC":
                for t in result["test_info"]:
                    scores["REC"].append(rec_get_score(t["response"], t["count"]))
            for name in ("SSR", "CRR"):
                if result["task"] == name:
                    for t in result["test_info"]:
                        if (t["response"] == "N" and t["type"] == 0) or (t["response"] == "Y" and t["type"] == 1):
                            scores[name].append(1)
                            continue
                        gt = "No" if t["type"] == 0 else "Yes"
                        scores[name].append(br_get_score(t["response"], gt))
        return scores

    per_task, avg = {}, {"backward": [], "realtime": [], "forward": []}
    cat = {}
    for name, fn in (("backward", br), ("realtime", br), ("forward", fwd)):
        if len(results[name]) > 0:
            for k, v in fn(json.loads(json.dumps(results[name]))).items():
                per_task[k] = 100 * sum(v) / len(v)
                avg[name].append(sum(v) / len(v))
            cat[name] = 100 * sum(avg[name]) / len(avg[name])
    total = (cat["backward"] + cat["realtime"] + cat["forward"]) / 3
    return per_task, cat, total


# ---- random annotations and results ------------------------------------------------------------------

MC_TASKS = {"backward": ("EPM", "ASI", "HLD"), "realtime": ("OCR", "ACR", "ATR", "STU", "FPD", "OJR")}


def make_annotations(rng: random.Random) -> list[dict]:
    records, rid = [], 0
    for tasks in MC_TASKS.values():
        for task in tasks:
            for _ in range(rng.randint(1, 4)):
                records.append(
                    {"id": rid, "task": task, "video": f"v/{rid % 3}.mp4", "realtime": rng.randint(5, 90),
                     "question": "q?", "options": ["a", "b", "c", "d"], "gt": rng.randrange(4), "answer": "a"}
                )  # fmt: skip
                rid += 1
    for task in ("REC", "SSR", "CRR"):
        for _ in range(rng.randint(1, 3)):
            probes = []
            for k in range(rng.randint(1, 4)):
                probe = {"realtime": 10 + 5 * k}
                if task == "REC":
                    probe["count"] = rng.choice([0, 1, 2, 3, 12])
                else:
                    probe["type"] = rng.choice([0, 1])
                    if task == "SSR":
                        probe["step"] = "cut"
                probes.append(probe)
            record = {"id": rid, "task": task, "video": f"v/{rid % 3}.mp4", "test_info": probes}
            record.update({"REC": {"activity": "jump"}, "CRR": {"question": "what?"}, "SSR": {}}[task])
            records.append(record)
            rid += 1
    return records


def mc_response(rng, gold):
    return rng.choice([gold, f"{gold}.", "B", "Answer: C", "The answer is D", "", None, "a", f" {gold} ", "ABCD", "E"])


def count_response(rng, count):
    return rng.choice([str(count), f"{count} times", "3 or 4", "zero", "", None, "12", f"Count: {count + 1}"])


def yes_no_response(rng, kind):
    return rng.choice(["Yes", "No", "Y", "N", "yes", "no", "Not sure", "Yes.", "", None, "YES", "No, yes"])


def make_results(rng: random.Random, records: list[dict]) -> dict:
    results = {"backward": [], "realtime": [], "forward": []}
    for r in records:
        if r["task"] in ("REC", "SSR", "CRR"):
            probes = []
            for p in r["test_info"]:
                answer = count_response(rng, p["count"]) if r["task"] == "REC" else yes_no_response(rng, p["type"])
                probes.append({**p, "response": answer})
            results["forward"].append({**r, "test_info": probes})
        else:
            name = "backward" if r["task"] in MC_TASKS["backward"] else "realtime"
            gold = chr(65 + r["gt"])
            results[name].append(
                {"id": r["id"], "task": r["task"], "question": "q?", "response": mc_response(rng, gold),
                 "ground_truth": gold}
            )  # fmt: skip
    return results


def test_random_results_equal_the_official_transcription():
    rng = random.Random(48)
    for _ in range(250):
        records = make_annotations(rng)
        results = make_results(rng, records)
        ours = score_ovo_bench(results)
        tasks, categories, total = official_ovo(results)
        assert ours["tasks"] == tasks
        assert ours["categories"] == categories
        assert ours["overall"] == total
        assert ours["malformed"] == 0


# ---- hand-computed quirks ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "response, gold, expected",
    [
        ("A", "A", 1),
        ("a", "A", 0),  # case-sensitive
        ("Answer: B", "A", 1),  # the capital A of "Answer" holds the gold letter
        ("ABCD", "C", 1),  # every letter: always right
        (None, "A", 0),
        ("", "A", 0),
        (5, "A", None),  # the official `in` raises: malformed, scored wrong
        (["A"], "A", 1),  # a JSON list: Python's membership, as the official
    ],
)
def test_mc_quirks(response, gold, expected):
    assert mc_score(response, gold) == expected


@pytest.mark.parametrize(
    "response, count, expected",
    [
        ("3", 3, 1),
        ("3 times", 3, 1),
        ("3 or 4", 3, 0),  # "34"
        ("1, 2", 12, 1),  # "12"
        ("three", 3, 0),
        ("", 0, 0),
        ("0", 0, 1),
        ("03", 3, 0),  # "03" != "3"
        ("3", "3", 1),
        ("3", 3.0, 0),  # str(3.0) = "3.0"
        (None, 3, 0),
        (3, 3, None),  # not text: the official re.findall raises
    ],
)
def test_rec_quirks(response, count, expected):
    assert rec_score(response, count) == expected


@pytest.mark.parametrize(
    "response, kind, expected",
    [
        ("N", 0, 1),
        ("Y", 1, 1),
        ("Y", 0, 0),
        ("N", 1, 0),
        ("No", 0, 1),
        ("no", 0, 0),  # case-sensitive
        ("Not sure", 0, 1),  # holds "No"
        ("Yes", 1, 1),
        ("Yes", 2, 1),  # any type but 0 wants "Yes"
        ("Y", 2, 0),  # the bare-letter shortcut is for type 1 only
        ("No, Yes", 1, 1),
        (None, 0, 0),
        (1, 1, None),
    ],
)
def test_yes_no_quirks(response, kind, expected):
    assert yes_no_score(response, kind) == expected


def test_hand_computed_file():
    results = {
        "backward": [
            {"task": "EPM", "response": "A", "ground_truth": "A"},
            {"task": "EPM", "response": "B", "ground_truth": "A"},
            {"task": "HLD", "response": "C", "ground_truth": "C"},
        ],
        "realtime": [{"task": "OCR", "response": None, "ground_truth": "A"}, {"task": "OCR", "response": "Answer: A"}],
        "forward": [
            {"task": "REC", "test_info": [{"count": 2, "response": "2"}, {"count": 3, "response": "2"}]},
            {"task": "SSR", "test_info": [{"type": 0, "response": "N"}, {"type": 1, "response": "No"}]},
            {"task": "CRR", "test_info": [{"type": 1, "response": "Yes"}]},
            {"task": "XYZ", "test_info": []},  # official: a task with nothing scored divides by zero
        ],
    }
    report = score_ovo_bench(results)
    # EPM 1/2, HLD 1/1 -> backward 75; OCR: None -> 0, no ground_truth -> malformed 0 -> 0; forward 50, 50, 100.
    assert report["tasks"] == {"EPM": 50.0, "HLD": 100.0, "OCR": 0.0, "REC": 50.0, "SSR": 50.0, "CRR": 100.0}
    assert report["categories"] == {"backward": 75.0, "realtime": 0.0, "forward": pytest.approx(200 / 3)}
    assert report["overall"] == pytest.approx((75 + 0 + 200 / 3) / 3)
    assert report["malformed"] == 2  # the OCR result without ground_truth, the empty XYZ task
    assert report["counts"]["OCR"] == 2


def test_a_missing_category_leaves_overall_none():
    report = score_ovo_bench({"backward": [{"task": "EPM", "response": "A", "ground_truth": "A"}], "forward": []})
    assert report["categories"]["backward"] == 100.0
    assert report["categories"]["realtime"] is None and report["overall"] is None


# ---- loader, prompts, CLI ----------------------------------------------------------------------------


def test_loader_names_missing_videos_and_clip_paths(tmp_path):
    records = make_annotations(random.Random(0))
    (tmp_path / "v").mkdir()
    (tmp_path / "v" / "0.mp4").write_bytes(b"x")
    path = tmp_path / "ovo.json"
    path.write_text(json.dumps(records))
    bench = load_ovo_bench(path, chunked_root=tmp_path / "chunks")
    assert sorted(bench.missing) == [str(tmp_path / "v" / "1.mp4"), str(tmp_path / "v" / "2.mp4")]
    forward = next(r for r in records if r["task"] == "REC")
    assert bench.clip_path(forward, 1) == tmp_path / "chunks" / f"{forward['id']}_1.mp4"
    assert bench.clip_path(records[0]) == tmp_path / "chunks" / "0.mp4"
    bad = [dict(records[0], gt=7)]
    path.write_text(json.dumps(bad))
    with pytest.raises(EpisodeError, match="gt"):
        load_ovo_bench(path)


def test_prompts_fill_the_official_templates():
    mc = {"task": "EPM", "question": "Who?", "options": ["x", "y"]}
    assert "Question: Who?\nOptions:\nA. x; B. y;\n\nRespond only with the letter" in ovo_prompt(mc)
    rec = {"task": "REC", "activity": "jump", "test_info": [{"count": 1}]}
    assert "answer the following question: How many times did they jump?\n" in ovo_prompt(rec, 0)
    ssr = {"task": "SSR", "test_info": [{"step": "cut the bread"}]}
    assert "whole procedures: \ncut the bread\nYour task" in ovo_prompt(ssr, 0)


def test_blind_floor_is_the_majority_answer():
    records = [
        {"id": 0, "task": "EPM", "video": "a", "realtime": 1, "question": "q", "options": ["a", "b"], "gt": 1},
        {"id": 1, "task": "EPM", "video": "a", "realtime": 1, "question": "q", "options": ["a", "b"], "gt": 1},
        {"id": 2, "task": "EPM", "video": "a", "realtime": 1, "question": "q", "options": ["a", "b"], "gt": 0},
        {
            "id": 3,
            "task": "REC",
            "video": "a",
            "activity": "x",
            "test_info": [{"count": 2}, {"count": 2}, {"count": 5}],
        },
        {"id": 4, "task": "SSR", "video": "a", "test_info": [{"type": 0, "step": "s"}, {"type": 1, "step": "s"}]},
    ]
    floor = score_ovo_bench(ovo_blind_results(records))
    assert floor["tasks"] == {"EPM": pytest.approx(200 / 3), "REC": pytest.approx(200 / 3), "SSR": 50.0}


def test_cli_score_writes_results_json(tmp_path, capsys):
    rng = random.Random(1)
    records = make_annotations(rng)
    results = make_results(rng, records)
    results["forward"][0]["test_info"][0].pop("response")  # a probe left unanswered
    (tmp_path / "ovo.json").write_text(json.dumps(records))
    (tmp_path / "res.json").write_text(json.dumps(results))
    argv = ["score", "--benchmark", "ovo_bench", "--annotations", str(tmp_path / "ovo.json")]
    assert main(argv + ["--predictions", str(tmp_path / "res.json"), "--out", str(tmp_path / "r")]) == 0
    report = json.loads((tmp_path / "r" / "results.json").read_text())
    assert set(report["tasks"]) == {"EPM", "ASI", "HLD", "OCR", "ACR", "ATR", "STU", "FPD", "OJR", "REC", "SSR", "CRR"}
    assert report["coverage"]["missing"] == 1 and report["malformed"] == 1
    assert set(report["blind_floor"]["categories"]) == {"backward", "realtime", "forward"}
    assert "blind floor" in capsys.readouterr().out
    assert main(["baseline", "--benchmark", "ovo_bench", "--annotations", str(tmp_path / "ovo.json")]) == 0
    assert json.loads(capsys.readouterr().out) == {"benchmark": "ovo_bench", "blind_floor": report["blind_floor"]}
    assert main(["score", "--benchmark", "ovo_bench", "--annotations", "nope.json", "--predictions", "x"]) == 2
