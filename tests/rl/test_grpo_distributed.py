"""Streaming GRPO under ZeRO-3 with 2 CPU processes.

The two ranks roll out different windows -- a 3-step accident window with no prefix and a 4-step count window with
its whole history as prefix -- so they decode different numbers of tokens and turns, and their trajectories have
different lengths. Generation runs on gathered parameters on every rank (ZeRO-3's per-layer gathers would deadlock
otherwise); the training forward/backward is collective. The run must finish its steps within the timeout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.launching import launch

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import dataclasses, json, os, sys
import torch
from proactive_rewards.types import Target
from proactive_rl.evaluation.shutdown import exit_launched
from proactive_rl.grpo.streaming import trainer as streaming
from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
from proactive_rl.grpo.streaming.windows import build_windows
from proactive_rl.models import build_tiny
from proactive_rl.synthetic import generate_episodes

out_dir = sys.argv[1]
acc = generate_episodes("accident", 1, seed=7, duration=(10, 10))[0]
cnt = generate_episodes("atomic", 1, seed=7, duration=(10, 10))[0]
acc = dataclasses.replace(acc, targets=[Target(1.0, "Warning")])
cnt = dataclasses.replace(cnt, targets=[Target(7.0, "1")])
windows = build_windows([acc, cnt], lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)
assert [len(w.episode.targets) for w in windows] == [1, 1]

records = []
real_rollout = streaming.rollout_window
def recording_rollout(*args, **kwargs):
    trajs = real_rollout(*args, **kwargs)
    records.append([[t.num_responses, len(t.prompt_ids) + len(t.completion_ids), len(t.texts)] for t in trajs])
    return trajs
streaming.rollout_window = recording_rollout

model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
args = StreamingGRPOConfig(
    output_dir=out_dir, per_device_train_batch_size=2, num_generations=2, max_steps=2, max_turn_tokens=3,
    learning_rate=1e-3, logging_steps=1, report_to="none", save_strategy="no", bf16=False, seed=0,
    ddp_backend="gloo",  # DeepSpeed on CPU (DS_ACCELERATOR=cpu): accelerate needs the backend named
)
trainer = streaming.StreamingGRPOTrainer(model=model, args=args, windows=windows, processing_class=processor)
trainer.train()
rank = trainer.accelerator.process_index
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
    json.dump({"records": records, "steps": trainer.state.global_step,
               "deepspeed": trainer.is_deepspeed_enabled}, f)
sys.exit(exit_launched(0))  # as the entry points end (proactive_rl.evaluation.shutdown)
"""


@pytest.mark.distributed
@pytest.mark.slow
def test_zero3_two_processes_with_uneven_rollouts(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {
        **os.environ,
        "DS_ACCELERATOR": "cpu",
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "HF_HUB_OFFLINE": "1",
        "WANDB_MODE": "disabled",
    }
    accelerate = [sys.executable, "-m", "accelerate.commands.launch"]
    cmd = accelerate + [
        "--config_file",
        str(ROOT / "launch" / "zero3.yaml"),
        "--num_processes",
        "2",
        "--main_process_port",
        "29517",
        str(script),
        str(tmp_path),
    ]
    try:
        proc = launch(cmd, cwd=ROOT, env=env, timeout=800)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"2-process ZeRO-3 streaming GRPO hung (no exit in 800 s)\n{(e.stderr or '')[-4000:]}")
    assert proc.returncode == 0, proc.stderr[-6000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert all(r["steps"] == 2 and r["deepspeed"] for r in ranks)
    # per step, the two ranks' rollouts differed in non-silent turns and in trajectory length
    per_step = list(zip(ranks[0]["records"], ranks[1]["records"]))
    assert len(per_step) == 2
    for a, b in per_step:
        assert sum(x[0] for x in a) != sum(x[0] for x in b) or sum(x[2] for x in a) != sum(x[2] for x in b)
        assert {x[1] for x in a} != {x[1] for x in b}
