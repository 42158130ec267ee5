"""Exact resume of both GRPO trainers under DeepSpeed ZeRO-3 with 2 CPU processes (`proactive_rl.grpo.resume_state`).

Three launches per trainer: an uninterrupted 4-step run; the same run with rank 1 killed by SIGKILL at the start of
step 3 (after ``checkpoint-2`` is complete on both ranks), which the launcher reports as a failure; and a relaunch
with ``resume_from_checkpoint=checkpoint-2``. The resumed run must end with the uninterrupted run's weights (the
gathered ZeRO-3 model, max |Δw| ≤ 1e-6) and log the same metrics at steps 3 and 4; the weights must have moved after
the checkpoint (so the comparison can fail).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import torch
from launching import launch
from safetensors.torch import load_file
from test_grpo_resume import TIMING, TOL, same_logs

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, signal, sys
from pathlib import Path
from transformers import TrainerCallback
from proactive_rl.evaluation.shutdown import exit_launched

kind, out, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if kind == "streaming":
    sys.path.insert(0, "benchmarks")  # stand_in.py (the launch runs in the repository root)
    from stand_in import proactive_stand_in
    from proactive_rl.grpo.streaming.config import StreamingGRPOConfig
    from proactive_rl.grpo.streaming.trainer import StreamingGRPOTrainer
    from proactive_rl.grpo.streaming.windows import build_windows
    from proactive_rl.models import build_tiny
    from proactive_rl.synthetic import generate_episodes

    eps = generate_episodes("accident", 2, seed=3, duration=(10, 12)) + generate_episodes("atomic", 2, seed=3, duration=(10, 12))
    windows = build_windows(eps, lead_s=2, tail_s=1, max_window_s=4, prefix_s=2)
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    model = proactive_stand_in(model, processor, respond=0.3)
    args = StreamingGRPOConfig(
        output_dir=out, per_device_train_batch_size=2, num_generations=2, max_steps=4, max_turn_tokens=3,
        learning_rate=1e-3, temperature=1.0, logging_steps=1, report_to="none", save_strategy="steps", save_steps=2,
        bf16=False, seed=0, ddp_backend="gloo", disable_tqdm=True,
    )
    trainer = StreamingGRPOTrainer(model=model, args=args, windows=windows, processing_class=processor)
else:
    from proactive_rl.grpo.suggestion.main import build_trainer, make_parser

    argv = ["--config", sys.argv[4], "--output_dir", out, "--use_cpu", "false", "--ddp_backend", "gloo"]
    trainer = build_trainer(*make_parser().parse_args_and_config(argv))


class KillRank1(TrainerCallback):
    def on_step_begin(self, args, state, control, **kw):
        if state.global_step == 2:
            trainer.accelerator.wait_for_everyone()  # checkpoint-2 is complete on every rank
            if trainer.accelerator.process_index == 1:
                os.kill(os.getpid(), signal.SIGKILL)


if mode == "kill":
    trainer.add_callback(KillRank1())
trainer.train(resume_from_checkpoint=os.path.join(out, "checkpoint-2") if mode == "resume" else None)
trainer.save_model(os.path.join(out, "final"))  # ZeRO-3: the gathered weights
if trainer.accelerator.is_main_process:
    Path(out, "history.json").write_text(json.dumps(trainer.state.log_history))
sys.exit(exit_launched(0))
"""


def suggestion_recipe(tmp_path: Path) -> Path:
    from test_grpo_eval_callback import suggestion_recipe as shortened

    replay = [
        {"source": "synthetic", "task": "accident", "num_episodes": 3, "seed": 5, "knobs": {"duration": [10, 10]}}
    ]
    fields = dict(max_steps=4, save_steps=2, replay_mixture=replay, temperature=1.5, per_device_train_batch_size=2)
    return shortened(tmp_path, None, **fields)


def run(script: Path, kind: str, out: Path, mode: str, port: int, recipe: Path | None):
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ROOT / "launch" / "zero3.yaml")]
    cmd += ["--num_processes", "2", "--main_process_port", str(port), str(script), kind, str(out), mode]
    cmd += [str(recipe)] if recipe else []
    env = {**os.environ, "DS_ACCELERATOR": "cpu", "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    env |= {"HF_HUB_OFFLINE": "1", "WANDB_MODE": "disabled"}
    return launch(cmd, cwd=ROOT, env=env, timeout=900)


def step_logs(out: Path, steps) -> list[dict]:
    history = json.loads((out / "history.json").read_text())
    rows = [h for h in history if "loss" in h and h["step"] in steps]
    return [{k: v for k, v in sorted(h.items()) if not any(t in k for t in TIMING)} for h in rows]


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.parametrize("kind, port", [("streaming", 29541), ("suggestion", 29544)])
def test_zero3_rank_killed_after_checkpoint_resumes_exactly(kind, port, tmp_path):
    script = tmp_path / "run.py"
    script.write_text(SCRIPT)
    recipe = suggestion_recipe(tmp_path) if kind == "suggestion" else None
    straight = run(script, kind, tmp_path / "a", "straight", port, recipe)
    assert straight.returncode == 0, straight.stderr[-6000:]
    killed = run(script, kind, tmp_path / "b", "kill", port + 1, recipe)
    assert killed.returncode != 0 and not (tmp_path / "b" / "final").exists(), killed.stderr[-3000:]
    assert (tmp_path / "b" / "checkpoint-2" / "proactive_rl_state_1.pt").is_file()
    resumed = run(script, kind, tmp_path / "b", "resume", port + 2, recipe)
    assert resumed.returncode == 0, resumed.stderr[-6000:]

    a = load_file(tmp_path / "a" / "final" / "model.safetensors")
    b = load_file(tmp_path / "b" / "final" / "model.safetensors")
    assert a.keys() == b.keys()
    dw = max((a[k].float() - b[k].float()).abs().max().item() for k in a)
    print(f"{kind}: max |dw| resumed vs uninterrupted (2 processes, ZeRO-3): {dw:.3g}")
    assert dw <= TOL
    same_logs(step_logs(tmp_path / "b", {3, 4}), step_logs(tmp_path / "a", {3, 4}))
    saved = load_file(tmp_path / "b" / "checkpoint-2" / "model.safetensors")
    moved = max((saved[k].float() - b[k].float()).abs().max().item() for k in saved.keys() & b.keys())
    assert moved > 1e-5, "the weights did not change after the checkpoint: the comparison could not fail"
    assert torch.isfinite(torch.tensor(dw))
