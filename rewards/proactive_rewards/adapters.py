"""One sample scored through the TRL reward functions, for the other frameworks' adapters (docs/spec.md §7).

`proactive_rewards.verl` (verl's ``compute_score``) and `proactive_rewards.serve` (an OpenRLHF-style remote reward
server) both end in :func:`score_sample`, which calls the registered TRL reward function (`get_reward`) on a batch
of one. So every adapter returns exactly what the TRL path returns for the same trajectory; what an adapter adds is
reading its framework's shapes:

- the **task** picks the reward (`reward_for_task`): a task name of `task_rewards` (``accident``, ``atomic``, …) or
  a reward name itself (``proactive_suggestion``, ``state_format``);
- the **completion** may be a decoded multi-turn chat transcript (`split_transcript`): the assistant turns become
  one string per decision step, timed by the last ``<t=..s>`` of the user turn before each, as streaming GRPO hands
  them to the TRL rewards;
- the **columns** are the TRL dataset columns (`proactive_rewards.trl`): ``targets``, ``times``, ``options``,
  ``answer``, ``valid_actions``.
"""

from __future__ import annotations

import math
import numbers
import re
import threading
from collections.abc import Mapping, Sequence

from proactive_rewards.registry import _REGISTRY, get_reward, list_rewards, task_rewards
from proactive_rewards.turns import TIMESTAMP_PATTERN

COLUMNS = ("targets", "times", "options", "answer", "valid_actions")

# ChatML (Qwen2.5-VL, Qwen3-VL): `<|im_start|>role\n ... <|im_end|>`. verl decodes responses with
# skip_special_tokens=True, which drops the markers and leaves "\nuser\n" / "\nassistant\n" header lines.
_CHATML = re.compile(r"<\|im_start\|>(system|user|assistant)\n(.*?)(?:<\|im_end\|>|(?=<\|im_start\|>)|\Z)", re.S)
_STRIPPED_HEADER = re.compile(r"(?:^|\n)(system|user|assistant)\n")


class SampleError(ValueError):
    """A sample the adapters cannot score (a configuration or data error, never model output); names the field."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field


def reward_for_task(task) -> str:
    """The reward name scoring `task`: ``task_rewards()[task]``, or `task` when it names a reward.

    Example:

    >>> reward_for_task("atomic"), reward_for_task("proactive_suggestion")
    ('count', 'proactive_suggestion')
    """
    table = task_rewards()
    if isinstance(task, str) and task in table:
        return table[task]
    if isinstance(task, str) and task in _REGISTRY:
        return task
    # the registry's list, the one `get_reward` and the server's /health give, then the task names that map to one
    tasks = [t for t in table if t not in _REGISTRY]
    raise SampleError(
        "task", f"unknown {task!r}; expected one of {', '.join(list_rewards())} or a task: {', '.join(tasks)}"
    )


def split_transcript(text: str) -> tuple[list[str], list[float]] | None:
    """The assistant turns of a decoded ChatML transcript and the time of each; `None` for a plain completion.

    The text before the first header is the assistant turn the prompt opened (a response starts inside it; empty
    when that turn was), unless the text starts with a header (a whole conversation). Each
    turn's time is the last ``<t=..s>`` of the user turn before it (`nan` when there is none), the rule of
    `proactive_rewards.parsing` for chat messages. Both the marked form and verl's default decode (markers dropped,
    header lines kept) are read; a text with neither is a plain completion (`parse_turns` reads it as is).

    Example:

    >>> split_transcript("</Silence><|im_end|>\\n<|im_start|>user\\n<t=2.0s><|im_end|>\\n<|im_start|>assistant\\n"
    ...                  "</Response> Warning<|im_end|>")
    (['</Silence>', '</Response> Warning'], [nan, 2.0])
    >>> split_transcript("</Silence>\\nuser\\n<t=2.0s>\\nassistant\\n</Response> Warning")
    (['</Silence>', '</Response> Warning'], [nan, 2.0])
    >>> split_transcript("<t=1.0s></Silence>") is None
    True
    """
    if not isinstance(text, str):
        return None
    if "<|im_start|>" in text or "<|im_end|>" in text:
        head = text.split("<|im_start|>", 1)[0]
        messages = [] if text.startswith("<|im_start|>") else [("assistant", head.split("<|im_end|>", 1)[0])]
        messages += [(role, body) for role, body in _CHATML.findall(text)]
    elif _STRIPPED_HEADER.search(text):
        parts = _STRIPPED_HEADER.split(text)
        messages = [] if _STRIPPED_HEADER.match(text) and text[0] != "\n" else [("assistant", parts[0])]
        messages += list(zip(parts[1::2], parts[2::2]))
    else:
        return None
    steps, times, user_time = [], [], math.nan
    for role, body in messages:
        if role == "assistant":
            steps.append(body.strip())
            times.append(user_time)
        elif role == "user":
            marks = TIMESTAMP_PATTERN.findall(body)
            user_time = _as_float(marks[-1].strip()) if marks else math.nan
    return steps, times


def _as_float(x) -> float:
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        return math.nan


def _plain(value):
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, (str, bytes)) else value


# Built rewards per parameter setting, bounded: a server sees settings chosen by its clients.
_CACHE: dict[str, dict] = {}
_CACHE_SIZE, _CACHE_KEY_CHARS = 128, 4096
_CACHE_LOCK = threading.Lock()
_NUMBERS = ("alpha", "lam", "r_p")


def _check_type(key: str, value) -> None:
    """The built-in parameters' types, so that a bad one fails when the reward is built, not at the first sample."""
    if key in _NUMBERS and (isinstance(value, bool) or not isinstance(value, numbers.Real)):
        raise SampleError(f"params.{key}", f"expected a number, got {type(value).__name__}")
    if key == "signal" and not isinstance(value, str):
        raise SampleError(f"params.{key}", f"expected a string, got {type(value).__name__}")
    if key == "valid_actions" and (
        isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(a, str) for a in value)
    ):
        raise SampleError(f"params.{key}", "expected a list of strings")


