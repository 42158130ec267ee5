"""Adapters from the plain trajectory rewards to TRL's reward-function signature (docs/spec.md §7).

TRL calls ``reward_func(prompts=..., completions=..., completion_ids=..., **columns)`` where every dataset
column (except ``prompt``) arrives as a list with one entry per completion. The columns these rewards read:

======================  ===========================================================================
``targets``             list of ``{"time": float, "text": str, "window": [a, b] | None}``: the targets
                        inside the row's rollout window (accident, count, compositional, intervention)
``times``               list of floats, *optional*: the decision time of each assistant turn, for
                        completions that carry no ``<t=..s>`` timestamps
``task``                str, *optional*: a reward returns `None` on rows of tasks it does not score
``options``             list of str: the lettered MCQA options (proactive_suggestion)
``answer``              str or int: the correct category (proactive_suggestion)
``valid_actions``       list of str: the proactive suggestions valid in the row's state (proactive_suggestion;
                        or the reward's ``valid_actions`` parameter, the same list for every row)
======================  ===========================================================================

A missing required column is a configuration error: :meth:`RewardFunction.check_columns` raises a `ValueError`
naming it before training (trainers call it on their dataset's columns), and so does the first call. A column
a reward also takes as a parameter (``valid_actions``) may be given either way, not both. A malformed
ground-truth record raises naming the column, the row and the field. Model output never raises.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from proactive_rewards.types import as_target


@dataclass(frozen=True)
class RewardSpec:
    """A registered reward: its trajectory function and the dataset columns it reads.

    Args:
        name (`str`): the registry name (and the default TRL metric name).
        fn (`Callable`): ``fn(completion, **row_columns, **params, components=False)``.
        columns (`tuple[str, ...]`): required dataset columns.
        optional (`tuple[str, ...]`): optional dataset columns (`None` for the row when absent).
        tasks (`frozenset[str]`, *optional*): tasks it scores; rows of other tasks get `None`. `None` = the tasks
            whose `TaskSpec.reward` names it (`proactive_rewards.task_table`), or all rows if none does.
        params (`tuple[str, ...]`): the keyword parameters `get_reward` may bind.
    """

    name: str
    fn: Callable
    columns: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()
    tasks: frozenset[str] | None = None
    params: tuple[str, ...] = ()


def _row_targets(value, row: int) -> list:
    if value is None:
        return []
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(
            f"dataset column 'targets', row {row}: expected a list of targets, got {type(value).__name__}"
        )
    out = []
    for k, item in enumerate(value):
        try:
            target = as_target(item)
            if target.window is not None and len(target.window) != 2:
                raise ValueError(f"window must be [a, b], got {list(target.window)}")
            out.append(target)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"dataset column 'targets', row {row}, target {k}: expected {{'time', 'text', 'window'}}, "
                f"got {item!r} ({type(e).__name__}: {e})"
            ) from None
    return out


class RewardFunction:
    """A named, picklable TRL reward function ``(completions, **columns) -> list[float | None]``.

    Built by :func:`~proactive_rewards.registry.get_reward`; ``__name__`` is the name TRL logs the reward under
    (``rewards/<name>/mean``). With ``components=True`` it returns ``list[dict | None]`` (``{"overall", …}``) for
    logging instead.
    """

    def __init__(
        self, spec: RewardSpec, params: dict, *, name: str | None = None, tasks=None, components: bool = False
    ):
        self.spec, self.params, self.components = spec, dict(params), components
        self.tasks = spec.tasks if tasks is None else (None if "*" in tasks else frozenset(tasks))
        self.__name__ = name or spec.name

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"<reward {self.__name__}: {self.spec.name}({params})>"

    def _row_columns(self) -> tuple[str, ...]:
        """The columns read per row: the spec's, less those bound as parameters."""
        return tuple(c for c in (*self.spec.columns, *self.spec.optional) if c not in self.params)

    def check_columns(self, names) -> None:
        """Raise a `ValueError` naming what is missing when a dataset with columns `names` cannot feed this
        reward, or when a column is given both in the dataset and as a parameter. Call it at start-up."""
        names = sorted(k for k in names if k not in ("prompts", "completion_ids", "trainer_state"))
        missing = [c for c in self.spec.columns if c not in names and c not in self.params]
        if missing:
            bindable = [c for c in missing if c in self.spec.params]
            hint = (
                f" (or pass {', '.join(f'{c}=[...]' for c in bindable)} to get_reward, the same for every row)"
                if bindable
                else ""
            )
            raise ValueError(
                f"reward {self.__name__!r} needs the dataset column(s) {missing}{hint}; the dataset has {names}. "
                f"See proactive_rewards.trl for the column formats."
            )
        both = [c for c in self.params if c in names and c in (*self.spec.columns, *self.spec.optional)]
        if both:
            raise ValueError(
                f"reward {self.__name__!r}: {both} given both as a dataset column and as a parameter; keep one"
            )

    def __call__(self, completions, **columns) -> list:
        n = len(completions)
        self.check_columns(columns)
        row_columns = self._row_columns()
        wanted = [c for c in (*row_columns, "task") if c in columns]
        for c in wanted:
            if not isinstance(columns[c], Sequence) or isinstance(columns[c], (str, bytes)) or len(columns[c]) != n:
                raise ValueError(
                    f"reward {self.__name__!r}: dataset column {c!r} must be a list with one entry per completion "
                    f"({n}), got {type(columns[c]).__name__}"
                    + (f" of length {len(columns[c])}" if isinstance(columns[c], Sequence) else "")
                )
        out = []
        for i, completion in enumerate(completions):
            if self.tasks is not None and "task" in columns and columns["task"][i] not in self.tasks:
                out.append(None)
                continue
            row = {c: columns[c][i] if c in columns else None for c in row_columns}
            if "targets" in row:
                row["targets"] = _row_targets(row["targets"], i)
            value = self.spec.fn(completion, **row, **self.params, components=self.components)
            out.append(value if self.components else _finite(value))
        return out


def _finite(value) -> float:
    # Every built-in reward is finite by construction; this keeps a NaN from a user content scorer or an
    # overflowing parameter out of the GRPO advantages.
    value = float(value)
    return value if math.isfinite(value) else 0.0
