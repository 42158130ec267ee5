"""The reward registry: names → TRL reward functions, plus dotted import paths for user rewards (docs/spec.md §7).

```python
from proactive_rewards import get_reward
reward_funcs = [get_reward("accident", lam=0.2), get_reward("state_format")]   # for trl.GRPOTrainer
```
"""

from __future__ import annotations

from collections.abc import Callable

from proactive_rewards.dotted import import_object
from proactive_rewards.format import state_format_reward
from proactive_rewards.parsing import exact_match, token_f1
from proactive_rewards.suggestion import proactive_suggestion_reward
from proactive_rewards.task_table import get_task, list_tasks, tasks_scored_by
from proactive_rewards.tasks import accident_reward, compositional_reward, count_reward, intervention_reward
from proactive_rewards.trl import RewardFunction, RewardSpec

_REGISTRY: dict[str, RewardSpec] = {}
# Content scorers a parameter may name (``content_scorer="token_f1"``): the only ones a request to the reward
# server may choose (`proactive_rewards.serve`); code may also pass a callable or a dotted import path.
_CONTENT_SCORERS: dict[str, Callable[[str, str], float]] = {"exact_match": exact_match, "token_f1": token_f1}


def register_reward(spec: RewardSpec) -> RewardSpec:
    """Add a reward to the registry; a name that is already taken is an error (no silent shadowing)."""
    if spec.name in _REGISTRY:
        raise ValueError(f"a reward named {spec.name!r} is already registered")
    _REGISTRY[spec.name] = spec
    return spec


def list_rewards() -> list[str]:
    """The registered reward names.

    Example:

    >>> list_rewards()
    ['accident', 'compositional', 'count', 'intervention', 'proactive_suggestion', 'state_format']
    """
    return sorted(_REGISTRY)


