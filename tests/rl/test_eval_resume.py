"""Resumable MCQA and OEG evaluation (docs/spec.md §1, §6): `proactive-rl eval --model` and `--watch`, killed
mid-MCQA, mid-OEG generation and mid-judging, then restarted: each restart plays only the environments no run had
finished, the judge (a real HTTP server on loopback) answers every prompt once over all the runs, and the files and
metrics equal an uninterrupted run's. 1 process, and 2 under ``accelerate launch`` (sharded).

The runs are ``tests/rl/interrupted_eval.py`` subprocesses: it logs every environment each rank starts and kills
a rank (SIGKILL) as it is about to start its k-th environment; the judge kills the judging rank as its k-th prompt
arrives, once every answer it gave is in the judge cache.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_oeg_evaluator import _judge_answer, _records

from tests.support.fake_openai import FakeOpenAI, _user_text

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
SCRIPT = str(ROOT / "tests" / "rl" / "interrupted_eval.py")
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
IDS = ["qd-1", "qd-2", "rod-1", "vsod-1"]  # the environments of both evaluators, in order
FILES = ("mcqa/outcomes.jsonl", "oeg/predictions.jsonl", "oeg/judgments.jsonl")


class Judge(FakeOpenAI):
    """The scripted OEG judge; `answered` counts the answers given per prompt; `kill_at(k, pid_dir)` makes the
    k-th request from now kill the judging rank (rank 0) instead of being answered."""

    def __init__(self):
        super().__init__(answer=self._answer, fault=self._fault)
        self.answered: Counter = Counter()
        self._kill = None

    def _answer(self, messages):
        self.answered[_user_text(messages)] += 1
        return _judge_answer(messages)

    def kill_at(self, k: int, pid_dir: Path, cache: Path) -> None:
        self._kill = {"left": k, "pid_dir": pid_dir, "cache": cache}

    def _fault(self, prompt, attempt):
        if self._kill is None:
            return None
        self._kill["left"] -= 1
        if self._kill["left"] > 0:
            return None
        paid, deadline = sum(self.answered.values()), time.monotonic() + 120
        while _cached(self._kill["cache"]) < paid and time.monotonic() < deadline:
            time.sleep(0.05)  # every answer given is committed to the cache before the kill
        os.kill(int((self._kill["pid_dir"] / "rank0.pid").read_text()), signal.SIGKILL)
        self._kill = None
        return "500"


def _cached(path: Path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
            return db.execute("SELECT COUNT(*) FROM judgments").fetchone()[0]
    except sqlite3.Error:
        return 0


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A saved tiny checkpoint inside a finished run folder, and the ProactiveBench records both evaluators read."""
    from proactive_rl.models import build_tiny

    root = tmp_path_factory.mktemp("resume")
    checkpoint = root / "run" / "checkpoint-1"
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    model.save_pretrained(checkpoint)
    processor.save_pretrained(checkpoint)
    for folder in (checkpoint, checkpoint.parent):
        (folder / "trainer_state.json").write_text(json.dumps({"global_step": 1}))
    return {"run": checkpoint.parent, "checkpoint": checkpoint, "specs": _records(root / "data")}


def _config(world, folder: Path, judge: Judge) -> Path:
    common = {"environments": world["specs"], "protocol": "unfiltered"}
    oeg_judge = {"type": "openai", "base_url": judge.base_url, "model": "qwen3-8b", "max_retries": 0}
    oeg_judge["concurrency"] = 1  # one request in flight: the kill lands between two answers
    evaluators = [
        {"type": "mcqa", "max_new_tokens": 2, **common},
        {"type": "oeg", "max_new_tokens": 4, "judge": oeg_judge, **common},  # no cache_path: the default one
    ]
    path = folder / "eval.yaml"
    path.write_text(json.dumps({"evaluators": evaluators}))
    return path


