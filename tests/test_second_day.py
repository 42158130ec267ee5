"""A researcher's second day (issue 57): what `proactive-rl` did to a user's results and input, as they met it.

Each command runs in a subprocess, offline. An input mistake exits with status 2 and one line naming the file and the
fix, with no traceback, before any model loads.

1. `proactive-rl eval` never writes over another run's results: a new folder per run by default, the training
   callback's ``results.json`` and ``history.jsonl`` byte-identical afterwards, an ``--out`` holding another run's
   results refused unless ``--overwrite``, a killed run resumed by running it again.
2. Eval with missing data fails before the model loads (the model folder here cannot be loaded at all).
3. A key set twice, a ``--config`` folder, an ``output_dir`` that is a file (the fuzz: tests/rl/test_recipe_fuzz.py).
5. ``proactive-rl recipes`` shows the launch commands as docs/training.md spells them, runnable from any folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EPISODES = {"source": "synthetic", "task": "atomic", "num_episodes": 1, "seed": 9, "knobs": {"duration": [10, 10]}}
EVALUATOR = {"type": "prs", "episodes": [EPISODES], "max_new_tokens": 2}
# A recipe mistake is reported before torch is imported: well under a second on an idle machine.
RECIPE_LIMIT_S = 20
# `proactive-rl eval` checks its data after importing the evaluation package (torch, transformers: ~10 s idle on a
# 2-core machine, more when it is shared); the model never loads (`test_eval_with_missing_data_...` proves it).
EVAL_LIMIT_S = 60


def run(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    """``proactive-rl ARGS`` from `cwd`, offline."""
    env = {k: v for k, v in os.environ.items() if k != "PROACTIVE_RL_DEBUG"}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "proactive_rl.cli", *args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
    proc.seconds = time.monotonic() - start
    return proc


def error_line(proc: subprocess.CompletedProcess, limit_s: float) -> str:
    lines = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.seconds < limit_s, f"{proc.seconds:.0f} s"
    return lines[0]


def digests(*roots: Path) -> dict[str, str]:
    """sha256 of every file under `roots` (a file root: itself)."""
    files = [f for root in roots for f in ([root] if root.is_file() else sorted(root.rglob("*"))) if f.is_file()]
    return {str(f): hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


# --- 1. eval never overwrites the training callback's scores ----------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run folder whose checkpoint-2 holds the training callback's evaluation (written by the callback's code)."""
    from proactive_rl.evaluation import EvalCallbackConfig, ProactiveEvalCallback, build_evaluators, evaluate_model
    from proactive_rl.models import build_tiny

    root = tmp_path_factory.mktemp("second_day")
    run_dir = root / "run"
    checkpoint = run_dir / "checkpoint-2"
    model, processor = build_tiny("qwen2_5_vl", "xs", seed=0)
    model.save_pretrained(checkpoint)
    processor.save_pretrained(checkpoint)
    config = EvalCallbackConfig.from_dict({"evaluators": [EVALUATOR]})
    callback = ProactiveEvalCallback(config)
    out = checkpoint / "eval"
    results = evaluate_model(
        model, processor, build_evaluators(config.evaluators), out_dir=out, step=2, plots=False,
        meta={"trigger_dir": str(out)},
    )  # fmt: skip
    callback._append_history(run_dir / "eval" / "history.jsonl", results, 1.0)
    recipe = root / "my_eval.yaml"
    recipe.write_text(json.dumps({"evaluators": [EVALUATOR]}))
    return {"root": root, "run": run_dir, "checkpoint": checkpoint, "recipe": recipe}


