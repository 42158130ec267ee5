"""The evaluators a training recipe or a list of episode files implies, for `proactive-rl eval` without an
``eval_callback`` block.

- episode sources (``--episodes FILE ...``, or a training recipe's held-out ``eval_mixture``): a ``pauc`` evaluator
  (rule judge, token-F1) for the sources whose every target has a reply window (ProactiveVideoQA), a ``prs``
  evaluator for the rest (docs/spec.md §4, §5);
- a suggestion recipe's held-out ``eval_environments``: an ``mcqa`` evaluator with the recipe's ``hint`` and
  ``answer_letters_only`` (docs/spec.md §6).

A training recipe with neither is an `InputError` that shows the ``eval_callback`` block to add.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from proactive_rl.data.mixture import check_source, load_mixture, parse_mixture
from proactive_rl.errors import InputError

# Keys only a training recipe has; a YAML with one of them and no ``eval_callback`` block is a training recipe.
TRAINING_KEYS = ("trainer", "output_dir", "model_name_or_path", "dataset_mixture", "environments", "learning_rate")


def is_training_recipe(raw: Any) -> bool:
    """Whether a YAML mapping is a training recipe (it has a training key) rather than an ``eval_callback`` block."""
    return isinstance(raw, dict) and any(key in raw for key in TRAINING_KEYS)


def episode_evaluators(sources: Any, where: str) -> list[dict]:
    """``pauc`` for the sources whose every target has a reply window, ``prs`` for the others (raw configs)."""
    by_type: dict[str, list[dict]] = {"prs": [], "pauc": []}
    for src in parse_mixture(sources, where):
        check_source(src, where)
        episodes, _ = load_mixture([src])
        targets = [t for e in episodes for t in e.targets]
        kind = "pauc" if targets and all(t.window is not None for t in targets) else "prs"
        by_type[kind].append({k: v for k, v in asdict(src).items() if v not in (None, {})})
    return [{"type": kind, "episodes": found} for kind, found in by_type.items() if found]


def recipe_evaluators(raw: dict, path: str) -> list[dict]:
    """The evaluators of a training recipe's held-out data; an `InputError` showing the block to add without any."""
    if raw.get("eval_mixture"):
        return episode_evaluators(raw["eval_mixture"], f"{path}: eval_mixture")
    if raw.get("eval_environments"):
        flags = {k: raw[k] for k in ("hint", "answer_letters_only") if k in raw}
        return [{"type": "mcqa", "environments": raw["eval_environments"], **flags}]
    example = "{evaluators: [{type: prs, episodes: [{source: data/val.json}]}]}"
    if raw.get("environments"):
        example = "{evaluators: [{type: mcqa, environments: [{kind: occlusion, n: 8, seed: 7}]}]}"
    raise InputError(
        f"{path}: a training recipe with no `eval_callback` block and no held-out data (eval_mixture); add the block, "
        f"e.g. `eval_callback: {example}`, or evaluate episode files with --episodes FILE [FILE ...]"
    )
