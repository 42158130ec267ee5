"""A user's common mistakes, as a user meets them: the command run in a subprocess from an empty folder, offline.

Each exits with status 2 in seconds (the checks run before any model loads), with one line that names the key, file
or model id and the fix, and no traceback. A training recipe given to ``proactive-rl eval`` evaluates its held-out
data, or names the ``eval_callback`` block it needs.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
SFT = (ROOT / "recipes/tiny/sft.yaml").read_text()
# The same training recipe without its evaluation block: what `proactive-rl eval` must resolve on its own.
SFT_NO_EVAL = SFT.split("# --- evaluation while training")[0]
# A mistake is reported before any model loads: the interpreter's imports (torch, transformers, TRL), seconds on an
# idle machine (more on a shared one); the Hub's retries alone used to take 146 s.
LIMIT_S = 120


def run(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``proactive-rl ARGS`` from `cwd`, offline, with an empty Hugging Face cache."""
    env = {k: v for k, v in os.environ.items() if k != "PROACTIVE_RL_DEBUG"}
    env.update(HF_HUB_OFFLINE="1", HF_HOME=str(cwd / ".hf_home"))
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "proactive_rl.cli", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    proc.seconds = time.monotonic() - start
    return proc


def error_line(proc: subprocess.CompletedProcess) -> str:
    """The one error line of a failed command (exit 2, in time, no traceback)."""
    lines = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.seconds < LIMIT_S, f"{proc.seconds:.0f} s"
    return lines[0]