def _run(args: list[str], folder: Path, kill_at: str = "", processes: int = 1) -> tuple[int, list[tuple]]:
    """Run the eval command; ``(exit code, [(rank, kind, id)] it started)``."""
    played, pid_dir = folder / "played.log", folder / "pids"
    played.unlink(missing_ok=True)
    pid_dir.mkdir(exist_ok=True)
    launcher = [sys.executable]
    if processes > 1:
        launcher = [str(BIN / "accelerate"), "launch", "--config_file", "launch/ddp.yaml"]
        launcher += ["--num_processes", str(processes)]
    env = {**ENV, "PLAYED_LOG": str(played), "KILL_AT": kill_at, "PID_DIR": str(pid_dir)}
    proc = subprocess.run([*launcher, SCRIPT, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    if kill_at == "" and proc.returncode not in (0, -signal.SIGKILL):
        print(proc.stdout[-3000:], proc.stderr[-6000:])
    lines = played.read_text().split("\n") if played.exists() else []
    return proc.returncode, [tuple(line.split()) for line in lines if line]


def _stored(folder: Path, name: str) -> set[str]:
    """The ids of the items the ranks stored as finished in `folder/name`."""
    ids = set()
    for f in (folder / name).glob("partial-rank*.jsonl"):
        ids |= {json.loads(line)["id"] for line in f.read_text().splitlines() if line.endswith("}")}
    return ids


@pytest.fixture(scope="module")
def uninterrupted(world, tmp_path_factory):
    """``(results, {file: text})`` of one run that is not interrupted (its own judge server)."""
    folder = tmp_path_factory.mktemp("uninterrupted")
    with Judge() as judge:
        args = ["eval", "--config", str(_config(world, folder, judge)), "--model", str(world["checkpoint"])]
        code, played = _run([*args, "--out", str(folder / "out"), "--no-plots"], folder)
    assert code == 0
    assert sorted(played) == sorted(("0", kind, i) for kind in ("mcqa", "oeg") for i in IDS)
    assert set(judge.answered.values()) == {1}  # the answers' prompts, then the blind answer's (docs/spec.md §14)
    results = json.loads((folder / "out" / "results.json").read_text())
    return results, {f: (folder / "out" / f).read_text() for f in FILES}, set(judge.answered)


def _paid_once(judge: Judge, uninterrupted) -> None:
    """Over all the runs, the judge answered each prompt of an uninterrupted run once, and nothing else."""
    assert set(judge.answered.values()) == {1} and set(judge.answered) == uninterrupted[2]


def _same_results(results: dict, folder: Path, uninterrupted) -> None:
    reference, files, _ = uninterrupted
    assert results["complete"], results["incomplete"]
    assert results["metrics"] == reference["metrics"]
    for name in ("mcqa", "oeg"):
        ours, theirs = results["evaluators"][name], reference["evaluators"][name]
        assert ours["num_items"] == 4 and ours["resumed_items"] == 4 - sum(ours["items_per_rank"])
        # the judge's cache counts and the run's speed (wall time per answer) differ between runs by nature
        assert {k: v for k, v in ours["summary"].items() if k not in ("judge_stats", "speed")} == {
            k: v for k, v in theirs["summary"].items() if k not in ("judge_stats", "speed")
        }
        assert ours["samples"] == theirs["samples"]
        assert not list((folder / name).glob("partial-rank*.jsonl"))
    for f in FILES:  # the same decisions and judgments, line for line
        assert (folder / f).read_text() == files[f], f


def _played(played: list[tuple], kind: str) -> list[str]:
    return sorted(i for _, k, i in played if k == kind)


@pytest.mark.slow
def test_eval_killed_mid_mcqa_mid_oeg_and_mid_judging_resumes(world, uninterrupted, tmp_path):
    with Judge() as judge:
        out = tmp_path / "out"
        args = ["eval", "--config", str(_config(world, tmp_path, judge)), "--model", str(world["checkpoint"])]
        args += ["--out", str(out), "--no-plots"]
        # 1. killed as it starts the third MCQA environment: two are stored
        code, played = _run(args, tmp_path, kill_at="mcqa:3")
        assert code == -signal.SIGKILL and _played(played, "mcqa") == IDS[:2] and not _played(played, "oeg")
        assert _stored(out, "mcqa") == set(IDS[:2])
        # 2. plays only the other two MCQA environments, then is killed at its third OEG answer
        code, played = _run(args, tmp_path, kill_at="oeg:3")
        assert code == -signal.SIGKILL and _played(played, "mcqa") == IDS[2:] and _played(played, "oeg") == IDS[:2]
        assert _stored(out, "oeg") == set(IDS[:2]) and not judge.answered
        # 3. plays only the other two OEG environments; killed while judging, after two answers
        judge.kill_at(3, tmp_path / "pids", out / "oeg" / "judge_cache.sqlite")
        code, played = _run(args, tmp_path)
        assert code == -signal.SIGKILL and not _played(played, "mcqa") and _played(played, "oeg") == IDS[2:]
        assert sum(judge.answered.values()) == 2
        # 4. plays nothing; the judge is asked only the prompts it had not answered (two, then the blind answer's)
        code, played = _run(args, tmp_path)
        assert code == 0 and played == []
        _paid_once(judge, uninterrupted)  # every prompt paid for once, over all four runs
    results = json.loads((out / "results.json").read_text())
    assert results["evaluators"]["oeg"]["summary"]["judge_stats"]["cache_hits"] == 2
    _same_results(results, out, uninterrupted)


@pytest.mark.slow
def test_watch_killed_mid_mcqa_and_mid_judging_resumes_the_checkpoint(world, uninterrupted, tmp_path):
    with Judge() as judge:
        watch = tmp_path / "watch"
        args = ["eval", "--config", str(_config(world, tmp_path, judge)), "--watch", str(world["run"])]
        args += ["--out", str(watch), "--once", "--settle", "0", "--poll", "0.1", "--no-plots"]
        code, played = _run(args, tmp_path, kill_at="mcqa:2")
        assert code == -signal.SIGKILL and _played(played, "mcqa") == IDS[:1]
        judge.kill_at(2, tmp_path / "pids", watch / "checkpoint-1" / "oeg" / "judge_cache.sqlite")
        code, played = _run(args, tmp_path)
        assert code == -signal.SIGKILL and _played(played, "mcqa") == IDS[1:] and _played(played, "oeg") == IDS
        assert not (watch / "state.json").exists() or "checkpoint-1" not in (watch / "state.json").read_text()
        code, played = _run(args, tmp_path)
        assert code == 0 and played == []
        _paid_once(judge, uninterrupted)
    state = json.loads((watch / "state.json").read_text())["checkpoints"]["checkpoint-1"]
    assert state["status"] == "ok" and state["evaluations"] == 1
    assert state["metrics"] == uninterrupted[0]["metrics"]
    _same_results(
        json.loads((watch / "checkpoint-1" / "results.json").read_text()), watch / "checkpoint-1", uninterrupted
    )


@pytest.mark.slow
@pytest.mark.distributed
def test_two_process_eval_killed_mid_oeg_and_mid_judging_resumes(world, uninterrupted, tmp_path):
    """Sharded over 2 ranks: rank 0 dies at its second OEG environment (rank 1 is stopped by the launcher,
    wherever it was); the restarts, still on 2 ranks, play exactly what neither rank had stored."""
    with Judge() as judge:
        out = tmp_path / "out"
        args = ["eval", "--config", str(_config(world, tmp_path, judge)), "--model", str(world["checkpoint"])]
        args += ["--out", str(out), "--no-plots"]
        code, played = _run(args, tmp_path, kill_at="oeg:2", processes=2)
        assert code != 0 and ("0", "oeg", IDS[0]) in played and ("0", "oeg", IDS[1]) not in played
        done = {"mcqa": _stored(out, "mcqa"), "oeg": _stored(out, "oeg")}  # rank 0's shards: the first two
        assert set(IDS[:2]) <= done["mcqa"] and IDS[0] in done["oeg"] and IDS[1] not in done["oeg"]
        judge.kill_at(2, tmp_path / "pids", out / "oeg" / "judge_cache.sqlite")
        code, played = _run(args, tmp_path, processes=2)
        assert code != 0 and {r for r, _, _ in played} <= {"0", "1"}
        assert _played(played, "mcqa") == sorted(set(IDS) - done["mcqa"])
        assert _played(played, "oeg") == sorted(set(IDS) - done["oeg"])
        code, played = _run(args, tmp_path, processes=2)
        assert code == 0 and played == []
        _paid_once(judge, uninterrupted)
    results = json.loads((out / "results.json").read_text())
    assert results["num_processes"] == 2
    _same_results(results, out, uninterrupted)


class Killed(BaseException):
    """Stands for a SIGKILL in-process: no ``except Exception`` stops it, ``finally`` blocks still run."""


def test_mcqa_swap_counterfactual_resumes_with_its_environment(world, tmp_path, monkeypatch):
    """An environment is stored with its swap run or not at all: killed between an environment's own run and its
    swap run, the restart plays both again, and the outcomes equal an uninterrupted run's."""
    import proactive_eval.benchmarks.proactivebench.environments as environments
    import proactive_rl.evaluation.proactivebench as proactivebench
    from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model
    from proactive_rl.models import load_model

    raw = {"type": "mcqa", "environments": world["specs"], "protocol": "unfiltered", "max_new_tokens": 2}
    raw["counterfactual"] = ["swap"]
    config = EvalCallbackConfig.from_dict({"evaluators": [raw]})
    tiny = load_model(world["checkpoint"])
    real, calls = environments.run_environment, []

    def counting(env, answer, kill_at=None):
        calls.append(type(env).__name__)
        if len(calls) == kill_at:
            raise Killed
        return real(env, answer)

    def run(out, kill_at=None):
        calls.clear()
        hooked = lambda env, answer: counting(env, answer, kill_at)  # noqa: E731
        for module in (environments, proactivebench):
            if hasattr(module, "run_environment"):
                monkeypatch.setattr(module, "run_environment", hooked)
        meta = {"checkpoint": "tiny"}
        return evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=out, meta=meta, resume=True)

    reference = run(tmp_path / "reference")
    # QD's two records swap images with each other; ROD and VSOD have one record each (no partner)
    assert calls == ["ProactiveBenchEnvironment", "SwappedEnvironment"] * 2 + ["ProactiveBenchEnvironment"] * 2, calls
    with pytest.raises(Killed):  # at qd-2's swap run: qd-2's own outcome is not stored either
        run(tmp_path / "out", kill_at=4)
    assert _stored(tmp_path / "out", "mcqa") == {"qd-1", "qd-1#swap"}
    results = run(tmp_path / "out")
    assert len(calls) == 4 and results["evaluators"]["mcqa"]["resumed_items"] == 2
    assert results["metrics"] == reference["metrics"]
    for name in ("outcomes.jsonl", "outcomes_swap.jsonl"):
        assert (tmp_path / "out" / "mcqa" / name).read_text() == (tmp_path / "reference" / "mcqa" / name).read_text()


def test_oeg_swap_counterfactual_resumes_with_its_environment(world, tmp_path, monkeypatch):
    """The same for OEG: killed between an environment's own answer and its swap answer (rule judge)."""
    import proactive_rl.evaluation.policy as policy
    import proactive_rl.evaluation.proactivebench as proactivebench
    from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model
    from proactive_rl.models import load_model

    raw = {"type": "oeg", "environments": world["specs"], "protocol": "unfiltered", "max_new_tokens": 3}
    raw["counterfactual"] = ["swap"]
    config = EvalCallbackConfig.from_dict({"evaluators": [raw]})
    tiny = load_model(world["checkpoint"])
    real, calls = policy.image_answer_fn, []

    def run(out, kill_at=None):
        def answer_fn(*args, **kwargs):
            answer = real(*args, **kwargs)

            def counted(image, text):
                calls.append(text)
                if len(calls) == kill_at:
                    raise Killed
                return answer(image, text)

            return counted

        calls.clear()
        monkeypatch.setattr(policy, "image_answer_fn", answer_fn)
        monkeypatch.setattr(proactivebench, "image_answer_fn", answer_fn)  # its use site
        meta = {"checkpoint": "tiny"}
        return evaluate_model(*tiny, build_evaluators(config.evaluators), out_dir=out, meta=meta, resume=True)

    reference = run(tmp_path / "reference")
    assert len(calls) == 6  # QD's two records answer twice (own image, then the other's), ROD and VSOD once
    with pytest.raises(Killed):
        run(tmp_path / "out", kill_at=4)
    assert _stored(tmp_path / "out", "oeg") == {"qd-1", "qd-1#swap"}
    results = run(tmp_path / "out")
    assert len(calls) == 4 and results["evaluators"]["oeg"]["resumed_items"] == 2
    assert results["metrics"] == reference["metrics"]
    for name in ("predictions.jsonl", "judgments.jsonl"):
        assert (tmp_path / "out" / "oeg" / name).read_text() == (tmp_path / "reference" / "oeg" / name).read_text()