def _build(params: Mapping) -> dict:
    known = sorted({p for spec in _REGISTRY.values() for p in spec.params})
    for key, value in params.items():
        if key not in known:
            raise SampleError(f"params.{key}", f"unknown parameter; the rewards take {', '.join(known)}")
        _check_type(key, value)
        # every reward that takes it checks it, whichever task the request scores (a bad r_p fails on accident too)
        for name, spec in _REGISTRY.items():
            if key in spec.params:
                try:
                    get_reward(name, **{key: value})
                except (TypeError, ValueError) as err:
                    raise SampleError(f"params.{key}", str(err)) from None
    built = {}
    for name, spec in _REGISTRY.items():
        try:
            built[name] = get_reward(name, **{k: v for k, v in params.items() if k in spec.params})
        except (TypeError, ValueError) as err:
            raise SampleError("params", str(err)) from None
    return built


def _reward(name: str, params: Mapping):
    """`get_reward(name, **params)` restricted to the parameters that reward takes; every parameter is checked
    against every reward that takes it (`SampleError` on ``params.<name>``). Built once per setting."""
    key = repr((tuple(_REGISTRY), sorted(params.items())))
    with _CACHE_LOCK:
        built = _CACHE.get(key)
    if built is None:
        built = _build(params)
        if len(key) <= _CACHE_KEY_CHARS:
            with _CACHE_LOCK:
                while len(_CACHE) >= _CACHE_SIZE:
                    _CACHE.pop(next(iter(_CACHE)))
                _CACHE[key] = built
    return built[name]


def check_params(params: Mapping) -> None:
    """Build every reward with `params` once, so a bad parameter fails at start-up (`SampleError` naming it)."""
    _reward(next(iter(_REGISTRY)), params)


def score_sample(task, completion, columns: Mapping, params: Mapping | None = None) -> float:
    """The TRL reward of one sample: ``get_reward(reward_for_task(task), **params)([completion], task=[task], …)``.

    A transcript completion (`split_transcript`) becomes its per-step strings, timed by its user turns unless
    ``columns["times"]`` is given (the TRL rule: ``times`` wins over in-band times).

    Args:
        task (`str`): the task (or reward) name.
        completion (`str` or `list`): the model's trajectory, in any form `parse_turns` reads, or a transcript.
        columns (`Mapping`): the TRL dataset columns of the sample (`COLUMNS`; others are ignored).
        params (`Mapping`, *optional*): reward parameters (``alpha``, ``lam``, ``r_p``, ``signal``); each reward
            takes those it declares.

    Example:

    >>> score_sample("accident", "</Silence>\\nuser\\n<t=40.2s>\\nassistant\\n</Response> Warning",
    ...              {"targets": [{"time": 18.867, "text": "Warning"}]})
    0.3441...
    """
    name = reward_for_task(task)
    fn = _reward(name, params or {})
    # duck-typed `tolist`: verl reads parquet columns back as numpy arrays, which are no `Sequence`
    row = {c: _plain(columns[c]) for c in COLUMNS if c in columns and columns[c] is not None}
    split = split_transcript(completion)
    if split is not None:
        completion = split[0]
        row.setdefault("times", split[1])
    wanted = (*_REGISTRY[name].columns, *_REGISTRY[name].optional)
    missing = [c for c in _REGISTRY[name].columns if c not in row and c not in fn.params]
    if missing:
        raise SampleError(missing[0], f"required by the {name!r} reward of task {task!r}")
    try:
        # a reward named as the task (``count``) scores the sample; a task column would make it skip a non-task
        tasks = {"task": [task]} if task in task_rewards() else {}
        value = fn([completion], **tasks, **{c: [row[c]] for c in wanted if c in row})[0]
    except ValueError as err:  # a malformed ground-truth column (proactive_rewards.trl names it)
        field = next((c for c in wanted if repr(c) in str(err)), "targets")
        raise SampleError(field, str(err)) from None
    return value
