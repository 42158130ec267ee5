"""Bad input fails in one line: the file, the key or record, the fix or the closest name; exit status 2; no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proactive_rl.cli import main

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*/*.yaml"))


def misspelt(key: str) -> str:
    """`key` with its third letter dropped (``learning_rate`` -> ``lerning_rate``)."""
    return key[:2] + key[3:]


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [
        line for line in err.splitlines() if line.strip() and "Warning" not in line and "warnings.warn" not in line
    ]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("recipe", RECIPES, ids=[f"{p.parent.name}/{p.name}" for p in RECIPES])
def test_a_misspelt_key_in_any_shipped_recipe_names_file_key_and_suggestion(recipe, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    raw = yaml.safe_load(recipe.read_text())
    key = next(k for k in raw if len(k) >= 6)
    bad = tmp_path / f"bad_{recipe.name}"
    text = recipe.read_text()
    bad.write_text(re.sub(rf"(?m)^{re.escape(key)}:", f"{misspelt(key)}:", text, count=1))
    assert misspelt(key) in yaml.safe_load(bad.read_text())
    if "output_dir" in raw:  # a training recipe (the model override keeps its missing local folders out of the way)
        rc = main(["train", "--config", str(bad), "--model_name_or_path", "tiny:qwen2_5_vl:xs"])
    else:  # an evaluation recipe
        rc = main(["eval", "--config", str(bad), "--model", "tiny:qwen2_5_vl:xs"])
    line = one_error_line(capsys)
    assert rc == 2
    assert str(bad) in line and re.search(rf"unknown keys? .*`?{misspelt(key)}`?", line), line
    assert f"did you mean `{key}`?" in line, line


def test_a_missing_model_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    bad = tmp_path / "m.yaml"
    bad.write_text((ROOT / "recipes/tiny/sft.yaml").read_text().replace("tiny:qwen2_5_vl:xs", "outputs/no-such-model"))
    assert main(["train", "--config", str(bad)]) == 2
    line = one_error_line(capsys)
    assert f"{bad}: model_name_or_path: no model folder at 'outputs/no-such-model'" in line, line
    assert "pass --model_name_or_path tiny:qwen2_5_vl:xs" in line


def test_a_missing_data_file_names_the_closest_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "accident.json").write_text("[]")
    text = (ROOT / "recipes/tiny/sft.yaml").read_text()
    text = re.sub(r"dataset_mixture:\n(  - .*\n)+", "dataset_mixture:\n  - {source: data/acident.json}\n", text)
    bad = tmp_path / "d.yaml"
    bad.write_text(text)
    assert main(["train", "--config", str(bad), "--max_steps", "1"]) == 2
    line = one_error_line(capsys)
    assert f"{bad}: dataset_mixture[0]: episode file 'data/acident.json' does not exist" in line, line
    assert "did you mean `data/accident.json`?" in line


def test_bad_values_flags_and_recipe_names(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cases = [
        (["--config", "tiny/sf.yaml"], r"tiny/sf.yaml: no such file here and no shipped recipe .* `tiny/sft.yaml`\?"),
        (
            ["--config", "tiny/sft.yaml", "--learnin_rate", "1"],
            r"command line: unknown flag `--learnin_rate`; did you",
        ),
        (["--config", "tiny/sft.yaml", "--learning_rate", "abc"], r"command line: argument --learning_rate.*'abc'"),
        (["--config", "tiny/sft.yaml", "--on_bad_record", "nope"], r"command line: on_bad_record: expected one of"),
    ]
    for argv, pattern in cases:
        assert main(["train", *argv]) == 2, argv
        line = one_error_line(capsys)
        assert re.search(pattern, line), (argv, line)


def test_the_command_prints_one_line_and_exits_2_and_debug_shows_the_traceback(tmp_path):
    bad = tmp_path / "typo.yaml"
    bad.write_text((ROOT / "recipes/tiny/sft.yaml").read_text().replace("learning_rate:", "learnin_rate:"))
    cmd = [sys.executable, "-m", "proactive_rl.cli", "train", "--config", str(bad)]
    env = {k: v for k, v in os.environ.items() if k != "PROACTIVE_RL_DEBUG"}
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert proc.stderr.strip().splitlines()[-1].startswith(f"proactive-rl train: error: {bad}: unknown key")
    assert "did you mean `learning_rate`?" in proc.stderr and "Traceback" not in proc.stderr
    debug = subprocess.run(cmd, cwd=tmp_path, env={**env, "PROACTIVE_RL_DEBUG": "1"}, capture_output=True, text=True)
    assert debug.returncode != 0 and "Traceback" in debug.stderr and "learnin_rate" in debug.stderr