def test_eval_writes_a_new_folder_per_run_and_never_the_callbacks_files(trained):
    checkpoint, root = trained["checkpoint"], trained["root"]
    callback_files = digests(checkpoint / "eval", trained["run"] / "eval" / "history.jsonl")
    assert str(checkpoint / "eval" / "results.json") in callback_files
    args = ["eval", "--config", str(trained["recipe"]), "--model", str(checkpoint), "--no-plots"]
    folders = []
    for _ in range(2):
        proc = run(args, root)
        assert proc.returncode == 0, proc.stderr[-3000:]
        written = re.search(r"of this run: (\S+)/results\.json$", proc.stdout.strip().splitlines()[-1])
        assert written, proc.stdout[-2000:]  # the last line says where the results are
        folder = Path(written.group(1))
        folder = folder if folder.is_absolute() else root / folder
        assert f"this run writes to {written.group(1)}" in proc.stderr  # and so does the first
        assert folder.parent == checkpoint / "eval" and re.fullmatch(r"my_eval-\d{8}-\d{6}(-\d+)?", folder.name)
        assert json.loads((folder / "results.json").read_text())["checkpoint"] == str(checkpoint)
        folders.append(folder)
    assert folders[0] != folders[1]  # a second run does not replace the first's results either
    now = digests(checkpoint / "eval", trained["run"] / "eval" / "history.jsonl")
    assert {f: d for f, d in now.items() if f in callback_files} == callback_files
    assert not [f for f in now if f not in callback_files and not any(f.startswith(str(d)) for d in folders)]

    # an --out that holds another run's results (the callback's) is refused, and nothing is written
    line = error_line(run([*args, "--out", str(checkpoint / "eval")], root), EVAL_LIMIT_S)
    assert f"--out {checkpoint / 'eval'}: holds the results of another run (the training callback, step 2" in line
    assert "--overwrite" in line, line
    assert digests(checkpoint / "eval", trained["run"] / "eval" / "history.jsonl") == now


def test_a_killed_default_run_is_resumed_and_fresh_starts_a_new_folder(tmp_path, monkeypatch):
    """The folder choice alone: an unfinished run of the same model and data whose process is gone is resumed;
    a finished one, another model's, or one still running is not."""
    from proactive_rl.evaluation.run_folder import RUN_NAME, choose_folder, claim

    monkeypatch.chdir(tmp_path)
    model = tmp_path / "checkpoint-4"
    model.mkdir()
    killed = model / "eval" / "val-20260101-120000"
    claim(killed, str(model), "val")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    record = json.loads((killed / RUN_NAME).read_text())
    (killed / RUN_NAME).write_text(json.dumps({**record, "pid": int(dead.stdout)}))  # that process has exited
    folder, note = choose_folder(str(model), None, "val", ["prs"])
    assert folder == killed and note.startswith("resuming the unfinished run in")
    fresh, _ = choose_folder(str(model), None, "val", ["prs"], fresh=True)
    assert fresh.parent == killed.parent and fresh != killed
    assert choose_folder(str(model), None, "test", ["prs"])[0] != killed  # other data
    (killed / RUN_NAME).write_text(json.dumps({**record, "model": "other"}))
    assert choose_folder(str(model), None, "val", ["prs"])[0] != killed  # another model's
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (killed / RUN_NAME).write_text(json.dumps({**record, "pid": live.pid}))  # another process, still running
        assert choose_folder(str(model), None, "val", ["prs"])[0] != killed
    finally:
        live.kill()
        live.wait()
    from proactive_rl.errors import InputError

    (killed / RUN_NAME).write_text(json.dumps({**record, "pid": 1, "host": "elsewhere"}))
    with pytest.raises(InputError, match="another proactive-rl eval is writing there"):
        choose_folder(str(model), str(killed), "val", ["prs"])
    (killed / RUN_NAME).write_text(json.dumps({**record, "pid": int(dead.stdout)}))
    (killed / "results.json").write_text(json.dumps({"checkpoint": str(model), "evaluators": {"prs": {}}}))
    assert choose_folder(str(model), str(killed), "val", ["prs"])[0] == killed  # the same run again: continues
    with pytest.raises(InputError, match="holds the results of another run"):
        choose_folder(str(model), str(killed), "val", ["prs", "mcqa"])
    assert choose_folder(str(model), str(killed), "val", ["mcqa"], overwrite=True)[0] == killed


# --- 2. eval with missing data: one line, exit 2, before any model loads ----------------------------------------


