"""A recipe whose local ``model_name_or_path`` does not exist fails at once, naming the field, the path and the fix,
without any network attempt (the hub download functions raise if called)."""

from __future__ import annotations

from pathlib import Path

import pytest

from proactive_rl.models.spec import MISSING_FOLDER_FIX, check_model_path, load_model_spec, looks_local

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def no_network(monkeypatch):
    """Every hub entry point raises: a test that reaches one fails."""
    import huggingface_hub
    import huggingface_hub.file_download as file_download

    def refuse(*args, **kwargs):
        raise AssertionError(f"network attempted: {args} {kwargs}")

    for module in (huggingface_hub, file_download):
        for name in ("hf_hub_download", "snapshot_download", "model_info", "get_hf_file_metadata"):
            if hasattr(module, name):
                monkeypatch.setattr(module, name, refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)


@pytest.mark.parametrize("name", ["outputs/tiny-sft", "./outputs/tiny-sft", "/nonexistent/model", "runs/a/b"])
def test_missing_local_folder_names_field_path_and_fix(name, no_network, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert looks_local(name)
    with pytest.raises(FileNotFoundError) as err:
        load_model_spec(name)
    message = str(err.value)
    assert message.startswith("model_name_or_path:") and repr(name) in message and MISSING_FOLDER_FIX in message


def test_hub_ids_and_tiny_specs_are_not_checked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("Qwen/Qwen3-VL-4B-Instruct", "llava-hf/llava-v1.6-mistral-7b-hf", "tiny:qwen2_5_vl:xs"):
        check_model_path(name)  # no error: hub ids are the loader's business
    (tmp_path / "mymodels").mkdir()
    assert looks_local("mymodels/run1")  # an existing local folder's child is local, not a hub id
    with pytest.raises(FileNotFoundError, match="mymodels/run1"):
        check_model_path("mymodels/run1")


@pytest.mark.parametrize("recipe", ["recipes/tiny/grpo_streaming.yaml", "recipes/tiny/sft.yaml"])
def test_recipe_before_its_model_exists_fails_first(recipe, no_network, tmp_path, monkeypatch):
    """The streaming GRPO recipe run before the SFT recipe: `proactive-rl train` stops before importing a trainer
    (no torch, no data, no model); the trainer's own entry point checks the same before building anything."""
    from proactive_rl.trainers import recipe_trainer, run_train, trainer_module

    monkeypatch.chdir(tmp_path)
    argv = ["--config", str(ROOT / recipe), "--model_name_or_path", "outputs/tiny-sft", "--report_to", "none"]
    with pytest.raises(FileNotFoundError, match="run recipes/tiny/sft.yaml first") as err:
        run_train(argv)
    assert "model_name_or_path" in str(err.value) and "'outputs/tiny-sft'" in str(err.value)
    module = trainer_module(recipe_trainer(argv))
    with pytest.raises(FileNotFoundError, match="run recipes/tiny/sft.yaml first"):
        module.build_trainer(*module.make_parser().parse_args_and_config(argv))


def test_cli_fails_without_importing_the_training_stack(tmp_path):
    """`proactive-rl train` on a recipe whose model folder is missing: the message, and torch never imported."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from proactive_rl.cli import main\n"
        f"print(main(['train', '--config', {str(ROOT / 'recipes/tiny/grpo_streaming.yaml')!r}]))\n"
        "print('torch' in sys.modules, 'transformers' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert "model_name_or_path: no model folder at 'outputs/tiny-sft'" in out.stderr, out.stderr[-2000:]
    assert MISSING_FOLDER_FIX in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert out.stdout.strip().splitlines()[0] == "2"
    assert out.stdout.strip().splitlines()[-1] == "False False"
