"""`proactive-rl train` dispatches on the recipe's `trainer` field."""

from pathlib import Path

import pytest

from proactive_rl.errors import InputError, MissingInput
from proactive_rl.trainers import TRAINERS, recipe_trainer

RECIPES = sorted(Path(__file__).resolve().parents[2].glob("recipes/**/*.yaml"))


def test_every_training_recipe_names_a_known_trainer():
    import yaml

    training = [p for p in RECIPES if "output_dir" in (yaml.safe_load(p.read_text()) or {})]
    assert training, "no training recipes found"
    for path in training:
        assert recipe_trainer(["--config", str(path)]) in TRAINERS, path


def test_trainer_defaults_to_sft_and_unknown_names_are_listed(tmp_path):
    plain = tmp_path / "plain.yaml"
    plain.write_text("max_steps: 1\n")
    assert recipe_trainer([f"--config={plain}"]) == "sft"
    assert recipe_trainer([]) == "sft"
    bad = tmp_path / "bad.yaml"
    bad.write_text("trainer: ppo\n")
    with pytest.raises(InputError, match=r"bad.yaml: field 'trainer': unknown 'ppo'; expected one of sft"):
        recipe_trainer(["--config", str(bad)])


def test_missing_recipe_file_is_named(tmp_path):
    with pytest.raises(MissingInput, match="nope.yaml: no such file here and no shipped recipe of that name"):
        recipe_trainer(["--config", str(tmp_path / "nope.yaml")])


@pytest.mark.parametrize("argv", [["--help"], ["eval", "--help"], ["demo", "--help"], ["synth", "--help"]])
def test_help_imports_no_training_stack(argv):
    """`proactive-rl --help` and every sub-command's help print without importing torch or transformers."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from proactive_rl.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit as done:\n"
        "    assert done.code == 0, done.code\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "usage: proactive-rl" in out.stdout
    assert out.stderr.strip().splitlines()[-1] == "False False", out.stderr[-2000:]