@pytest.mark.parametrize(
    "evaluator, named",
    [
        ({"type": "prs", "episodes": [{"source": "data/val.json"}]}, "episode file 'data/val.json' does not exist"),
        (
            {"type": "mcqa", "environments": [{"path": "pb/QD.jsonl", "dataset": "QD"}]},
            "environments[0]: no such file 'pb/QD.jsonl'",
        ),
        (
            {"type": "mcqa", "environments": [{"path": "pb/QD.jsonl", "dataset": "QD", "data_dir": "pb/images"}]},
            "environments[0].data_dir: no such folder 'pb/images'",
        ),
        ({"type": "prs", "episodes": [{"source": "data/eps.json"}]}, "no video folder 'data/videos'"),
    ],
    ids=["episodes", "environments", "data_dir", "video_folder"],
)
def test_eval_with_missing_data_fails_before_the_model_loads(tmp_path, evaluator, named):
    (tmp_path / "model").mkdir()  # a folder that exists but holds no model: loading it would fail otherwise
    (tmp_path / "data").mkdir()
    episode = {
        "id": "e0",
        "task": "atomic",
        "duration": 10,
        "instruction": "x",
        "targets": [],
        "video": "videos/e0.mp4",
    }
    (tmp_path / "data" / "eps.json").write_text(json.dumps([episode]))
    (tmp_path / "pb").mkdir()
    if "data_dir" in json.dumps(evaluator):
        (tmp_path / "pb" / "QD.jsonl").write_text("")
    (tmp_path / "ev.yaml").write_text(json.dumps({"evaluators": [evaluator]}))
    line = error_line(run(["eval", "--config", "ev.yaml", "--model", "model"], tmp_path), EVAL_LIMIT_S)
    assert line.startswith(f"proactive-rl eval: error: ev.yaml: evaluator '{evaluator['type']}': ") and named in line
    assert not any((tmp_path / "model").iterdir()) and not (tmp_path / "eval").exists()  # nothing was written


def test_eval_episodes_whose_file_is_missing(tmp_path):
    (tmp_path / "model").mkdir()
    line = error_line(run(["eval", "--episodes", "val.json", "--model", "model"], tmp_path), EVAL_LIMIT_S)
    assert "--episodes" in line and "'val.json' does not exist" in line, line


# --- 3. silently accepted recipes ----------------------------------------------------------------------------------


def test_a_key_set_twice_names_the_key_and_both_lines(tmp_path):
    text = (ROOT / "recipes/tiny/sft.yaml").read_text()
    first = text.splitlines().index(next(x for x in text.splitlines() if x.startswith("learning_rate:"))) + 1
    lines = text.count("\n") + (not text.endswith("\n"))
    (tmp_path / "my_sft.yaml").write_text(text + ("" if text.endswith("\n") else "\n") + "learning_rate: 1.0\n")
    line = error_line(run(["train", "--config", "my_sft.yaml"], tmp_path), RECIPE_LIMIT_S)
    assert f"my_sft.yaml: key `learning_rate` is set twice (lines {first} and {lines + 1}); keep one" in line, line
    # the same for an evaluation recipe
    (tmp_path / "ev.yaml").write_text("evaluators:\n  - type: prs\n    type: mcqa\n")
    line = error_line(run(["eval", "--config", "ev.yaml", "--model", "tiny:qwen2_5_vl:xs"], tmp_path), EVAL_LIMIT_S)
    assert "ev.yaml: key `type` is set twice (lines 2 and 3)" in line, line


def test_a_config_folder_lists_its_recipes(tmp_path):
    (tmp_path / "mine").mkdir()
    for name in ("sft.yaml", "grpo.yaml"):
        (tmp_path / "mine" / name).write_text("trainer: sft\n")
    line = error_line(run(["train", "--config", "mine"], tmp_path), RECIPE_LIMIT_S)
    assert (
        "mine: is a folder; give the recipe file (e.g. mine/sft.yaml); YAML files there: grpo.yaml, sft.yaml" in line
    )
    line = error_line(run(["train", "--config", "tiny"], tmp_path), RECIPE_LIMIT_S)  # a shipped group
    assert "tiny: is a folder; give the recipe file (e.g. tiny/sft.yaml)" in line and "grpo_streaming.yaml" in line


