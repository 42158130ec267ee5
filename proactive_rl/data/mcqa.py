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
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image as PILImage

from proactive_eval.benchmarks.proactivebench.environments import (
    MCQAEnvironment,
    MCQAObservation,
    load_environments,
    make_environment,
    mcqa_prompt,
)
from proactive_eval.benchmarks.proactivebench.format import load_proactivebench
from proactive_eval.episodes import EpisodeError
from proactive_eval.records import iter_jsonl, read_text
from proactive_rl.synthetic.environments import KINDS, make_environments

__all__ = [
    "ENV_FORMATS",
    "EnvironmentSpec",
    "env_hint",
    "environment_rows",
    "image_messages",
    "load_rows",
    "mcqa_messages",
    "mcqa_text",
    "parse_environments",
    "proactivebench_environments",
    "rows_to_dataset",
]


ENV_FORMATS = ("records", "rows")
# Difficulty knobs of the synthetic environments (`proactive_rl.synthetic.environments.EnvKnobs`) and frame size.
_KNOB_KEYS = ("negatives", "colours", "layout", "corruptions", "object_radius", "colour_weights", "size")
# Spellings the evaluators' recipes used before the two formats became one: ``n`` for num_envs, ``path`` for source.
_ALIASES = {"n": "num_envs", "path": "source"}


@dataclass
class EnvironmentSpec:
    """One ask-for-help environment source, the same in a training recipe (``environments``) and an evaluator's
    (``eval_callback.evaluators[i].environments``): ``{kind: sketch, num_envs: 8, seed: 0}`` (synthetic) or
    ``{source: QD_preprocessed.jsonl, dataset: QD}`` (ProactiveBench). ``n`` and ``path`` are accepted for
    ``num_envs`` and ``source``; a bare string is a JSONL source.

    Args:
        source (`str`, *optional*, defaults to `"synthetic"`): ``"synthetic"`` (the embedded environments) or a
            ProactiveBench JSONL file.
        kind (`str`, *optional*): the synthetic kind, one of ``occlusion``, ``corruption``, ``sketch``, ``zoom_out``.
        num_envs (`int`, *optional*): how many synthetic environments (required in training recipes; evaluators
            default to 8).
        seed (`int`, *optional*, defaults to `0`): synthetic seed (use different seeds for train and held-out).
        dataset (`str`, *optional*): ProactiveBench dataset (``QD``, ``ROD``, ...); defaults to each record's field.
        data_dir (`str`, *optional*): ProactiveBench image root; defaults to the JSONL's folder.
        max_states (`int`, *optional*): training rows per environment (its first states); all by default.
        name (`str`, *optional*): a label for logs; defaults to ``synthetic/<kind>`` or the source.
        format (`str`, *optional*, defaults to `"records"`): a JSONL source holds the authors' records (one
            environment each), or ``"rows"``: single-turn training rows written by
            `proactive_rl.data.proactivebench.train_set`, used as they are (training only).
        negatives, colours, layout, corruptions, object_radius, colour_weights, size (*optional*): synthetic difficulty
            knobs and frame size, passed to `proactive_rl.synthetic.make_environments` (see `EnvKnobs`; defaults: the
            standard environments, 64 px).
    """

    source: str = "synthetic"
    kind: str | None = None
    num_envs: int | None = None
    seed: int = 0
    dataset: str | None = None
    data_dir: str | None = None
    max_states: int | None = None
    name: str | None = None
    format: str = "records"
    negatives: str | None = None
    colours: list[str] | None = None
    layout: str | None = None
    corruptions: list[str] | None = None
    object_radius: float | None = None
    colour_weights: list[float] | None = None
    size: int | None = None

    @classmethod
    def from_dict(cls, raw: Any, where: str, default_num_envs: int | None = None) -> EnvironmentSpec:
        """Parse and check one entry; every error names `where` (the recipe key and entry) and the field."""
        if isinstance(raw, EnvironmentSpec):
            return raw
        if isinstance(raw, str):
            raw = {"source": raw}
        if not isinstance(raw, dict):
            raise ValueError(
                f"{where}: expected a mapping such as {{kind: sketch, num_envs: 8}} or {{source: x.jsonl}}"
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known - set(_ALIASES))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; expected some of {sorted(known | set(_ALIASES))}")
        values = {}
        for key, value in raw.items():
            field_name = _ALIASES.get(key, key)
            if field_name in values:
                raise ValueError(f"{where}: {field_name!r} given twice (as {field_name!r} and its older spelling)")
            values[field_name] = value
        if "source" not in values and "kind" not in values:
            raise ValueError(
                f"{where}: needs 'kind' (synthetic, one of {', '.join(KINDS)}) or 'source' (a ProactiveBench JSONL)"
            )
        spec = cls(**values)
        spec._check(where, raw, default_num_envs)
        return spec

    def _check(self, where: str, raw: dict, default_num_envs: int | None) -> None:
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            raise ValueError(f"{where}.seed: must be an integer, got {self.seed!r}")
        if self.source == "synthetic":
            if self.kind not in KINDS:
                raise ValueError(f"{where}.kind: expected one of {', '.join(KINDS)}, got {self.kind!r}")
            if self.num_envs is None:
                self.num_envs = default_num_envs
            if not isinstance(self.num_envs, int) or isinstance(self.num_envs, bool) or self.num_envs < 1:
                raise ValueError(f"{where}.num_envs: a synthetic source needs num_envs >= 1, got {self.num_envs!r}")
            try:  # the knobs are checked now (a bad one names its field), not at the first build
                make_environments(self.kind, 1, self.seed, **self.knobs())
            except (ValueError, TypeError) as e:
                raise ValueError(f"{where}: {e}") from None
        elif self.kind is not None or self.num_envs is not None or set(raw) & set(_KNOB_KEYS):
            raise ValueError(
                f"{where}: 'kind', 'num_envs' and the knobs {sorted(_KNOB_KEYS)} only apply to source: synthetic"
            )
        if self.format not in ENV_FORMATS:
            raise ValueError(f"{where}.format: expected one of {', '.join(ENV_FORMATS)}, got {self.format!r}")
        if self.format == "rows" and (self.source == "synthetic" or self.dataset or self.max_states):
            raise ValueError(f"{where}: format rows is a rows JSONL file, without dataset / max_states")
        # A JSONL source is read (and a missing file reported, naming it) when the environments are built.
        if self.max_states is not None and self.max_states < 1:
            raise ValueError(f"{where}.max_states: must be >= 1, got {self.max_states}")
        self.name = self.name or (f"synthetic/{self.kind}" if self.source == "synthetic" else self.source)

    def knobs(self) -> dict[str, Any]:
        """The synthetic knobs this source sets (keyword arguments of `make_environments`)."""
        return {k: getattr(self, k) for k in _KNOB_KEYS if getattr(self, k) is not None}

    def build(self, hint: bool = False, protocol: str | None = None, skip: dict | None = None) -> list:
        """The environments of this source (ProactiveBench files read under `protocol`, see
        `proactivebench_environments`)."""
        if self.format == "rows":
            raise ValueError(f"{self.name}: a rows file holds training rows, not environments (it cannot be played)")
        if self.source == "synthetic":
            return make_environments(self.kind, self.num_envs, seed=self.seed, **self.knobs())
        return proactivebench_environments(
            self.source, self.dataset, self.data_dir, hint=hint, protocol=protocol, skip=skip
        )


