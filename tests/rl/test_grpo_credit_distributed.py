"""Per-decision advantages with 2 processes (ZeRO-3 on CPU), a group spanning the ranks (docs/spec.md §8; the
experimental trainer, `proactive_rl.experimental`).

One row per rank and G = 2: each group's two rollouts are played on different ranks, so a decision's anchor group
is only known after the ranks' turns are gathered. Each rank records the gathered turns and trajectory advantages
it credited from and the per-step advantages it kept; the test re-applies the estimator (`step_advantages`) to the
gathered rows and checks that the ranks agree on them and that each kept its own row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from proactive_rl.experimental.credit import step_advantages
from tests.support.launching import launch

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys
from proactive_rl.evaluation.shutdown import exit_launched
from proactive_rl.experimental import trainer as experimental
from proactive_rl.experimental.config import ExperimentalStreamingGRPOConfig
from proactive_rl.experimental.trainer import ExperimentalStreamingGRPOTrainer
from proactive_rl.grpo.streaming.windows import build_windows
from proactive_rl.models import build_tiny
from proactive_rl.synthetic import generate_episodes
from tests.support.stand_in import proactive_stand_in

out_dir = sys.argv[1]
episodes = generate_episodes("accident", 2, seed=3, duration=(10, 12))
windows = build_windows(episodes, lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)
calls = []
real = experimental.step_advantages
def recording(turns, advantages, group_size, mode, weight, anchor):
    out = real(turns, advantages, group_size, mode, weight, anchor)
    calls.append({"turns": turns, "advantages": advantages, "per_step": out})
    return out
experimental.step_advantages = recording
kept = []
real_values = experimental.token_values
def keeping(per_step, token_steps, width):
    kept.append(list(per_step))
    return real_values(per_step, token_steps, width)
experimental.token_values = keeping

model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
model = proactive_stand_in(model, processor, respond=0.3)
args = ExperimentalStreamingGRPOConfig(
    output_dir=out_dir, per_device_train_batch_size=1, num_generations=2, max_steps=2, max_turn_tokens=3,
    temperature=1.5, learning_rate=1e-3, logging_steps=1, report_to="none", save_strategy="no", bf16=False, seed=0,
    advantage="decision", ddp_backend="gloo",
)
trainer = ExperimentalStreamingGRPOTrainer(model=model, args=args, windows=windows, processing_class=processor)
trainer.train()
rank = trainer.accelerator.process_index
with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
    json.dump({"calls": calls, "kept": kept, "steps": trainer.state.global_step}, f)
sys.exit(exit_launched(0))
"""


@pytest.mark.distributed
@pytest.mark.slow
def test_decision_advantages_of_a_group_spanning_two_ranks(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.update(HF_HUB_OFFLINE="1", WANDB_MODE="disabled")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "launch" / "zero3.yaml")]
    cmd += ["--num_processes", "2", "--main_process_port", "29519", str(script), str(tmp_path)]
    try:
        proc = launch(cmd, cwd=ROOT, env=env, timeout=800)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"2-process streaming GRPO with decision advantages hung\n{(e.stderr or '')[-4000:]}")
    assert proc.returncode == 0, proc.stderr[-6000:]
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["steps"] for r in ranks] == [2, 2]
    assert len(ranks[0]["calls"]) == len(ranks[1]["calls"]) == 2
    for step, (first, second) in enumerate(zip(ranks[0]["calls"], ranks[1]["calls"])):
        assert first["turns"] == second["turns"] and first["advantages"] == second["advantages"]  # gathered alike
        assert len(first["turns"]) == 2  # one row from each rank: the group spans them
        assert first["per_step"] == step_advantages(first["turns"], first["advantages"], 2, "decision", 1.0)
        for rank in (0, 1):  # each rank laid its own row's per-step advantages on its tokens
            assert ranks[rank]["kept"][step] == first["per_step"][rank]
    split = [c for c in ranks[0]["calls"] if c["turns"][0] != c["turns"][1] and any(c["advantages"])]
    assert split, "no step had rollouts that differed: the test would not see a decision's credit"