@pytest.mark.parametrize("where", ["recipe", "flag", "parent"])
def test_an_output_dir_that_is_a_file(tmp_path, where):
    (tmp_path / "taken").write_text("a file")
    text = (ROOT / "recipes/tiny/sft.yaml").read_text()
    target = "taken/run" if where == "parent" else "taken"
    args = ["train", "--config", "my_sft.yaml"]
    if where == "flag":
        args += ["--output_dir", target]
    else:
        text = re.sub(r"(?m)^output_dir: .*$", f"output_dir: {target}", text)
    (tmp_path / "my_sft.yaml").write_text(text)
    line = error_line(run(args, tmp_path), RECIPE_LIMIT_S)
    origin = "command line" if where == "flag" else "my_sft.yaml"
    what = "cannot be made: taken is a file" if where == "parent" else "is a file"
    assert f"{origin}: output_dir: '{target}' {what}; pass --output_dir a folder" in line, line


# --- 5. the launch commands, from any folder ----------------------------------------------------------------------


def test_recipes_shows_the_documented_launch_lines_that_work_from_any_folder(tmp_path):
    proc = run(["recipes"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if re.match(r"^\S+/\S+\.yaml\s", line)]
    assert len(rows) >= 10
    for row in rows:
        name, command = row.split(maxsplit=1)
        assert command.startswith(("proactive-rl ", "accelerate launch ")), row
        assert not re.search(r"-m proactive_rl\.(?!cli (train|eval) )", command), row  # one spelling
        assert f"--config {name}" in command, row  # the shipped name: no checkout needed
        launch_configs = re.findall(r"--config_file (\S+ \S+ \S+ \S+)", command)
        assert all(re.fullmatch(r"\$\(proactive-rl recipes path launch/\S+\)", v) for v in launch_configs), row
    assert "-m proactive_rl.cli train" in (ROOT / "docs/training.md").read_text()
    path = run(["recipes", "path", "launch/zero3.yaml"], tmp_path).stdout.strip()
    assert Path(path).is_file() and Path(path).name == "zero3.yaml"
    # a listed launch config, as the listing writes it, from this folder outside the checkout
    launch = (
        "accelerate launch --config_file $(proactive-rl recipes path launch/single_gpu.yaml) --cpu -m proactive_rl.cli"
    )
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        ["bash", "-c", f"{launch} recipes path launch/zero3.yaml"], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0 and proc.stdout.strip() == path, proc.stderr[-3000:]
    line = error_line(run(["recipes", "path", "launch/zero4.yaml"], tmp_path), RECIPE_LIMIT_S)
    assert "did you mean `launch/zero3.yaml`?" in line, line


# --- 3. empty input (issue 57 follow-up) ---------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["[]", ""], ids=["empty-list", "empty-file"])
def test_eval_episodes_with_a_file_holding_no_episodes(tmp_path, content):
    """It scored 0.00 on coverage 0/0 after loading the model; now one line naming the empty file, before the model
    (the ``model`` folder here holds none: reaching it would fail otherwise)."""
    (tmp_path / "model").mkdir()
    episode = {"id": "e0", "task": "atomic", "duration": 10, "instruction": "x", "targets": []}
    (tmp_path / "val.json").write_text(json.dumps([episode]))
    (tmp_path / "empty.json").write_text(content)
    args = ["eval", "--episodes", "val.json", "empty.json", "--model", "model"]
    line = error_line(run(args, tmp_path), EVAL_LIMIT_S)
    assert line.startswith("proactive-rl eval: error: empty.json: no episodes: the file is empty"), line
    assert "write a JSON list (or JSONL) of episode records" in line and "val.json" not in line, line
    assert not any((tmp_path / "model").iterdir()) and not (tmp_path / "eval").exists()  # nothing was written
