"""A guard around TRL reward functions: a reward that fails is named, never silently broadcast.

``trl.GRPOTrainer`` (1.16) calls each reward as ``f(prompts=..., completions=..., completion_ids=..., **columns)``
and writes the result with ``rewards_per_func[:, i] = torch.tensor(output)``. Two failures slip through it:
an exception surfaces without the reward's name, and a scalar or a tensor of the wrong shape can broadcast into
every row. :class:`GuardedReward` checks each call:

- the reward raised → :class:`RewardError` naming the reward, the batch size and the original exception;
- it returned something other than one value per completion (a scalar, a dict, a list of the wrong length, a
  string, a value that is neither a number nor `None`, a non-finite number) → :class:`RewardError` naming it.

With ``on_error="skip"`` a failure is logged instead (``rewards/<name>/error_rate`` through TRL's ``log_metric``,
plus a warning) and the reward returns `None` for every completion of the affected group(s): TRL turns `None`
into NaN and drops it from the weighted sum, so with a single reward the group's rewards are all equal and its
advantages zero — the group is skipped, not scored with a made-up number. If the errors exceed
``max_error_rate`` of the completions seen so far, the run stops with a :class:`RewardError` anyway.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence

from proactive_rl.data.mixture import ON_ERROR

__all__ = ["GuardedReward", "RewardError", "guard_rewards"]

logger = logging.getLogger(__name__)


class RewardError(RuntimeError):
    """A reward function raised or returned something other than one float-or-None per completion."""


def _name(fn: Callable) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def _check_value(name: str, value, row: int):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) and not hasattr(value, "__float__"):
        raise RewardError(
            f"reward {name!r} returned {type(value).__name__} {value!r} for completion {row}; expected a float or None"
        )
    number = float(value)
    if not math.isfinite(number):
        raise RewardError(f"reward {name!r} returned a non-finite value ({number}) for completion {row}")
    return number


def check_output(name: str, output, n: int) -> list[float | None]:
    """`output` as a list of `n` floats-or-None, or a `RewardError` naming the reward and what was wrong."""
    if hasattr(output, "tolist") and not isinstance(output, (list, tuple)):  # numpy / torch: no 0-d broadcast
        if getattr(output, "ndim", 1) != 1:
            raise RewardError(
                f"reward {name!r} returned an array of shape {tuple(getattr(output, 'shape', ()))}; "
                f"expected one value per completion ({n})"
            )
        output = output.tolist()
    if not isinstance(output, Sequence) or isinstance(output, (str, bytes)):
        raise RewardError(
            f"reward {name!r} returned {type(output).__name__} {output!r:.80}; expected a list with one float "
            f"(or None) per completion ({n}) — a single value is never broadcast"
        )
    if len(output) != n:
        raise RewardError(f"reward {name!r} returned {len(output)} values for {n} completions; expected one each")
    return [_check_value(name, value, row) for row, value in enumerate(output)]


class GuardedReward:
    """A TRL reward function with its failures checked (see the module docstring); picklable, keeps the name.

    Args:
        fn (`Callable`): the reward ``(completions, **columns) -> list[float | None]``.
        on_error (`str`, *optional*, defaults to `"raise"`): ``"raise"`` or ``"skip"`` (log, and score the affected
            groups `None`).
        num_generations (`int`, *optional*, defaults to `1`): completions per prompt; consecutive blocks of this many
            completions are one group (TRL's ``RepeatSampler`` order). A failing row skips its whole group.
        max_error_rate (`float`, *optional*, defaults to `0.1`): with ``"skip"``, stop once more than this fraction of
            the completions seen so far were skipped.

    Example:

    >>> bad = lambda completions, **kw: 1.0
    >>> bad.__name__ = "my_reward"
    >>> GuardedReward(bad)(completions=["A", "B"])
    Traceback (most recent call last):
    ...
    proactive_rl.grpo.reward_guard.RewardError: reward 'my_reward' returned float 1.0; expected a list ...
    """

    def __init__(self, fn: Callable, on_error: str = "raise", num_generations: int = 1, max_error_rate: float = 0.1):
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error: expected one of {ON_ERROR}, got {on_error!r}")
        if num_generations < 1:
            raise ValueError(f"num_generations: must be >= 1, got {num_generations}")
        if not 0.0 <= max_error_rate <= 1.0:
            raise ValueError(f"max_error_rate: must be in [0, 1], got {max_error_rate}")
        self.fn, self.on_error, self.num_generations, self.max_error_rate = (
            fn,
            on_error,
            num_generations,
            max_error_rate,
        )
        self.__name__ = _name(fn)  # TRL logs rewards/<__name__>/mean
        self.seen = self.errors = 0

    def __repr__(self) -> str:
        return f"GuardedReward({self.fn!r}, on_error={self.on_error!r})"

    def _call(self, completions, kwargs) -> list[float | None]:
        n = len(completions)
        try:
            output = self.fn(completions=completions, **kwargs)
        except Exception as err:  # noqa: BLE001 - any failure of user code is reported with the reward's name
            raise RewardError(
                f"reward {self.__name__!r} raised {type(err).__name__}: {err} (on a batch of {n} completions)"
            ) from err
        return check_output(self.__name__, output, n)

    def __call__(self, completions, **kwargs) -> list[float | None]:
        n = len(completions)
        try:
            values = self._call(completions, kwargs)
        except RewardError as err:
            if self.on_error == "raise":
                raise
            (values, failed), message = self._per_group(completions, kwargs), str(err)
        else:
            failed, message = 0, None
        if failed:
            logger.warning("%s; scoring %d of %d completions None (their groups are skipped)", message, failed, n)
        self._count(n, failed, kwargs.get("log_metric"), message)
        return values

    def _per_group(self, completions, kwargs) -> tuple[list[float | None], int]:
        """Re-score group by group so one bad group does not cost the batch; failed groups score None."""
        n, g = len(completions), self.num_generations
        values: list[float | None] = []
        failed = 0
        for start in range(0, n, g):
            stop = min(start + g, n)
            sliced = {
                k: v[start:stop] if isinstance(v, (list, tuple)) and len(v) == n else v for k, v in kwargs.items()
            }
            try:
                values.extend(self._call(completions[start:stop], sliced))
            except RewardError:
                # Skipped whole: a partly scored group would give its survivors a biased advantage.
                values.extend([None] * (stop - start))
                failed += stop - start
        return values, failed

    def _count(self, n: int, failed: int, log_metric, message: str | None) -> None:
        self.seen += n
        self.errors += failed
        if callable(log_metric) and self.on_error == "skip":
            log_metric(f"rewards/{self.__name__}/error_rate", failed / max(n, 1))
        rate = self.errors / max(self.seen, 1)
        if failed and rate > self.max_error_rate:
            raise RewardError(
                f"reward {self.__name__!r} failed on {self.errors} of {self.seen} completions "
                f"({rate:.1%} > max_error_rate {self.max_error_rate:.1%}); last error: {message}"
            )


def guard_rewards(
    reward_funcs: Sequence[Callable], on_error: str = "raise", num_generations: int = 1, max_error_rate: float = 0.1
) -> list[GuardedReward]:
    """Wrap every reward function in a :class:`GuardedReward` (for ``GRPOTrainer(reward_funcs=...)``)."""
    return [GuardedReward(f, on_error, num_generations, max_error_rate) for f in reward_funcs]
