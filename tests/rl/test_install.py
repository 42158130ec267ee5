"""Install: the documented pip line, the trl bound and the overrides it protects, the extras the messages name.

`test_pip_line_into_an_environment_with_its_own_torch` makes a throwaway venv holding a torch of its own, runs the
documented line (docs/training.md) and checks that both commands run and torch is untouched. It downloads the
training stack from PyPI (minutes): it runs only with ``PROACTIVE_RL_INSTALL_TEST=1``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The documented line, as docs/training.md gives it (checked below so the two cannot drift).
PIP_LINE = 'pip install ./rewards "./eval[judge,plots,video]" ".[train]"'
# Where TRL internals are overridden: revisit these when the trl bound is raised.
TRL_OVERRIDE_MODULES = (
    "proactive_rl/grpo/streaming/trl_overrides.py",
    "proactive_rl/grpo/streaming/trainer.py",
    "proactive_rl/grpo/replay.py",
    "proactive_rl/sft/trainer.py",
)


def _requirement(name: str, extra: str = "train") -> str:
    return next(r for r in PYPROJECT["project"]["optional-dependencies"][extra] if re.match(rf"{name}\b", r))


def test_the_documented_line_is_the_tested_one():
    assert PIP_LINE in (ROOT / "docs" / "training.md").read_text()
    assert PIP_LINE in (ROOT / "README.md").read_text()


def test_trl_is_bounded_to_the_version_the_overrides_were_written_for():
    """Raising the bound means re-reading every TRL override: this test names them."""
    import trl

    from proactive_rl.grpo.streaming.trl_overrides import TRL_VERSION

    spec = _requirement("trl")
    lower, upper = re.fullmatch(r"trl>=([\d.]+),<([\d.]+)", spec).groups()
    tested = TRL_VERSION.split(".")[:2]
    assert lower.split(".")[:2] == tested and upper.split(".")[:2] == [tested[0], str(int(tested[1]) + 1)], (
        f"pyproject bounds trl as {spec!r} but the overrides were written against trl {TRL_VERSION}: before raising "
        f"the bound re-check {', '.join(TRL_OVERRIDE_MODULES)} against the new TRL, then update TRL_VERSION"
    )
    assert trl.__version__.split(".")[:2] == tested, (
        f"installed trl {trl.__version__}; re-check {TRL_OVERRIDE_MODULES}"
    )
    for module in TRL_OVERRIDE_MODULES:
        assert "1.16" in (ROOT / module).read_text(), f"{module} no longer says which TRL it was written against"


def test_license_metadata_is_an_spdx_expression_without_deprecation_warnings(tmp_path):
    """``license = "Apache-2.0"`` (PEP 639), which needs setuptools >= 77 to build: the ``{text = ...}`` table made
    setuptools print a deprecation warning per package, several times each, on every install."""
    import setuptools

    for folder in (ROOT, ROOT / "eval", ROOT / "rewards"):
        meta = tomllib.loads((folder / "pyproject.toml").read_text())
        assert meta["project"]["license"] == "Apache-2.0", folder
        assert "setuptools>=77" in meta["build-system"]["requires"], folder
        assert not any(c.startswith("License ::") for c in meta["project"].get("classifiers", [])), folder
    assert int(setuptools.__version__.split(".")[0]) >= 77
    import shutil

    src = shutil.copytree(ROOT / "rewards", tmp_path / "rewards", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(tmp_path / "w"),
        str(src),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "deprecat" not in (proc.stdout + proc.stderr).lower(), proc.stdout[-3000:] + proc.stderr[-3000:]


def test_extras_named_by_messages_exist():
    """Every ``pip install -e '.[x]'`` / ``proactive-eval[x]`` a message or doc names is an extra of that package."""
    extras = {"proactive-rl": set(PYPROJECT["project"]["optional-dependencies"])}
    eval_meta = tomllib.loads((ROOT / "eval" / "pyproject.toml").read_text())
    extras["proactive-eval"] = set(eval_meta["project"]["optional-dependencies"])
    named = []
    for path in [
        *ROOT.glob("proactive_rl/**/*.py"),
        *ROOT.glob("eval/proactive_eval/**/*.py"),
        *ROOT.glob("docs/*.md"),
    ]:
        text = path.read_text()
        named += [("proactive-rl", x, path) for x in re.findall(r"""pip install (?:-e )?['"]?\.\[([\w,]+)\]""", text)]
        named += [("proactive-eval", x, path) for x in re.findall(r"proactive-eval\[([\w,]+)\]", text)]
    assert any(x == "vllm" for _, x, _ in named)
    for package, names, path in named:
        for extra in names.split(","):
            assert extra in extras[package], f"{path.relative_to(ROOT)} names {package}[{extra}], which does not exist"


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("PROACTIVE_RL_INSTALL_TEST") != "1", reason="set PROACTIVE_RL_INSTALL_TEST=1")
def test_pip_line_into_an_environment_with_its_own_torch(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py, bin_ = venv / "bin" / "python", venv / "bin"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, "torch==2.14.1"], check=True, timeout=1800)  # the environment's own torch
    probe = "import torch, sys; print(torch.__version__, torch.__file__)"
    before = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, check=True).stdout
    # copy the sources: pip builds in place, and the checkout must stay clean
    src = tmp_path / "src"
    import shutil

    ignore = shutil.ignore_patterns(".venv", ".git", "outputs", "*.egg-info", "__pycache__", "build", "demo_out")
    shutil.copytree(ROOT, src, ignore=ignore)
    line = PIP_LINE.replace("pip install", f"{py} -m pip install -q --disable-pip-version-check")
    proc = subprocess.run(line, shell=True, cwd=src, capture_output=True, text=True, timeout=3600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for command in ("proactive-rl", "proactive-eval"):
        out = subprocess.run([str(bin_ / command), "--help"], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert out.returncode == 0 and "usage" in out.stdout.lower(), out.stderr[-2000:]
    after = subprocess.run([str(py), "-c", probe], capture_output=True, text=True, check=True, env=env).stdout
    assert after == before  # same version, same files: pip left the environment's torch alone
    check = "import proactive_rl.sft.main, proactive_rl.grpo.streaming.main, proactive_eval, proactive_rewards"
    subprocess.run([str(py), "-c", check], check=True, env=env, cwd=tmp_path)


def _wheels(tmp_path: Path) -> list[Path]:
    """``pip wheel --no-deps`` of the three packages, built from a copy (pip builds in place; the checkout stays clean)."""
    import shutil

    src = tmp_path / "src"
    ignore = shutil.ignore_patterns(
        ".git", ".venv", ".cache", ".whl", "outputs", "demo_out*", "build", "*.egg-info", "__pycache__", "tests"
    )
    shutil.copytree(ROOT, src, ignore=ignore, symlinks=True)
    out = tmp_path / "wheels"
    for folder in (src / "rewards", src / "eval", src):
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(out),
            str(folder),
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
    wheels = sorted(out.glob("*.whl"))
    assert [w.name.split("-")[0] for w in wheels] == ["proactive_eval", "proactive_rewards", "proactive_rl"], wheels
    return wheels


@pytest.mark.slow
def test_the_wheels_work_outside_the_checkout(tmp_path):
    """The three wheels installed into a folder that is not the checkout, run from an empty folder: the recipes ship
    with the package (ls, cp, ``train --config tiny/sft.yaml``) and the demo runs. The shared environment's installed
    dependencies are reused; only the three wheels are new, and the test checks it is their copy that runs."""
    import zipfile

    wheels = _wheels(tmp_path)
    names = zipfile.ZipFile(next(w for w in wheels if w.name.startswith("proactive_rl-"))).namelist()
    assert "proactive_rl/recipes/tiny/sft.yaml" in names and "proactive_rl/launch/single_gpu.yaml" in names
    target = tmp_path / "site"
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(target)]
    subprocess.run([*pip, *map(str, wheels)], check=True, capture_output=True, timeout=600)
    work = tmp_path / "empty"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "OMP_NUM_THREADS": "1", "PROACTIVE_RL_DEBUG": "1"}
    where = "import proactive_rl, proactive_eval, proactive_rewards as r; print(proactive_rl.__file__, proactive_eval.__file__, r.__file__)"
    files = subprocess.run([sys.executable, "-c", where], cwd=work, env=env, capture_output=True, text=True).stdout
    assert files.split() and all(f.startswith(str(target)) for f in files.split()), files
    script = target / "bin" / "proactive-rl"

    def run(*args: str, timeout: int = 1800) -> str:
        proc = subprocess.run([str(script), *args], cwd=work, env=env, capture_output=True, text=True, timeout=timeout)
        assert proc.returncode == 0, f"proactive-rl {' '.join(args)}: rc {proc.returncode}\n{proc.stderr[-4000:]}"
        return proc.stdout

    listing = run("recipes")
    assert "tiny/sft.yaml" in listing and "launch/zero3.yaml" in listing
    # the recipes' first lines, as they run from this folder: shipped names, launch configs by their installed path
    assert "proactive-rl train --config tiny/sft.yaml" in listing
    assert "accelerate launch --config_file $(proactive-rl recipes path launch/zero3.yaml)" in listing
    assert run("recipes", "path", "launch/zero3.yaml").strip() == str(
        target / "proactive_rl" / "launch" / "zero3.yaml"
    )
    run("recipes", "cp", "tiny/sft.yaml", "x.yaml")
    assert (work / "x.yaml").read_text() == (ROOT / "recipes" / "tiny" / "sft.yaml").read_text()
    run("train", "--config", "tiny/sft.yaml", "--max_steps", "2", "--output_dir", "outputs/sft-from-wheel")
    assert (work / "outputs" / "sft-from-wheel" / "config.json").is_file()
    run("demo", "--quick", "--out", "demo_out")
    assert (work / "demo_out" / "report").is_dir(), sorted(p.name for p in (work / "demo_out").iterdir())
    assert not (work / "recipes").exists()  # nothing was looked up beside the working directory
