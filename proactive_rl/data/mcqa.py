"""MCQA environments → single-turn TRL prompt datasets with images and reward columns (ProactiveBench §5, docs/spec.md §6).

ProactiveBench §5 trains on *single-turn* interactions "sampling both ambiguous and unambiguous frames": every
state an environment passes through on its way to the informative image becomes one prompt. A row is::

    prompt         [{"role": "user", "content": "<question> Choose from the following options. ..."}]
    image          the state's image (PIL; or a file path, decoded lazily by `datasets`)
    options        the lettered options shown at that state (actions first, then categories)
    answer         the correct category, or "" when no category is correct at that state (ROD's occluded
                   first frame: the environment rejects a category there, so the reward must too)
    valid_actions  the proactive suggestions valid at that state
    env_id, dataset, step

The reward columns are those of ``proactive_rewards.get_reward("proactive_suggestion")`` (see
`proactive_rewards.trl`). TRL's ``GRPOTrainer`` puts the ``image`` column in front of the user text
(`trl.data_utils.prepare_multimodal_messages`), which is what :func:`mcqa_messages` renders at evaluation time.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np

from proactive_eval.environments import MCQAEnvironment, MCQAObservation, mcqa_prompt

__all__ = [
    "env_hint",
    "environment_rows",
    "image_messages",
    "load_rows",
    "mcqa_messages",
    "mcqa_text",
    "proactivebench_environments",
    "rows_to_dataset",
]


def mcqa_text(observation: MCQAObservation, hint: str = "") -> str:
    """The user text of one MCQA step: the authors' multiple-choice template, with an optional hint."""
    question = f"{observation.prompt} {hint}" if hint else observation.prompt
    return mcqa_prompt(question, list(observation.options))