def parse_environments(raw: Any, where: str, default_num_envs: int | None = None) -> list[EnvironmentSpec]:
    """The one validator of environment lists: a non-empty list of `EnvironmentSpec` entries (a single entry is
    accepted too), each checked by `EnvironmentSpec.from_dict` with ``{where}[i]`` in its errors.

    Example:

    >>> [s.name for s in parse_environments([{"kind": "sketch", "n": 2}, "QD.jsonl"], "environments")]
    ['synthetic/sketch', 'QD.jsonl']
    >>> parse_environments([{"kind": "blur", "num_envs": 2}], "environments")
    Traceback (most recent call last):
    ...
    ValueError: environments[0].kind: expected one of occlusion, corruption, sketch, zoom_out, got 'blur'
    """
    if isinstance(raw, (str, dict, EnvironmentSpec)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ValueError(
            f"{where}: expected a list of environment entries ({{kind, num_envs, seed}} or {{source, dataset}}), "
            f"got {raw!r}"
        )
    return [EnvironmentSpec.from_dict(item, f"{where}[{i}]", default_num_envs) for i, item in enumerate(raw)]


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
            ``"unfiltered"`` (`proactive_eval.benchmarks.proactivebench.protocol`; needs `dataset`); `None` (the
            default, for training splits) reads every record.
        skip (`dict`, *optional*): the authors' skip arguments, with `protocol`.

    Images are not decoded here: rows carry image paths that `datasets` opens when a batch needs them.
    """
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
    # deferred: keeps torch/transformers out of light import paths
    from datasets import Dataset, Features, Image, List, Value

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
    """Every token id except the first `n_options` option letters: the ids `letters_only` bans from generation."""
    allowed = set(letter_token_ids(tokenizer, n_options))
    vocab = max(model.get_output_embeddings().weight.shape[0], len(tokenizer))
    return [i for i in range(vocab) if i not in allowed]


def letters_only(banned_ids: list[int] | None) -> dict:
    """``generate`` keyword arguments (a ``GenerationConfig``'s fields) under which `banned_ids` cannot be sampled.

    A bias of ``-inf`` on each banned id (``sequence_bias``), applied before temperature and top-k / top-p: the same
    logits as masking the ids out; `None` or no ids: no arguments.
    """
    return {"sequence_bias": {(i,): float("-inf") for i in banned_ids}} if banned_ids else {}
