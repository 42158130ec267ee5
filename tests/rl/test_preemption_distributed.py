"""SIGTERM to one rank of a 2-process streaming GRPO run under ZeRO-3 (CPU): both ranks save the step it reached
and exit with the requeue status, and the same launch with ``resume_from_checkpoint="true"`` ends with the
uninterrupted run's weights (`proactive_rl.preemption`: the ranks agree at the end of every step). Launched as
`tests/rl/test_grpo_resume_distributed.py` launches.

Rank 1 alone is signalled, during step 2 (saves are every 3 steps, so ``checkpoint-2`` can only be the
pre-emption's). The launcher reports the workers' status 75 as its own failure; the script's own status is read
from each rank's marker file.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from launching import launch
from safetensors.torch import load_file
from test_grpo_resume import TOL, same_logs
from test_grpo_resume_distributed import ROOT, step_logs

from proactive_rl.checkpoints import missing_parts
from proactive_rl.grpo.resume_state import STATE_FILE

SCRIPT = r"""
import json, logging, os, signal, sys
from pathlib import Path
from transformers import TrainerCallback
from proactive_rl.evaluation.shutdown import exit_launched
from proactive_rl.preemption import Preempted, REQUEUE_EXIT_CODE

sys.path.insert(0, "benchmarks")  # stand_in.py (the launch runs in the repository root)
from stand_in import proactive_stand_in
from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer
from proactive_rl.grpo.streaming.windows import build_windows
from proactive_rl.models import build_tiny
from proactive_rl.synthetic import generate_episodes

logging.basicConfig(level=logging.INFO)
out, mode = sys.argv[1], sys.argv[2]
eps = generate_episodes("accident", 2, seed=3, duration=(10, 12)) + generate_episodes("atomic", 2, seed=3, duration=(10, 12))
windows = build_windows(eps, lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)
model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
model = proactive_stand_in(model, processor, respond=0.3)
args = StreamingGRPOConfig(
    output_dir=out, per_device_train_batch_size=2, num_generations=2, max_steps=4, max_turn_tokens=3,
    learning_rate=1e-3, temperature=1.0, logging_steps=1, report_to="none", save_strategy="steps", save_steps=3,
    bf16=False, seed=0, ddp_backend="gloo", disable_tqdm=True,
)
trainer = StreamingGRPOTrainer(model=model, args=args, windows=windows, processing_class=processor)
rank = trainer.accelerator.process_index


class SignalRank1(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        if state.global_step == 1 and rank == 1:
            os.kill(os.getpid(), signal.SIGTERM)


if mode == "signal":
    trainer.add_callback(SignalRank1())
try:
    trainer.train(resume_from_checkpoint="true" if mode == "resume" else None)
except Preempted as stop:
    Path(out, f"preempted_{rank}.txt").write_text(f"{stop.step}")
    sys.exit(exit_launched(REQUEUE_EXIT_CODE))
trainer.save_model(os.path.join(out, "final"))  # ZeRO-3: the gathered weights
if trainer.accelerator.is_main_process:
    Path(out, "history.json").write_text(json.dumps(trainer.state.log_history))
sys.exit(exit_launched(0))
"""


def run(script: Path, out: Path, mode: str, port: int):
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "launch" / "zero3.yaml")]
    cmd += ["--num_processes", "2", "--main_process_port", str(port), str(script), str(out), mode]
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env |= {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    return launch(cmd, cwd=ROOT, env=env, timeout=900)


@pytest.mark.distributed
@pytest.mark.slow
def test_zero3_sigterm_on_one_rank_saves_on_both_and_true_resumes_exactly(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    straight = run(script, tmp_path / "a", "straight", 29561)
    assert straight.returncode == 0, straight.stderr[-6000:]
    stopped = run(script, tmp_path / "b", "signal", 29562)
    assert stopped.returncode != 0, stopped.stderr[-3000:]  # the launcher's failure for the workers' 75
    # both ranks stopped after step 2 and saved it together (rank 0 was never signalled)
    assert [(tmp_path / "b" / f"preempted_{r}.txt").read_text() for r in (0, 1)] == ["2", "2"], stopped.stderr[-6000:]
    checkpoint = tmp_path / "b" / "checkpoint-2"
    assert missing_parts(checkpoint, (STATE_FILE,)) is None
    assert (checkpoint / STATE_FILE.format(rank=1)).is_file()
    assert not (tmp_path / "b" / "final").exists() and not list((tmp_path / "b").glob("tmp-*"))
    resumed = run(script, tmp_path / "b", "resume", 29563)
    assert resumed.returncode == 0, resumed.stderr[-6000:]
    assert f"resuming from {checkpoint}" in resumed.stderr

    a = load_file(tmp_path / "a" / "final" / "model.safetensors")
    b = load_file(tmp_path / "b" / "final" / "model.safetensors")
    assert a.keys() == b.keys()
    dw = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    print(f"max |dw| resumed after SIGTERM vs uninterrupted (2 processes, ZeRO-3): {dw:.3g}")
    assert dw <= TOL
    same_logs(step_logs(tmp_path / "b", {3, 4}), step_logs(tmp_path / "a", {3, 4}))
    saved = load_file(checkpoint / "model.safetensors")
    moved = max((saved[k].float() - b[k].float()).abs().max().item() for k in saved.keys() & b.keys())
    assert moved > 1e-5, "the weights did not change after the checkpoint: the comparison could not fail"
