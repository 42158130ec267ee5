"""Write the synthetic world to real files, so the demo and tests read it like real data.

Layout of ``out/`` (one folder per split; a split's seed is ``3 * seed + {0, 1, 2}``, so splits never share an
episode and ids carry their split's seed)::

    out/manifest.json                       the arguments the folder was made with
    out/train/episodes.json                 docs/spec.md §1 episodes, ``video`` = ``videos/<id>.mp4``, scene in ``meta``
    out/train/videos/<id>.mp4               H.264 (or MPEG-4), yuv420p, 1 frame per decision step
    out/train/environments/<kind>.jsonl     ProactiveBench-style records (``proactive_eval.benchmarks.proactivebench.environments``)
    out/train/environments/images/<kind>/<id>/<k>.png
    out/validation/...  out/test/...

Environment records follow the authors' dataset whose dynamics they share (field ``dataset_rule``):
occlusion → ROD, corruption → IN-C, sketch and zoom_out → QD; load them with
``proactive_eval.benchmarks.proactivebench.environments.load_environments(path, record_rule, protocol="unfiltered")`` (they are not
samples of the filtered benchmark).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image
from tqdm.auto import tqdm

from proactive_eval.episodes import Episode, save_episodes
from proactive_eval.video import write_video
from proactive_rl.synthetic.environments import make_environments
from proactive_rl.synthetic.generate import generate_episodes, render_frames

logger = logging.getLogger(__name__)

SPLITS = ("train", "validation", "test")
FRACTIONS = (0.8, 0.1, 0.1)  # train / validation / test, the default split
DATASET_RULES = {"occlusion": "ROD", "corruption": "IN-C", "sketch": "QD", "zoom_out": "QD"}
_TEMPLATE_WIDTH = {"ROD": 2, "IN-C": 1, "QD": 2}


class OtherArgumentsError(ValueError):
    """`export_dataset` on a folder that holds a dataset made with other arguments (and ``overwrite`` not set)."""


def split_seed(seed: int, split: str) -> int:
    """The seed of one split: ``3 * seed + index`` (train 0, validation 1, test 2), distinct for every pair."""
    return 3 * int(seed) + SPLITS.index(split)


def split_sizes(n: int, fractions: Sequence[float]) -> list[int]:
    """Split `n` by `fractions` (train first), exactly: the sizes sum to `n`.

    When `n` is at least the number of splits with a positive fraction, each of them gets at least one item;
    below that (``--n 1``, ``--n 2``) the largest remainders win (train first on ties) and the other splits are
    empty: a tiny world is allowed empty validation / test splits (`export_dataset` says which).

    >>> split_sizes(100, (0.8, 0.1, 0.1)), split_sizes(3, (0.8, 0.1, 0.1))
    ([80, 10, 10], [1, 1, 1])
    >>> split_sizes(1, (0.8, 0.1, 0.1)), split_sizes(2, (0.8, 0.1, 0.1)), split_sizes(2, (0.4, 0.2, 0.4))
    ([1, 0, 0], [2, 0, 0], [1, 0, 1])
    """
    if len(fractions) != len(SPLITS) or any(f < 0 for f in fractions) or sum(fractions) <= 0:
        raise ValueError(
            f"split fractions must be three non-negative numbers (train, validation, test), got {fractions}"
        )
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"the number of items to split must be an integer >= 1, got {n!r}")
    total = sum(fractions)
    positive = [i for i, f in enumerate(fractions) if f > 0]
    if n < len(positive):
        quotas = [n * f / total for f in fractions]
        sizes = [int(q) for q in quotas]
        order = sorted(positive, key=lambda i: (-(quotas[i] - sizes[i]), i))
        for i in order[: n - sum(sizes)]:
            sizes[i] += 1
        return sizes
    sizes = [max(1, round(n * f / total)) if f > 0 else 0 for f in fractions]
    sizes[0] = max(0, n - sum(sizes[1:])) if fractions[0] > 0 else 0
    return sizes


def export_episodes(
    split_dir: Path, episodes: list[Episode], videos: bool = True, reuse: bool = False, progress=None
) -> dict[str, int]:
    """Write `episodes` to ``split_dir/episodes.json`` (+ ``videos/<id>.mp4``); with `reuse`, existing videos are kept.

    Returns counts ``{"written": ..., "reused": ...}`` of videos.
    """
    split_dir.mkdir(parents=True, exist_ok=True)
    counts = {"written": 0, "reused": 0}
    saved = []
    for episode in episodes:
        record = Episode.from_dict(episode.to_dict())
        if videos:
            rel = f"videos/{episode.id}.mp4"
            path = split_dir / rel
            if reuse and path.is_file() and path.stat().st_size > 0:
                counts["reused"] += 1
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_video(path, (frame for _, frame in render_frames(episode)), fps=episode.fps)
                counts["written"] += 1
            record.video = rel
        saved.append(record)
        if progress is not None:
            progress.update(1)
    _write_if_changed(split_dir / "episodes.json", saved)
    return counts


def environment_record(env, rel_dir: str) -> dict:
    """The ProactiveBench JSONL record of an in-memory environment whose images live in `rel_dir`."""
    rule = DATASET_RULES[env.kind]
    template = f"{rel_dir}/{{:0{_TEMPLATE_WIDTH[rule]}d}}.png"
    record = {
        "id": env.id,
        "image_template": template,
        "first_image": env.first_image,
        "num_images": len(env.images),
        "reference_image": template.format(env.reference_image),
        "prompt": env.prompt,
        "options": list(env.options),
        "categories": list(env.categories),
        "answer": env.answer,
        "dataset": env.dataset,
        "dataset_rule": rule,
        "steps_needed": env.steps_needed,
        "hint": env.hint,
    }
    if rule == "IN-C":
        record["quality_answer"] = next(iter(env.moves))
    return record


def export_environments(env_dir: Path, kind: str, envs: list, reuse: bool = False, progress=None) -> dict[str, int]:
    """Write ``env_dir/<kind>.jsonl`` and its images (with `reuse`, existing images are kept); returns counts."""
    counts = {"written": 0, "reused": 0}
    lines = []
    for env in envs:
        rel_dir = f"images/{kind}/{env.id}"
        record = environment_record(env, rel_dir)
        for k, image in enumerate(env.images):
            path = env_dir / record["image_template"].format(k)
            if reuse and path.is_file() and path.stat().st_size > 0:
                counts["reused"] += 1
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.tmp")
            Image.fromarray(np.asarray(image, dtype=np.uint8)).save(tmp, format="PNG")
            tmp.replace(path)
            counts["written"] += 1
        lines.append(json.dumps(record, ensure_ascii=False))
        if progress is not None:
            progress.update(1)
    text = "".join(line + "\n" for line in lines)
    env_dir.mkdir(parents=True, exist_ok=True)  # an empty split writes an empty file, and no images
    path = env_dir / f"{kind}.jsonl"
    if not (path.is_file() and path.read_text() == text):
        path.write_text(text)
    return counts


def export_dataset(
    out: str | Path,
    tasks: Sequence[str],
    n: int,
    seed: int = 0,
    env_kinds: Sequence[str] = (),
    n_envs: int | None = None,
    fractions: Sequence[float] = FRACTIONS,
    videos: bool = True,
    progress: bool = True,
    overwrite: bool = False,
    **knobs,
) -> dict:
    """Generate and write a full synthetic dataset (see the module docstring); re-runs reuse existing files.

    Args:
        out (`str` or `Path`): the output folder.
        tasks (`Sequence[str]`): streaming task kinds.
        n (`int`): episodes per task, over all splits (at least 1; a small `n` leaves validation / test empty, see
            `split_sizes`).
        seed (`int`, *optional*, defaults to `0`): the run seed.
        env_kinds (`Sequence[str]`, *optional*): MCQA environment kinds (``occlusion, corruption, sketch, zoom_out``).
        n_envs (`int`, *optional*): environments per kind over all splits (at least 1); defaults to `n`.
        fractions (`Sequence[float]`, *optional*, defaults to `(0.8, 0.1, 0.1)`): train / validation / test.
        videos (`bool`, *optional*, defaults to `True`): write mp4 files (else episodes stay in-memory style).
        progress (`bool`, *optional*, defaults to `True`): show a tqdm progress bar.
        overwrite (`bool`, *optional*, defaults to `False`): rewrite every file. Without it, a folder made with
            the same arguments is reused file by file, and one made with other arguments is an error
            (`OtherArgumentsError`, a `ValueError`).
        **knobs: difficulty knobs for the streaming tasks (`proactive_rl.synthetic.Knobs`).

    Returns:
        `dict`: the manifest plus ``written`` / ``reused`` file counts.
    """
    out = Path(out)
    if int(seed) < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")
    n_envs = n if n_envs is None else n_envs
    for name, value in (("n (--n)", n), ("n_envs (--n-envs)", n_envs)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    manifest = {
        "tasks": list(tasks),
        "n": n,
        "seed": int(seed),
        "environments": list(env_kinds),
        "n_envs": n_envs,
        "fractions": list(fractions),
        "videos": videos,
        "knobs": dict(sorted(knobs.items())),
    }
    sizes, env_sizes = split_sizes(n, fractions), split_sizes(n_envs, fractions)
    manifest["splits"] = {
        s: {"episodes_per_task": a, "environments_per_kind": b} for s, a, b in zip(SPLITS, sizes, env_sizes)
    }
    for split, a, b in zip(SPLITS, sizes, env_sizes):
        empty = [f"no episodes (n={n})" for _ in [0] if tasks and a == 0]
        empty += [f"no environments (n_envs={n_envs})" for _ in [0] if env_kinds and b == 0]
        if empty:
            logger.warning(
                "%s: split %r gets %s: too few to split by %s; its files are written empty",
                out,
                split,
                " and ".join(empty),
                list(fractions),
            )
    manifest = json.loads(json.dumps(manifest))  # compare as it reads back (tuples become lists)
    previous = read_manifest(out)
    if previous is not None and not overwrite and previous != manifest:
        changed = sorted(k for k in set(previous) | set(manifest) if previous.get(k) != manifest.get(k))
        raise OtherArgumentsError(
            f"{out}: already holds a synthetic dataset made with other arguments ({', '.join(changed)} differ); "
            "choose another output folder or pass overwrite=True (--overwrite)"
        )
    reuse = previous is not None and not overwrite
    total = len(tasks) * sum(sizes) + len(env_kinds) * sum(env_sizes)
    counts = {"written": 0, "reused": 0}
    out.mkdir(parents=True, exist_ok=True)
    # Written first: files are renamed into place whole, so an interrupted run resumes where it stopped.
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    with tqdm(total=total, disable=not progress, desc="synth", unit="item") as bar:
        for split, size, env_size in zip(SPLITS, sizes, env_sizes):
            sseed = split_seed(seed, split)
            episodes = [e for task in tasks for e in generate_episodes(task, size, sseed, **knobs)]
            _add(counts, export_episodes(out / split, episodes, videos, reuse, bar))
            for kind in env_kinds:
                envs = make_environments(kind, env_size, sseed, size=knobs.get("size", 64))
                _add(counts, export_environments(out / split / "environments", kind, envs, reuse, bar))
    return {**manifest, **counts, "reused_folder": reuse}


def read_manifest(out: str | Path) -> dict | None:
    path = Path(out) / "manifest.json"
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _add(total: dict, part: dict) -> None:
    for key, value in part.items():
        total[key] += value


def _write_if_changed(path: Path, episodes: list[Episode]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    save_episodes(tmp, episodes)
    if path.is_file() and path.read_bytes() == tmp.read_bytes():
        tmp.unlink()
    else:
        tmp.replace(path)
