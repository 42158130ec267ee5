"""The tiny recipe under `accelerate launch` with 2 CPU processes: DDP (gloo), DeepSpeed ZeRO-2 and ZeRO-3 (acceptance 3).

Each 2-process run (per-device batch 2) must give the loss trajectory of the 1-process run (batch 4) at the same
global batch: data order, global loss normalisation (docs/spec.md §3) and gradient averaging all line up. Tolerance 1e-4
(fp32; padding to different widths and reduction order change the last bits).
"""

import json
import os
import sys
from pathlib import Path

import pytest

from tests.support.launching import launch

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STEPS = ["--config", "recipes/tiny/sft.yaml", "--max_steps", "3", "--logging_steps", "1", "--save_strategy", "no"]
STEPS += ["--disable_tqdm", "true", "--report_to", "none"]
TOL = 1e-4


def run(cmd, out_dir, env_extra=None):
    env = {**os.environ, "OMP_NUM_THREADS": "1", **(env_extra or {})}
    proc = launch(cmd + ["--output_dir", str(out_dir)], cwd=ROOT, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    history = json.loads((out_dir / "trainer_state.json").read_text())["log_history"]
    return [h["loss"] for h in history if "loss" in h], proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("single")
    losses, _ = run([sys.executable, "-m", "proactive_rl.sft", *STEPS, "--per_device_train_batch_size", "4"], out)
    assert len(losses) == 3
    return losses


LAUNCHES = {
    "ddp": (["launch/ddp.yaml"], [], {}),
    "zero2": (["launch/zero2.yaml"], ["--use_cpu", "false", "--ddp_backend", "gloo"], {"DS_ACCELERATOR": "cpu"}),
    "zero3": (["launch/zero3.yaml"], ["--use_cpu", "false", "--ddp_backend", "gloo"], {"DS_ACCELERATOR": "cpu"}),
}


@pytest.mark.distributed
@pytest.mark.slow
@pytest.mark.parametrize("name", list(LAUNCHES))
def test_two_processes_match_one(name, reference, tmp_path):
    config, extra, env = LAUNCHES[name]
    cmd = [str(BIN / "accelerate"), "launch", "--num_processes", "2", "--config_file", *config]
    cmd += ["-m", "proactive_rl.sft", *STEPS, "--per_device_train_batch_size", "2", *extra]
    losses, log = run(cmd, tmp_path, env)
    assert losses == pytest.approx(reference, abs=TOL), (losses, reference)
    if name.startswith("zero"):
        assert "DeepSpeed accelerator: cpu" in log
