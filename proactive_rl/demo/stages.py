"""The demo's work: build the tiny model, write the synthetic world, and train a stage with its tiny recipe.

Each training stage (`proactive_rl.demo.plan.STAGES`) loads its shipped recipe (``recipes/tiny/<trainer>.yaml``),
applies the stage's overrides (data files from ``<out>/data``, the previous stage's checkpoint, steps), writes the result to ``<out>/recipes/<stage>.yaml``
and runs the trainer's own entry point on it (``make_parser().parse_args_and_config`` then ``main``), exactly as
``proactive-rl train --config <out>/recipes/<stage>.yaml`` would.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import yaml
from tqdm.auto import tqdm

from proactive_eval.episodes import load_episodes, save_episodes
from proactive_rl.demo.plan import task_file
from proactive_rl.demo.settings import DemoSettings, suggestion_environments
from proactive_rl.models import build_tiny
from proactive_rl.shipped import read_recipe, shipped_path
from proactive_rl.synthetic.captions import GROUNDING_TASK, grounding_episode
from proactive_rl.synthetic.environments import make_environments
from proactive_rl.synthetic.export import (
    SPLITS,
    OtherArgumentsError,
    export_dataset,
    export_environments,
    split_seed,
    split_sizes,
)
from proactive_rl.trainers import TRAINERS, trainer_module

logger = logging.getLogger(__name__)

MODEL_STAMP = "demo_model.json"


class StageSkipped(RuntimeError):
    """A stage could not run (its code is missing or an earlier stage failed); the message says why."""


def say(message: str) -> None:
    """Demo narration: printed (not logged), so that it shows between the progress bars whatever the log level."""
    print(f"[demo] {message}", flush=True)


# --- 1. the tiny model -----------------------------------------------------------------------------------------


def build_model(out: Path, settings: DemoSettings) -> Path:
    """The untrained tiny model and processor saved to ``<out>/model``; a previous build with the same
    ``(arch, size, seed)`` is reused (building trains the byte-level BPE tokenizer, the slow part)."""
    model_dir = out / "model"
    stamp = {"arch": settings.arch, "size": settings.size, "seed": settings.seed}
    stamp_path = model_dir / MODEL_STAMP
    if stamp_path.is_file() and (model_dir / "config.json").is_file():
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                say(f"reusing the tiny model and tokenizer built earlier in {model_dir} ({stamp})")
                return model_dir
        except json.JSONDecodeError:
            pass

    say(f"building the tiny model {stamp} (weights + a locally trained tokenizer) -> {model_dir}")
    model, processor = build_tiny(settings.arch, settings.size, seed=settings.seed)
    model.save_pretrained(model_dir)
    processor.save_pretrained(model_dir)
    stamp_path.write_text(json.dumps(stamp) + "\n")  # written last: a half-saved folder is rebuilt
    return model_dir


# --- 2. the synthetic world ------------------------------------------------------------------------------------


def generate_data(out: Path, settings: DemoSettings, progress: bool = True) -> Path:
    """Write the synthetic world with `export_dataset` (mp4 + episodes JSON + environment JSONL) to ``<out>/data``;
    a folder made with the same arguments is reused file by file, one made with others is written anew. Also writes
    one episodes file per task and split, so that each stage reads only the tasks it trains or scores."""
    data = out / "data"
    args = settings.data_args()
    tasks, n = args.pop("tasks"), args.pop("n")
    kinds = ", ".join(suggestion_environments()[0])
    say(
        f"synthetic world -> {data}: {n} episodes x {', '.join(tasks)}; {settings.envs_per_kind} environments x {kinds}"
    )
    try:
        result = export_dataset(data, tasks, n, progress=progress, **args)
    except OtherArgumentsError:
        # a world written with other settings (an earlier version's demo, other --seeds knobs): the demo's own folder
        say(f"{data} holds a synthetic world made with other settings: writing it anew")
        result = export_dataset(data, tasks, n, progress=progress, overwrite=True, **args)
    envs = export_env_splits(data, settings, result["reused_folder"], progress)
    if result["reused_folder"] and envs["reused_folder"]:
        say(
            f"reusing the synthetic world generated earlier in {data} "
            f"({result['reused'] + envs['reused']} files reused, {result['written'] + envs['written']} written)"
        )
    else:
        say(f"synthetic world written: {result['written'] + envs['written']} files")
    for split in SPLITS:
        episodes = load_episodes(data / split / "episodes.json")
        for task in tasks:
            path = task_file(data, split, task)
            save_episodes(path, [e for e in episodes if e.task == task])
        # the grounding stage's episodes: the same videos, every frame answered with what is on screen
        grounded = [grounding_episode(e) for e in episodes if e.task in settings.tasks]
        save_episodes(task_file(data, split, GROUNDING_TASK), grounded)
    return data


def export_env_splits(data: Path, settings: DemoSettings, reuse: bool, progress: bool = True) -> dict:
    """The ask-for-help environments (kinds and knobs of the tiny suggestion recipe) of each split as ProactiveBench JSONL + images,
    at ``<split>/environments/<kind>.jsonl``; reused when ``environments.json`` records the same arguments."""
    kinds, knobs = suggestion_environments()
    manifest = {"kinds": list(kinds), "n": settings.envs_per_kind, "seed": settings.seed, "knobs": knobs}
    manifest = json.loads(json.dumps({**manifest, "fractions": list(settings.fractions)}))
    path = data / "environments.json"
    same = reuse and path.is_file() and json.loads(path.read_text()) == manifest
    counts = {"written": 0, "reused": 0, "reused_folder": same}
    sizes = split_sizes(settings.envs_per_kind, settings.fractions)
    with tqdm(total=sum(sizes) * len(kinds), desc="environments", unit="env", disable=not progress) as bar:
        for split, size in zip(SPLITS, sizes):
            for kind in kinds:
                envs = make_environments(kind, size, split_seed(settings.seed, split), **knobs)
                part = export_environments(data / split / "environments", kind, envs, reuse=same, progress=bar)
                counts["written"] += part["written"]
                counts["reused"] += part["reused"]
    path.write_text(json.dumps(manifest, indent=1) + "\n")
    return counts


# --- 3. training stages ----------------------------------------------------------------------------------------


def derive_recipe(stage: str, overrides: dict[str, Any], out: Path, run_name: str | None = None) -> Path:
    """The shipped ``tiny/<stage>.yaml`` with `overrides` applied, written to ``<out>/recipes/<run_name>.yaml``
    (`run_name` defaults to `stage`)."""
    name = f"tiny/{stage}.yaml"
    source = shipped_path(name)
    recipe = read_recipe(str(source))
    unknown = sorted(k for k in overrides if k not in recipe and k not in _EXTRA_KEYS)
    if unknown:
        logger.info("demo overrides not in %s (passed to the trainer as new fields): %s", name, unknown)
    recipe.update(overrides)
    path = out / "recipes" / f"{run_name or stage}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = (
        f"# Written by `proactive-rl demo`: the shipped recipe {name} (proactive-rl recipes cp {name} ...) with the "
        "demo's overrides.\n"
        f"# Re-run this stage alone: proactive-rl train --config {path}\n"
    )
    path.write_text(header + yaml.safe_dump(recipe, sort_keys=False))
    return path


_EXTRA_KEYS = {"save_strategy", "eval_environments", "tasks"}


def _entry_point(stage: str):
    """``(make_parser, main)`` of a stage's trainer (`proactive_rl.trainers`); `StageSkipped` when it is not there."""
    try:
        module = trainer_module(stage)
        return module.make_parser, module.main
    except (ImportError, AttributeError) as err:
        raise StageSkipped(f"{TRAINERS[stage]} is not available ({type(err).__name__}: {err})") from err


def train_stage(stage: str, overrides: dict[str, Any], out: Path, name: str | None = None) -> Path:
    """Run one training stage with the trainer and recipe of `stage`, under `name` (``<out>/runs/<name>``,
    ``<out>/recipes/<name>.yaml``; defaults to `stage`); returns its output directory (the model and processor)."""
    make_parser, main = _entry_point(stage)
    name = name or stage
    output_dir = out / "runs" / name
    recipe = derive_recipe(stage, {**overrides, "output_dir": str(output_dir)}, out, name)
    say(f"{name}: proactive-rl train --config {recipe}")
    script_args, training_args, model_args = make_parser().parse_args_and_config(["--config", str(recipe)])
    main(script_args, training_args, model_args)
    if not (output_dir / "config.json").is_file():
        raise RuntimeError(f"{stage}: training finished but {output_dir} holds no model (config.json missing)")
    return output_dir
