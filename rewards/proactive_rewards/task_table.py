"""The task table: one `TaskSpec` per streaming task, read by every layer that treats tasks differently.

Episode validation (`proactive_eval.episodes`), the PRS content scorers (`proactive_eval.common.content`), the
synthetic generators, the streaming-GRPO windows and rewards, and `task_rewards()` all look a task up here, so a
new task is one `register_task` call (docs/architecture.md, "A new streaming task")::

    from proactive_rewards import TaskSpec, register_task
    register_task(TaskSpec("cooking", reward="accident", penalized=True))

A recipe names user tasks by import path (`load_tasks`): ``"my_pkg.tasks:SPEC"`` (a `TaskSpec` or a list of
them) or ``"my_pkg.tasks"`` (a module that registers its tasks when imported).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass

from proactive_rewards.dotted import import_object

#: The PRS content rules (docs/spec.md §4): normalised equality; integer equality (count tasks); free text
#: (token-F1 or a judge).
CONTENT_RULES = ("exact", "integer", "free_text")


@dataclass(frozen=True)
class TaskSpec:
    """What the library needs to know about one streaming task (docs/spec.md §1, §4, §7, §8).

    Args:
        name (`str`): the episodes' ``task`` field.
        reward (`str`, *optional*): the registered reward (`proactive_rewards.register_reward`) that scores its
            trajectories in streaming GRPO, and only its rows; `None` = evaluation only.
        content (`str`, *optional*, defaults to `"exact"`): the PRS content rule, one of `CONTENT_RULES`:
            ``"exact"`` and ``"integer"`` score with exact match (integers compared as integers), ``"free_text"``
            with the free-text scorer (token-F1 by default, or a judge).
        history_from_start (`bool`, *optional*, defaults to `False`): a rollout window's ground-truth prefix starts
            at the video's start instead of ``prefix_s`` before the window (P³I: the count tasks, which must know
            how many events already happened).
        penalized (`bool`, *optional*, defaults to `False`): its reward takes the invalid-output penalty ``lam``
            (streaming GRPO passes ``reward_lambda``); every trajectory reward takes ``alpha``.
    """

    name: str
    reward: str | None = None
    content: str = "exact"
    history_from_start: bool = False
    penalized: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"TaskSpec.name: must be a non-empty string, got {self.name!r}")
        if self.content not in CONTENT_RULES:
            raise ValueError(
                f"TaskSpec {self.name!r}: content: expected one of {', '.join(CONTENT_RULES)}, got {self.content!r}"
            )
        if self.reward is not None and (not isinstance(self.reward, str) or not self.reward):
            raise ValueError(f"TaskSpec {self.name!r}: reward: must be a reward name or None, got {self.reward!r}")
        if self.penalized and self.reward is None:
            raise ValueError(f"TaskSpec {self.name!r}: penalized: a task without a reward takes no penalty")

    def reward_params(self, alpha: float, lam: float) -> dict[str, float]:
        """The keyword parameters streaming GRPO binds to this task's reward.

        Example:

        >>> get_task("accident").reward_params(0.05, 0.2), get_task("atomic").reward_params(0.05, 0.2)
        ({'alpha': 0.05, 'lam': 0.2}, {'alpha': 0.05})
        """
        return {"alpha": alpha, "lam": lam} if self.penalized else {"alpha": alpha}


_TASKS: dict[str, TaskSpec] = {}


def register_task(spec: TaskSpec) -> TaskSpec:
    """Add a task to the table; a name that is already taken is an error (no silent shadowing)."""
    if not isinstance(spec, TaskSpec):
        raise TypeError(f"register_task expects a TaskSpec, got {type(spec).__name__}")
    if spec.name in _TASKS:
        raise ValueError(f"a task named {spec.name!r} is already registered")
    clash = [t.name for t in _TASKS.values() if spec.reward is not None and t.reward == spec.reward]
    if clash and _TASKS[clash[0]].penalized != spec.penalized:
        raise ValueError(
            f"TaskSpec {spec.name!r}: penalized={spec.penalized}, but task {clash[0]!r} with the same reward "
            f"{spec.reward!r} has penalized={_TASKS[clash[0]].penalized}; one reward takes one set of parameters"
        )
    _TASKS[spec.name] = spec
    return spec


def list_tasks() -> list[str]:
    """The registered task names, in registration order (the built-in ones first).

    Example:

    >>> list_tasks()[:4]
    ['accident', 'crime', 'atomic', 'event_type']
    """
    return list(_TASKS)


def unknown_task_message(name) -> str:
    """The one error text for a task that is not in the table."""
    return (
        f"unknown task {name!r}; expected one of {', '.join(_TASKS)}, or register it first: "
        f"proactive_rewards.register_task(TaskSpec({name!r}, ...)) (a recipe names it by import path)"
    )


def get_task(name: str) -> TaskSpec:
    """The `TaskSpec` of a registered task; a `ValueError` listing the valid names otherwise.

    Example:

    >>> get_task("atomic").content, get_task("atomic").history_from_start
    ('integer', True)
    >>> get_task("cooking")
    Traceback (most recent call last):
    ...
    ValueError: unknown task 'cooking'; expected one of accident, crime, atomic, ...
    """
    if name not in _TASKS:
        raise ValueError(unknown_task_message(name))
    return _TASKS[name]


def tasks_scored_by(reward: str) -> frozenset[str]:
    """The tasks whose `TaskSpec.reward` is `reward` (what that reward scores by default)."""
    return frozenset(spec.name for spec in _TASKS.values() if spec.reward == reward)


def load_tasks(paths: Iterable[str] | None, where: str = "register_tasks") -> list[str]:
    """Register the user tasks a recipe names by import path; returns the names of the tasks they define.

    Args:
        paths (`list[str]`, *optional*): each ``"my_pkg.tasks:SPEC"`` (a `TaskSpec`, or a list of them) or
            ``"my_pkg.tasks"`` (a module that calls `register_task` when imported). A spec already registered
            (the same one, e.g. a recipe loaded twice) is kept; another spec under a taken name is an error.
        where (`str`, *optional*, defaults to `"register_tasks"`): the recipe key, for the error messages.
    """
    if isinstance(paths, str) or not isinstance(paths, Iterable | None):
        raise ValueError(f"{where}: expected a list of import paths, got {paths!r}")
    names = []
    for path in paths or ():
        if not isinstance(path, str):
            raise ValueError(f"{where}: each entry must be an import path string, got {path!r}")
        if ":" not in path:
            before = set(_TASKS)
            try:
                importlib.import_module(path)
            except ImportError as e:
                raise ValueError(f"{where}: cannot import {path!r} ({type(e).__name__}: {e})") from None
            names += [name for name in _TASKS if name not in before]
            continue
        try:
            found = import_object(path)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        specs = [found] if isinstance(found, TaskSpec) else list(found) if isinstance(found, (list, tuple)) else None
        if specs is None or not all(isinstance(s, TaskSpec) for s in specs):
            raise ValueError(f"{where}: {path!r} must name a TaskSpec or a list of them, got {type(found).__name__}")
        for spec in specs:
            if _TASKS.get(spec.name) != spec:
                register_task(spec)
            names.append(spec.name)
    return names


# The built-in tasks (docs/spec.md §1, §7): P³I's trained tasks with their rewards, and the evaluation-only ones.
for _spec in (
    TaskSpec("accident", reward="accident", penalized=True),
    TaskSpec("crime"),
    TaskSpec("atomic", reward="count", content="integer", history_from_start=True),
    TaskSpec("event_type", reward="count", content="integer", history_from_start=True),
    TaskSpec("compositional", reward="compositional", penalized=True),
    TaskSpec("object"),
    TaskSpec("intervention", reward="intervention", content="free_text"),
    TaskSpec("pvqa"),
):
    register_task(_spec)
BUILTIN_TASKS = tuple(_TASKS)