def register_content_scorer(name: str, fn: Callable[[str, str], float]) -> Callable[[str, str], float]:
    """Name a content scorer ``c(response_text, target_text) -> [0, 1]`` so that a parameter may choose it by name.

    The reward server (`proactive_rewards.serve`) lets a request choose only registered names: register a scorer in
    the code that starts the server (before `make_server`). A name that is already taken is an error.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a content scorer's name must be a non-empty string, got {name!r}")
    if name in _CONTENT_SCORERS:
        raise ValueError(f"a content scorer named {name!r} is already registered")
    if not callable(fn):
        raise ValueError(f"content scorer {name!r}: expected a callable (response_text, target_text) -> float")
    _CONTENT_SCORERS[name] = fn
    return fn


def list_content_scorers() -> list[str]:
    """The registered content scorer names.

    Example:

    >>> list_content_scorers()
    ['exact_match', 'token_f1']
    """
    return sorted(_CONTENT_SCORERS)


def task_rewards() -> dict[str, str]:
    """``task -> reward name`` of every task with a trajectory reward (`TaskSpec.reward` in the task table).

    Example:

    >>> task_rewards()["atomic"], task_rewards()["accident"]
    ('count', 'accident')
    """
    return {name: get_task(name).reward for name in list_tasks() if get_task(name).reward is not None}


class _NamedCallable:
    """A user reward imported by path, with bound keyword parameters and a TRL metric name (picklable)."""

    def __init__(self, fn: Callable, params: dict, name: str):
        self.fn, self.params, self.__name__ = fn, params, name

    def __call__(self, completions, **columns):
        return self.fn(completions, **columns, **self.params)


def _content_scorer(name: str) -> Callable[[str, str], float]:
    if name in _CONTENT_SCORERS:
        return _CONTENT_SCORERS[name]
    if "." in name or ":" in name:
        return import_object(name)
    raise ValueError(
        f"unknown content_scorer {name!r}; expected one of {', '.join(list_content_scorers())} "
        f"or a dotted import path such as 'my_pkg.scorers:my_scorer'"
    )


def get_reward(
    name: str, *, components: bool = False, metric_name: str | None = None, tasks=None, **params
) -> Callable:
    """A named TRL reward function ``(completions, **columns) -> list[float | None]``.

    Args:
        name (`str`): a registered name (see :func:`list_rewards`) or a dotted import path
            (``"my_pkg.rewards:my_reward"`` or ``"my_pkg.rewards.my_reward"``) to a TRL-style reward.
        components (`bool`, *optional*, defaults to `False`): return ``list[dict]`` with ``"overall"`` and the
            reward's parts, for logging (registered rewards only).
        metric_name (`str`, *optional*): the name TRL logs it under; defaults to `name` (use it to log one reward
            twice with different parameters).
        tasks (`list[str]`, *optional*): the ``task`` column values it scores (others get `None`); defaults to
            the reward's `RewardSpec.tasks`, else the tasks whose `TaskSpec.reward` names it (if any; else every
            row); ``["*"]`` scores every row.
        **params: the reward's keyword parameters (``alpha``, ``lam``, ``signal``, ``r_p``, ``content_scorer``,
            ``valid_actions``), checked now. ``content_scorer`` is a callable, a registered name
            (:func:`list_content_scorers`) or, in code only, a dotted import path; ``valid_actions`` (a list of
            strings) stands for a ``valid_actions`` column, the same for every row.

    Example:

    >>> reward = get_reward("accident")
    >>> reward.__name__, reward(["<t=40.2s></Response> Warning"], targets=[[{"time": 18.867, "text": "Warning"}]])
    ('accident', [0.3441...])
    >>> get_reward("acident")
    Traceback (most recent call last):
    ...
    ValueError: unknown reward 'acident'; expected one of accident, compositional, count, intervention, ...
    """
    if name in _REGISTRY:
        spec = _REGISTRY[name]
        unknown = sorted(set(params) - set(spec.params))
        if unknown:
            raise TypeError(f"reward {name!r} got unknown parameter(s) {unknown}; it takes {list(spec.params)}")
        if isinstance(params.get("content_scorer"), str):
            params["content_scorer"] = _content_scorer(params["content_scorer"])
        # Dry run on an empty trajectory so a bad parameter fails at start-up, not at the first training step.
        spec.fn("", **{c: [] if c != "answer" else "" for c in spec.columns if c not in params}, **params)
        if tasks is None and spec.tasks is None:
            tasks = sorted(tasks_scored_by(name)) or None
        return RewardFunction(spec, params, name=metric_name, tasks=tasks, components=components)
    if "." in name or ":" in name:
        if components or tasks is not None:
            raise ValueError("components= and tasks= apply to registered rewards only")
        fn = import_object(name)
        if not callable(fn):
            raise ValueError(f"{name!r} is not callable")
        return _NamedCallable(fn, params, metric_name or getattr(fn, "__name__", name.rsplit(".", 1)[-1]))
    raise ValueError(
        f"unknown reward {name!r}; expected one of {', '.join(list_rewards())} "
        f"or a dotted import path such as 'my_pkg.rewards:my_reward'"
    )


_TRAJECTORY = dict(columns=("targets",), optional=("times",))
register_reward(RewardSpec("accident", accident_reward, **_TRAJECTORY, params=("signal", "alpha", "lam")))
register_reward(RewardSpec("count", count_reward, **_TRAJECTORY, params=("alpha",)))
register_reward(
    RewardSpec(
        "compositional",
        compositional_reward,
        **_TRAJECTORY,
        params=("alpha", "lam"),
    )
)
register_reward(
    RewardSpec(
        "intervention",
        intervention_reward,
        **_TRAJECTORY,
        params=("alpha", "content_scorer"),
    )
)
register_reward(
    RewardSpec(
        "proactive_suggestion",
        proactive_suggestion_reward,
        # Without valid actions a valid suggestion would silently score 0 (no r_p): a required column, or a
        # parameter (docs/spec.md §7).
        columns=("options", "answer", "valid_actions"),
        params=("r_p", "valid_actions"),
    )
)
register_reward(RewardSpec("state_format", state_format_reward, optional=("times",)))