def recipe(tmp_path: Path, text: str, name: str = "my_sft.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_misspelt_key(tmp_path):
    bad = recipe(tmp_path, SFT.replace("learning_rate:", "learnin_rate:"))
    line = error_line(run(["train", "--config", str(bad)], tmp_path))
    assert f"{bad}: unknown key `learnin_rate`; did you mean `learning_rate`?" in line, line


def test_a_missing_data_file(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "accident.json").write_text("[]")
    text = re.sub(r"dataset_mixture:\n(  - .*\n)+", "dataset_mixture:\n  - {source: data/acident.json}\n", SFT)
    bad = recipe(tmp_path, text.replace("tiny:qwen2_5_vl:xs", "Qwen/Qwen2.5-VL-3B-Instruct"))
    line = error_line(run(["train", "--config", str(bad)], tmp_path))  # the data is checked before the model
    assert "dataset_mixture[0]: episode file 'data/acident.json' does not exist" in line, line
    assert "did you mean `data/accident.json`?" in line, line


def test_a_missing_model_folder(tmp_path):
    line = error_line(run(["train", "--config", "tiny/sft.yaml", "--model_name_or_path", "outputs/nope"], tmp_path))
    assert "command line: model_name_or_path: no model folder at 'outputs/nope'" in line, line
    assert "pass --model_name_or_path tiny:qwen2_5_vl:xs" in line, line


def test_eval_names_a_missing_model_path_and_the_checkpoints_there(tmp_path):
    (tmp_path / "out" / "checkpoint-2").mkdir(parents=True)
    config = recipe(tmp_path, "evaluators: [{type: prs, episodes: [{source: x.json}]}]\n", "ev.yaml")
    line = error_line(run(["eval", "--config", str(config), "--model", "out/checkpoint-3"], tmp_path))
    assert "--model: no model folder at 'out/checkpoint-3'" in line, line
    assert "checkpoints there: out/checkpoint-2" in line and "model_name_or_path" not in line, line


def test_a_hub_id_offline(tmp_path):
    model = "Qwen/Qwen2.5-VL-3B-Instruct"
    line = error_line(run(["train", "--config", "tiny/sft.yaml", "--model_name_or_path", model], tmp_path))
    expected = f"command line: model_name_or_path: '{model}' is not in the local Hugging Face cache and HF_HUB_OFFLINE"
    assert expected in line, line
    assert f"hf download {model}" in line and "pass --model_name_or_path a local folder" in line, line


def test_a_truncated_json_file(tmp_path):
    (tmp_path / "eps.json").write_text('[{"id": "e0", "video": "e0.mp4"')
    text = re.sub(r"dataset_mixture:\n(  - .*\n)+", "dataset_mixture:\n  - {source: eps.json}\n", SFT)
    bad = recipe(tmp_path, text)
    line = error_line(run(["train", "--config", str(bad)], tmp_path))
    assert "eps.json: invalid JSON" in line, line
    line = error_line(run(["eval", "--episodes", "eps.json", "--model", "tiny:qwen2_5_vl:xs"], tmp_path))
    assert "eps.json: invalid JSON" in line, line


def test_a_negative_learning_rate_in_the_recipe(tmp_path):
    bad = recipe(tmp_path, re.sub(r"(?m)^learning_rate: .*$", "learning_rate: -1.0e-3", SFT))
    line = error_line(run(["train", "--config", str(bad)], tmp_path))
    assert f"{bad}: learning_rate: must be > 0, got -0.001" in line, line


def test_a_negative_learning_rate_on_the_command_line(tmp_path):
    good = recipe(tmp_path, SFT)
    line = error_line(run(["train", "--config", str(good), "--learning_rate", "-1e-3"], tmp_path))
    assert "command line: learning_rate: must be > 0, got -0.001" in line and str(good) not in line, line


def test_a_synthetic_task_typo(tmp_path):
    bad = recipe(tmp_path, SFT.replace("task: accident,", "task: acident,", 1))
    line = error_line(run(["train", "--config", str(bad)], tmp_path))
    assert "dataset_mixture[0].task: no synthetic task 'acident'; did you mean `accident`?" in line, line


def test_a_gpu_recipe_on_a_cpu_machine(tmp_path):
    import torch
    from transformers.utils import is_flash_attn_2_available

    if torch.cuda.is_available() or is_flash_attn_2_available():
        pytest.skip("this machine has a GPU")
    line = error_line(run(["train", "--config", "p3i_assistant/sft_qwen3vl_4b.yaml"], tmp_path))
    assert "bf16: true (in the recipe) needs a GPU" in line and "pass --bf16 false" in line, line
    assert "attn_implementation: flash_attention_2" in line and "pass --attn_implementation sdpa" in line, line


def test_eval_on_a_training_recipe_without_held_out_data_names_the_block(tmp_path):
    config = recipe(tmp_path, SFT_NO_EVAL)
    line = error_line(run(["eval", "--config", str(config), "--model", "tiny:qwen2_5_vl:xs"], tmp_path))
    assert "a training recipe with no `eval_callback` block" in line and "eval_callback: {evaluators:" in line, line


def test_eval_on_a_training_recipe_evaluates_its_held_out_data(tmp_path):
    held_out = "eval_mixture:\n  - {source: synthetic, task: accident, num_episodes: 1, seed: 9, knobs: {duration: [10, 10]}}\n"
    config = recipe(tmp_path, SFT_NO_EVAL + held_out)
    proc = run(
        ["eval", "--config", str(config), "--model", "tiny:qwen2_5_vl:xs", "--out", "o", "--no-plots"], tmp_path
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert list(results["evaluators"]) == ["prs"] and results["evaluators"]["prs"]["status"] == "ok"


def test_recipes_cp_names_the_command_of_the_recipe(tmp_path):
    proc = run(["recipes", "cp", "pvqa/pauc_rule_judge.yaml", "mine.yaml"], tmp_path)
    assert proc.returncode == 0 and "run it with: proactive-rl eval --config mine.yaml --model" in proc.stdout
    proc = run(["recipes", "cp", "tiny/sft.yaml", "my_sft.yaml"], tmp_path)
    assert proc.returncode == 0 and "run it with: proactive-rl train --config my_sft.yaml" in proc.stdout


def test_a_checkpoint_that_does_not_match_the_model(tmp_path):
    """transformers' default ``_tied_weights_keys`` is None: the intended message, not a TypeError."""
    import torch

    from proactive_rl.errors import InputError
    from proactive_rl.models import build_tiny
    from proactive_rl.training import load_checkpoint_weights

    saved, _ = build_tiny("qwen2_5_vl", "xs")
    saved.save_pretrained(tmp_path / "checkpoint-1")
    target, _ = build_tiny("qwen2_5_vl", "xs")
    target.extra = torch.nn.Linear(2, 2)  # a parameter the checkpoint does not hold
    target._tied_weights_keys = None
    trainer = SimpleNamespace(
        accelerator=SimpleNamespace(unwrap_model=lambda m: m), model=target, is_fsdp_enabled=False
    )
    trainer.is_deepspeed_enabled = False
    with pytest.raises(InputError, match=r"checkpoint-1: checkpoint does not match the model \(missing \['extra"):
        load_checkpoint_weights(trainer, str(tmp_path / "checkpoint-1"))


def test_the_recipe_values_every_shipped_recipe_keeps():
    """The value checks reject none of the shipped training recipes (their own values are valid)."""
    from proactive_rl.recipe_args import VALUE_RULES

    for path in sorted((ROOT / "recipes").glob("*/*.yaml")):
        raw = yaml.safe_load(path.read_text())
        for key, ok, rule in VALUE_RULES:
            if isinstance(raw.get(key), (int, float)):
                assert ok(raw[key]), (path, key, raw[key], rule)
