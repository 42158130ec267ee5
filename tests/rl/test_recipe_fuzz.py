"""Malformed recipes through the check `proactive-rl train` runs before anything loads (`resolve_config`, then
`parse_recipe`): every one is an `InputError` with a one-line message, never another exception, in bounded time.

Fixed seed, 200 recipes from the shipped tiny SFT recipe: a wrong type for a field, ``null`` for a field that needs a
value, huge strings, values out of range or outside a field's choices, unknown keys, a key set twice, deep nesting,
a document that is not a mapping, binary garbage, a malformed mixture entry. A few of them also go through the
command in a subprocess (exit 2, one line, no traceback).
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from proactive_eval.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
BASE_TEXT = (ROOT / "recipes/tiny/sft.yaml").read_text()
BASE = yaml.safe_load(BASE_TEXT)
N = 200

# (field, values of a type it does not take); every value here must be refused
WRONG_TYPES = {
    "learning_rate": [[1, 2], {"a": 1}, True, "fast"],
    "max_steps": [2.5, [3], {"n": 3}, False, "many"],
    "per_device_train_batch_size": [[4], 1.5, {"b": 4}],
    "output_dir": [5, 3.5, [1], {"a": "b"}, True],
    "model_name_or_path": [7, -1, [1], {"a": "tiny:qwen2_5_vl:xs"}, False],
    "bf16": [3, [True], {"on": True}, "maybe"],
    "use_peft": [2, [False], "sometimes"],
    "lora_target_modules": [{"a": ["q_proj"]}, [1, 2], 5],
    "seed": [[0], {"s": 0}, "zero", 0.5],
    "save_steps": [[30], {"n": 30}, "often"],
    "dtype": [5, [1], "float31", "y" * 500],
    "dataset_mixture": [5, "x", [5], [None], [{"source": "synthetic", "task": "nope"}], {"a": 1}, []],
    "eval_callback": [5, "x", [1], {"evaluators": 3}, {"evaluators": [{"type": "nope"}]}, {"unknown": 1}],
}
NEEDS_A_VALUE = ["learning_rate", "max_steps", "per_device_train_batch_size", "model_name_or_path", "use_peft", "seed"]
OUT_OF_RANGE = {
    "learning_rate": [-1.0, 0.0, float("nan")],
    "max_steps": [0, -5],
    "save_steps": [0, float("nan")],
    "lora_dropout": [1.5, -0.1],
    "gradient_accumulation_steps": [0],
}


def _deep(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def malformed(rng: random.Random, k: int) -> tuple[str, bytes]:
    """``(kind, file content)`` of the k-th malformed recipe."""
    recipe = dict(BASE)
    kind = ("type", "null", "huge", "range", "unknown", "duplicate", "nested", "not_mapping", "garbage")[k % 9]
    if kind == "type":
        key = rng.choice(sorted(WRONG_TYPES))
        recipe[key] = rng.choice(WRONG_TYPES[key])
    elif kind == "null":
        recipe[rng.choice(NEEDS_A_VALUE)] = None
    elif kind == "huge":
        key = rng.choice(["learning_rate", "max_steps", "output_dir", "model_name_or_path", "seed", "bf16"])
        recipe[key] = rng.choice("x9/") * rng.randint(300, 200_000)
        if key in ("output_dir", "model_name_or_path"):
            recipe[key] = "x" * rng.randint(300, 200_000)  # a name no file system allows
    elif kind == "range":
        key = rng.choice(sorted(OUT_OF_RANGE))
        recipe[key] = rng.choice(OUT_OF_RANGE[key])
    elif kind == "unknown":
        recipe["".join(rng.choice("abcdefghij_") for _ in range(rng.randint(1, 30))) + "_zz"] = rng.random()
    elif kind == "duplicate":  # a key of the recipe written again, further down
        key = rng.choice(sorted(k for k in BASE if not isinstance(BASE[k], (dict, list))))
        return kind, (BASE_TEXT + f"\n{key}: {yaml.safe_dump(BASE[key]).splitlines()[0]}\n").encode()
    elif kind == "nested":
        if rng.random() < 0.75:
            recipe[rng.choice(["learning_rate", "output_dir", "lora_target_modules"])] = _deep(rng.randint(5, 60))
        else:  # deeper than the YAML reader recurses (seconds to unwind: a few of them)
            return kind, b"learning_rate: " + b"[" * 1500 + b"]" * 1500 + b"\n"
    elif kind == "not_mapping":
        return kind, rng.choice([b"", b"- 1\n- 2\n", b"just text\n", b"42\n", b"[learning_rate, 0.1]\n", b"~\n"])
    else:
        return kind, rng.randbytes(rng.randint(1, 4000))
    return kind, yaml.safe_dump(recipe, allow_unicode=True).encode()


def check(path: Path) -> None:
    """The check `proactive-rl train` runs on a recipe before anything loads."""
    from proactive_rl.recipe_args import parse_recipe, resolve_config
    from proactive_rl.sft.main import make_parser

    parse_recipe(make_parser(), resolve_config(["--config", str(path)]))


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_malformed_recipes_are_one_line_input_errors(tmp_path):
    from proactive_rl.recipe_args import located

    check(ROOT / "recipes/tiny/sft.yaml")  # the imports (torch, TRL) out of the timings; the shipped recipe passes
    rng = random.Random(57)
    kinds, start = {}, time.monotonic()
    for k in range(N):
        kind, content = malformed(rng, k)
        path = tmp_path / f"recipe_{k}.yaml"
        path.write_bytes(content)
        began = time.monotonic()
        with pytest.raises(InputError) as caught:  # any other exception fails the test, naming the recipe
            check(path)
        message = str(located(caught.value, str(path)))  # as the command prints it: the recipe named once
        assert "\n" not in message and str(path) in message, (k, kind, message[:500])
        assert time.monotonic() - began < 10, (k, kind)
        kinds[kind] = kinds.get(kind, 0) + 1
    assert len(kinds) == 9 and min(kinds.values()) >= 20, kinds
    assert time.monotonic() - start < 300


def _train(config: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PROACTIVE_RL_DEBUG"}
    env.update(HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "proactive_rl.cli", "train", "--config", str(config)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("kind", ["duplicate", "garbage", "not_mapping", "type"])
def test_a_malformed_recipe_is_one_line_from_the_command(tmp_path, kind):
    rng = random.Random(kind)
    content = next(c for k, c in (malformed(rng, i) for i in range(9 * 4)) if k == kind)
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    proc = _train(path, tmp_path)
    lines = [line for line in proc.stderr.splitlines() if ": error: " in line]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert "bad.yaml" in lines[0], lines[0]


def test_a_repeated_key_is_found_in_any_mapping_and_merges_are_not_repeats(tmp_path):
    from proactive_rl.shipped import DuplicateKey, read_recipe

    cases = {
        "top.yaml": ("max_steps: 1\nseed: 0\nmax_steps: 2\n", "key `max_steps` is set twice (lines 1 and 3)"),
        "nested.yaml": ("eval_callback:\n  on_save: true\n  on_save: false\n", "key `on_save` is set twice (lines 2 and 3)"),
        "flow.yaml": ("knobs: {fps: 1, fps: 2}\n", "key `fps` is set twice (line 1)"),
        "list.yaml": ("evaluators:\n  - {type: prs}\n  - type: mcqa\n    type: oeg\n", "key `type` is set twice (lines 3 and 4)"),
    }  # fmt: skip
    for name, (text, message) in cases.items():
        (tmp_path / name).write_text(text)
        with pytest.raises(DuplicateKey, match=re.escape(f"{tmp_path / name}: {message}; keep one")):
            read_recipe(str(tmp_path / name))
    (tmp_path / "merge.yaml").write_text("base: &b {fps: 1, seed: 2}\nmine:\n  <<: *b\n  fps: 3\n")
    assert read_recipe(str(tmp_path / "merge.yaml"))["mine"] == {"fps": 3, "seed": 2}  # an override, not a repeat
    (tmp_path / "twice.yaml").write_text("a: 1\nb: 1\n")  # the same value twice is fine: different keys
    assert read_recipe(str(tmp_path / "twice.yaml")) == {"a": 1, "b": 1}
