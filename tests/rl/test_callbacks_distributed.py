"""`ProactiveEvalCallback` under DeepSpeed ZeRO-3 with 2 CPU processes.

The tiny recipe runs 2 steps under ``accelerate launch --config_file launch/zero3.yaml --num_processes 2`` (DeepSpeed's
CPU accelerator, gloo) with the callback evaluating at every step and on save, on 3 episodes and 3 environments (an
uneven 2 / 1 split). Each rank dumps the results its callback returned. Both ranks must hold the same numbers, each
must have generated its own shard, and the numbers (and predictions) must equal those of a 1-process evaluation of the
saved checkpoint and of `proactive-rl eval --watch` under a 2-process `accelerate launch`: sharding, gathering and
ZeRO-3 parameter gathering change nothing.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.support.launching import launch

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SCRIPT = """
import json, sys
from pathlib import Path
from accelerate import PartialState
from proactive_rl.evaluation import ProactiveEvalCallback
from proactive_rl.evaluation.shutdown import exit_launched
from proactive_rl.sft.main import build_trainer, make_parser

trainer = build_trainer(*make_parser().parse_args_and_config(sys.argv[1:]))
trainer.train()
[callback] = [c for c in trainer.callback_handler.callbacks if isinstance(c, ProactiveEvalCallback)]
state = PartialState()
dump = {
    "rank": state.process_index,
    "num_processes": state.num_processes,
    "zero3": trainer.is_deepspeed_enabled and trainer.accelerator.state.deepspeed_plugin.zero_stage == 3,
    "history": [
        {k: r[k] for k in ("step", "metrics", "complete", "incomplete", "num_processes")}
        | {"items_per_rank": {n: e.get("items_per_rank") for n, e in r["evaluators"].items()}}
        for r in callback.history
    ],
}
Path(trainer.args.output_dir, f"rank{state.process_index}.json").write_text(json.dumps(dump))
sys.exit(exit_launched(0))  # as the entry points end (proactive_rl.evaluation.shutdown)
"""


@pytest.mark.distributed
@pytest.mark.slow
def test_zero3_two_processes_agree_and_match_one_process(tmp_path):
    from test_callbacks import prs_eval, tiny_recipe

    mcqa = {"type": "mcqa", "environments": [{"kind": "occlusion", "n": 3, "seed": 0}], "max_new_tokens": 4}
    block = {"evaluators": [prs_eval(n=3), mcqa], "every_n_steps": 1}
    recipe = tiny_recipe(tmp_path, block, max_steps=2, save_steps=2)
    script = tmp_path / "train_dump.py"
    script.write_text(SCRIPT)
    cmd = [str(BIN / "accelerate"), "launch", "--config_file", "launch/zero3.yaml", "--num_processes", "2"]
    cmd += [str(script), "--config", str(recipe), "--use_cpu", "false", "--ddp_backend", "gloo"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "DS_ACCELERATOR": "cpu", "TOKENIZERS_PARALLELISM": "false"}
    proc = launch(cmd, cwd=ROOT, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]

    out = tmp_path / "out"
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(d["zero3"] and d["num_processes"] == 2 for d in ranks)
    assert ranks[0]["history"] == ranks[1]["history"]  # both ranks hold the same numbers
    history = ranks[0]["history"]
    assert [h["step"] for h in history] == [1, 2]  # step 2: every_n_steps and on_save evaluate once
    for h in history:
        assert h["complete"], h["incomplete"]
        assert h["num_processes"] == 2
        assert h["items_per_rank"] == {"prs": [2, 1], "mcqa": [2, 1]}  # every rank generated its shard
    # the step-2 evaluation reached the checkpoint too (copied, not re-run)
    saved = json.loads((out / "checkpoint-2" / "eval" / "results.json").read_text())
    assert saved["metrics"] == history[1]["metrics"]

    # a 1-process evaluation of the saved (ZeRO-3 gathered) checkpoint gives the same numbers and decisions
    from proactive_rl.evaluation import EvalCallbackConfig, build_evaluators, evaluate_model
    from proactive_rl.evaluation.command import load_checkpoint

    model, processor = load_checkpoint(out / "checkpoint-2")
    evaluators = build_evaluators(EvalCallbackConfig.from_dict(block).evaluators)
    single = evaluate_model(model, processor, evaluators, out_dir=tmp_path / "single", step=2)
    assert single["metrics"] == pytest.approx(history[1]["metrics"])
    for name in ("prs/predictions.jsonl", "mcqa/outcomes.jsonl"):
        assert (tmp_path / "single" / name).read_text() == (out / "checkpoint-2" / "eval" / name).read_text()

    # `proactive-rl eval --watch` under accelerate launch (2 CPU processes): same numbers, the work shared by both
    cmd = [str(BIN / "accelerate"), "launch", "--config_file", "launch/ddp.yaml", "--num_processes", "2"]
    cmd += ["-m", "proactive_rl.cli", "eval", "--config", str(recipe), "--watch", str(out), "--once", "--settle", "0"]
    cmd += ["--out", str(tmp_path / "watch")]
    proc = launch(cmd, cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    assert "evaluated 1 checkpoint(s)" in proc.stdout
    watched = json.loads((tmp_path / "watch" / "checkpoint-2" / "results.json").read_text())
    assert watched["num_processes"] == 2 and watched["evaluators"]["prs"]["items_per_rank"] == [2, 1]
    assert watched["metrics"] == pytest.approx(history[1]["metrics"])
    for name in ("prs/predictions.jsonl", "mcqa/outcomes.jsonl"):
        assert (tmp_path / "watch" / "checkpoint-2" / name).read_text() == (
            out / "checkpoint-2" / "eval" / name
        ).read_text()
