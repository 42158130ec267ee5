"""A training run SIGKILLed while its callback evaluates a checkpoint, then resumed from that checkpoint: the
checkpoint is scored on resume, before the first step, so the callback's history has every saved step (2, 4, 6),
not a gap (2, 6).

The first run is the ``proactive-rl`` command in a subprocess whose callback kills its own process (SIGKILL) as it
starts its second evaluation (checkpoint-4, just saved); the second is ``proactive-rl train ...
--resume_from_checkpoint true`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_callbacks import prs_eval, tiny_recipe

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
# `proactive-rl ARGS` whose callback SIGKILLs the process as it starts its KILL_AT_EVAL-th evaluation
KILLING = """
import os, signal, sys
import proactive_rl.evaluation.callback as callback
real, calls = callback.evaluate_model, []
def evaluate_model(*args, **kwargs):
    calls.append(1)
    if len(calls) == int(os.environ["KILL_AT_EVAL"]):
        os.kill(os.getpid(), signal.SIGKILL)
    return real(*args, **kwargs)
callback.evaluate_model = evaluate_model
from proactive_rl.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _history(out: Path) -> list[int]:
    return [json.loads(line)["step"] for line in (out / "eval" / "history.jsonl").read_text().splitlines() if line]


@pytest.mark.slow
def test_a_checkpoint_killed_while_scored_is_scored_on_resume(tmp_path):
    recipe = tiny_recipe(tmp_path, {"evaluators": [prs_eval(n=1)]}, max_steps=6)
    out = tmp_path / "out"
    args = ["train", "--config", str(recipe)]
    killed = subprocess.run(
        [sys.executable, "-c", KILLING, *args],
        cwd=ROOT,
        env={**ENV, "KILL_AT_EVAL": "2"},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    assert _history(out) == [2] and (out / "checkpoint-4").is_dir()
    assert not (out / "checkpoint-4" / "eval" / "results.json").exists()

    resumed = subprocess.run(
        [sys.executable, "-m", "proactive_rl.cli", *args, "--resume_from_checkpoint", "true"],
        cwd=ROOT,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert _history(out) == [2, 4, 6]  # without the fix: [2, 6]
    assert "checkpoint-4 was saved but never scored" in resumed.stderr
    scored = json.loads((out / "checkpoint-4" / "eval" / "results.json").read_text())
    assert scored["step"] == 4 and scored["complete"]