def image_messages(text: str) -> list[dict]:
    """One user turn, the image then `text`: the layout TRL gives a row with an ``image`` column
    (`trl.data_utils.prepare_multimodal_messages`), rendered by the processor's chat template."""
    return [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": text}]}]


def mcqa_messages(observation: MCQAObservation, hint: str = "") -> list[dict]:
    """The conversational prompt of one MCQA step, image first (the layout TRL gives a row with an ``image``)."""
    return image_messages(mcqa_text(observation, hint))


def env_hint(env, hint: bool) -> str:
    """The hint text added to an environment's questions: its ``hint`` attribute (synthetic environments) when
    `hint` is set. ProactiveBench environments take their hint when built (``proactivebench_environments(hint=)``)."""
    return getattr(env, "hint", "") if hint else ""


def _correct_now(env: MCQAEnvironment, answer: str) -> bool:
    # The environment is the authority on whether a category may be answered in this state (ROD's first frame
    # may not); probe a copy instead of re-implementing each dataset's rule here.
    return copy.deepcopy(env).step(answer).outcome == "correct"


def _next_move(env: MCQAEnvironment, observation: MCQAObservation) -> str | None:
    """The action that walks towards the informative image: the environment's oracle if it has one, else the
    first valid action (ProactiveBench's sequences all reveal the object by repeating one move)."""
    oracle = getattr(env, "oracle_answer", None)
    move = oracle() if callable(oracle) else None
    if move in observation.valid_actions:
        return move
    return None if callable(oracle) else (observation.valid_actions[0] if observation.valid_actions else None)


def environment_rows(env: MCQAEnvironment, max_states: int | None = None, hint: bool = False) -> list[dict[str, Any]]:
    """One training row per state on the environment's path to its informative image (ambiguous and unambiguous).

    Args:
        env (`MCQAEnvironment`): an environment with an ``answer`` attribute (the correct category); it is reset.
        max_states (`int`, *optional*): keep at most this many states (the first ones).
        hint (`bool`, *optional*, defaults to `False`): append the environment's ``hint`` (ProactiveBench §4.3) to
            the question, for environments that carry one (the synthetic ones; ProactiveBench environments take
            `hint` when built).

    Returns:
        `list[dict]`: rows as described in the module docstring (``image`` is an ``H×W×3`` uint8 array, or the
        observation's ``image_path`` when the environment was built without loading images).
    """
    answer = getattr(env, "answer", None)
    if not isinstance(answer, str) or not answer:
        raise ValueError(f"environment {getattr(env, 'id', '?')!r}: needs an `answer` attribute (the category)")
    hint_text = env_hint(env, hint)
    rows, observation = [], env.reset()
    while True:
        image: Any = observation.image
        if observation.image_path is not None and image.shape[:2] == (1, 1):
            image = observation.image_path  # built with load_images=False: let `datasets` decode it lazily
        rows.append(
            {
                "prompt": [{"role": "user", "content": mcqa_text(observation, hint_text)}],
                "image": image,
                "options": list(observation.options),
                "answer": answer if _correct_now(env, answer) else "",
                "valid_actions": list(observation.valid_actions),
                "env_id": str(env.id),
                "dataset": str(env.dataset),
                "step": int(observation.step),
            }
        )
        if max_states is not None and len(rows) >= max_states:
            break
        move = _next_move(env, observation)
        if move is None:
            break
        result = env.step(move)
        if result.done or result.observation is None:
            break
        observation = result.observation
    return rows


def proactivebench_environments(
    path: str | Path,
    dataset: str | None = None,
    data_dir: str | Path | None = None,
    hint: bool = False,
    protocol: str | None = None,
    skip: dict | None = None,
) -> list:
    """ProactiveBench environments (MS-COCO included) from the authors' JSONL, validated by ``load_proactivebench``.

    Args:
        path (`str` or `Path`): the JSONL file (``<dataset>_preprocessed.jsonl`` style).
        dataset (`str`, *optional*): ``QD``, ``ROD``, ``COCO``, ... or the authors' folder name; defaults to each
            record's ``dataset`` field.
        data_dir (`str` or `Path`, *optional*): the image root; defaults to the file's folder.
        hint (`bool`, *optional*, defaults to `False`): append the dataset's hint to every question.
        protocol (`str`, *optional*): for benchmark files, ``"filtered"`` (the paper's benchmark) or
            ``"unfiltered"`` (`proactive_eval.formats.proactivebench_protocol`; needs `dataset`); `None` (the
            default, for training splits) reads every record.
        skip (`dict`, *optional*): the authors' skip arguments, with `protocol`.

    Images are not decoded here: rows carry image paths that `datasets` opens when a batch needs them.
    """
    from proactive_eval.environments import load_environments, make_environment
    from proactive_eval.episodes import EpisodeError
    from proactive_eval.formats.proactivebench import load_proactivebench

    path = Path(path)
    if protocol is not None:
        if dataset is None:
            raise ValueError(f"{path}: a benchmark protocol ({protocol}) needs the dataset (e.g. dataset: QD)")
        return load_environments(path, dataset, data_dir or path.parent, hint, False, protocol=protocol, skip=skip)
    envs = []
    for record in load_proactivebench(path):  # schema check first: errors name the file, record and field
        name = dataset or record.extra.get("dataset")
        if not name:
            raise EpisodeError(
                "no dataset: pass `dataset` (e.g. QD) or give each record a 'dataset' field",
                file=str(path),
                record=record.id,
                field="dataset",
            )
        envs.append(make_environment(record.to_dict(), name, data_dir or path.parent, hint, False, str(path)))
    return envs


#: The columns of a training row (the module docstring), and the builder's ``ambiguous`` flag.
ROW_COLUMNS = ("prompt", "image", "options", "answer", "valid_actions", "env_id", "dataset", "step")


def load_rows(path: str | Path) -> list[dict[str, Any]]:
    """Training rows written by `proactive_rl.data.proactivebench.train_set` (JSONL, images relative to the file).

    Every row must hold `ROW_COLUMNS`; an error names the file, the line and the missing field.
    """
    from proactive_eval.episodes import EpisodeError
    from proactive_eval.records import iter_jsonl, read_text

    path = Path(path)
    rows = []
    for lineno, row in iter_jsonl(read_text(path), path):
        missing = [c for c in ROW_COLUMNS if not isinstance(row, dict) or c not in row]
        if missing:
            raise EpisodeError(f"line {lineno}: missing {missing}", file=str(path), field=missing[0])
        image = Path(row["image"])
        rows.append(
            {c: row[c] for c in ROW_COLUMNS} | {"image": str(image if image.is_absolute() else path.parent / image)}
        )
    if not rows:
        raise EpisodeError("no training rows", file=str(path))
    return rows


def rows_to_dataset(rows: Iterable[dict[str, Any]]):
    """A `datasets.Dataset` with an ``Image`` column (arrays become PIL images; paths are decoded lazily)."""
    from datasets import Dataset, Features, Image, List, Value
    from PIL import Image as PILImage

    rows = list(rows)
    if not rows:
        raise ValueError("no training rows: the environment list is empty")
    features = Features(
        {
            "prompt": List({"role": Value("string"), "content": Value("string")}),
            "image": Image(),
            "options": List(Value("string")),
            "answer": Value("string"),
            "valid_actions": List(Value("string")),
            "env_id": Value("string"),
            "dataset": Value("string"),
            "step": Value("int32"),
        }
    )
    converted = []
    for row in rows:
        image = row["image"]
        if isinstance(image, np.ndarray):
            image = PILImage.fromarray(np.ascontiguousarray(image, dtype=np.uint8))
        converted.append({**row, "image": str(image) if isinstance(image, Path) else image})
    return Dataset.from_list(converted, features=features)


def letter_token_ids(tokenizer, n: int) -> list[int]:
    """Token ids of the option letters ``A``.. (one token each, or an error naming the letter).

    The letter as the model writes it first in its answer: ``A`` for Qwen's byte-level BPE, ``▁A`` for the
    Mistral tokenizer of LLaVA-NeXT (its normaliser prepends the ``▁`` a reply after `` [/INST]`` starts with).
    """
    ids = []
    for k in range(n):
        letter = chr(65 + k)
        pieces = tokenizer.encode(letter, add_special_tokens=False)
        if len(pieces) != 1:
            raise ValueError(f"answer_letters_only: option letter {letter!r} is not a single token ({pieces})")
        ids.append(pieces[0])
    return ids


def suppressed_tokens(model, tokenizer, n_options: int) -> list[int]:
    """Every token id except the first `n_options` option letters (``generate(suppress_tokens=...)``)."""
    allowed = set(letter_token_ids(tokenizer, n_options))
    vocab = max(model.get_output_embeddings().weight.shape[0], len(tokenizer))
    return [i for i in range(vocab) if i not in allowed]
