"""Per-decision credit for streaming GRPO: advantages per window step from shared frames (docs/spec.md §8).

Experimental (docs/grpo_credit.md: no variant beats the default trajectory advantage); used by
`proactive_rl.experimental.trainer` only.

The G rollouts of a group see the same frames at the same times and differ only in their own turns. At window step
k, the rows whose turns before k are identical form an *anchor group* (they are in the same state); a row's
*decision* at k is its turn there (the text the rewards read). With ``A_i`` the trajectory advantage TRL computed
(the normalised window reward), the decision advantage is

    D_i,k = mean(A_j : j in the anchor group, same turn at k as i) - mean(A_j : j in the anchor group)

-- the estimate ``Q(s, a) - V(s)`` from the group's own returns. It is 0 where the whole anchor group agreed (no
choice to credit) and where a row is alone in its state. With ``anchor="step"`` the anchor group at k is the whole
group (same frames, any history): coarser states, so more decisions are credited, at the price of comparing rows
whose earlier turns differ (a repeated warning, say). Per step, a row's advantage is ``A_i`` (``trajectory``),
``D_i,k`` (``decision``) or ``A_i + w D_i,k`` (``mixed``, ``w`` = ``decision_weight``). Every token of the row's
turn at step k carries it; frame and template tokens stay out of the loss (``env_mask``).

Everything here is plain Python over lists, so the hand-computed tests read as the formula.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

ADVANTAGES = ("trajectory", "decision", "mixed")
ANCHORS = ("history", "step")


def _anchor(row: Sequence[str], k: int, anchor: str) -> tuple:
    """The state a row is in at step k: its turns before k (``history``) or none (``step``: the frames alone)."""
    return tuple(row[:k]) if anchor == "history" else ()


def decision_advantages(
    turns: Sequence[Sequence[str]], advantages: Sequence[float], anchor: str = "history"
) -> list[list[float]]:
    """``D[i][k]`` for the rows of one group (see the module docstring).

    Args:
        turns: per row, its turn text at every window step (all rows have the same number of steps).
        advantages: per row, its trajectory advantage ``A_i``.
        anchor: one of `ANCHORS`: which rows share a state at step k.

    Example (docs/spec.md §8: G = 4, three steps, ``A = (0.6, -0.4, -0.4, 0.2)``):

    >>> turns = [["S", "W", "S"], ["S", "S", "W"], ["W", "S", "S"], ["S", "W", "W"]]
    >>> [[round(d, 4) for d in row] for row in decision_advantages(turns, [0.6, -0.4, -0.4, 0.2])]
    [[0.1333, 0.2667, 0.2], [0.1333, -0.5333, 0.0], [-0.4, 0.0, 0.0], [0.1333, 0.2667, -0.2]]
    >>> [[round(d, 4) for d in row] for row in decision_advantages(turns, [0.6, -0.4, -0.4, 0.2], anchor="step")]
    [[0.1333, 0.4, 0.1], [0.1333, -0.4, -0.1], [-0.4, -0.4, 0.1], [0.1333, 0.4, -0.1]]
    """
    if anchor not in ANCHORS:
        raise ValueError(f"decision_anchor: expected one of {ANCHORS}, got {anchor!r}")
    if len(turns) != len(advantages):
        raise ValueError(f"{len(turns)} rows of turns for {len(advantages)} advantages")
    steps = {len(row) for row in turns}
    if len(steps) > 1:
        raise ValueError(f"the rows of a group have different numbers of steps: {sorted(steps)}")
    n_steps = steps.pop() if steps else 0
    out = [[0.0] * n_steps for _ in turns]
    for k in range(n_steps):
        anchors: dict[tuple, list[int]] = defaultdict(list)
        for i, row in enumerate(turns):
            anchors[_anchor(row, k, anchor)].append(i)
        for rows in anchors.values():
            baseline = sum(advantages[j] for j in rows) / len(rows)
            by_choice: dict[str, list[int]] = defaultdict(list)
            for j in rows:
                by_choice[turns[j][k]].append(j)
            for chosen in by_choice.values():
                value = sum(advantages[j] for j in chosen) / len(chosen) - baseline
                for j in chosen:
                    out[j][k] = value
    return out


def step_advantages(
    turns: Sequence[Sequence[str]],
    advantages: Sequence[float],
    group_size: int,
    mode: str = "trajectory",
    weight: float = 1.0,
    anchor: str = "history",
) -> list[list[float]]:
    """Per row and window step, the advantage its turn's tokens carry, for a batch of consecutive groups.

    Args:
        turns: per row (TRL's order: consecutive blocks of `group_size` rows are one group), its turns.
        advantages: per row, TRL's trajectory advantage.
        group_size: G.
        mode: one of `ADVANTAGES`.
        weight: ``w`` of ``mixed``.
        anchor: one of `ANCHORS` (`decision_advantages`).

    >>> step_advantages([["S", "W"], ["S", "S"]], [0.5, -0.5], 2, "mixed", 0.5)
    [[0.5, 0.75], [-0.5, -0.75]]
    """
    if mode not in ADVANTAGES:
        raise ValueError(f"advantage: expected one of {ADVANTAGES}, got {mode!r}")
    if group_size < 1 or len(turns) % group_size:
        raise ValueError(f"{len(turns)} rows do not split into groups of {group_size}")
    out: list[list[float]] = []
    for start in range(0, len(turns), group_size):
        rows = slice(start, start + group_size)
        group_turns, group_adv = turns[rows], advantages[rows]
        if mode == "trajectory":
            out += [[a] * len(t) for t, a in zip(group_turns, group_adv)]
            continue
        decisions = decision_advantages(group_turns, group_adv, anchor)
        if mode == "decision":
            out += decisions
        else:
            out += [[a + weight * d for d in row] for row, a in zip(decisions, group_adv)]
    return out


def split_fraction(turns: Sequence[Sequence[str]], group_size: int, anchor: str = "history") -> float:
    """The fraction of (row, step) decisions whose anchor group did not all choose the same turn (the decisions a
    per-decision advantage can credit; logged as ``credit/split_decisions``)."""
    split = total = 0
    for start in range(0, len(turns), group_size):
        group = turns[start : start + group_size]
        for k in range(len(group[0]) if group else 0):
            anchors: dict[tuple, set[str]] = defaultdict(set)
            for row in group:
                anchors[_anchor(row, k, anchor)].add(row[k])
            split += sum(len(anchors[_anchor(row, k, anchor)]) > 1 for row in group)
            total += len(group)
    return split / total if total else 0.0


def token_values(per_step: Sequence[float], token_steps: Sequence[int], width: int) -> list[float]:
    """A row's per-token advantages: token t carries ``per_step[token_steps[t]]``; env tokens (step -1) and padding
    up to `width` carry 0 (they are outside the loss mask)."""
    values = [per_step[s] if s >= 0 else 0.0 for s in token_steps]
    return (values + [0.0] * width)[:width]


def turn_steps(env_mask: Sequence[int]) -> list[int]:
    """Per completion token, the window step whose turn it belongs to (policy tokens: the k-th run of 1s is step k's
    turn), -1 on env tokens.

    >>> turn_steps([1, 1, 0, 0, 1, 0, 1, 1])
    [0, 0, -1, -1, 1, -1, 2, 2]
    """
    out, step, previous = [], -1, 0
    for m in env_mask:
        if m and not previous:
            step += 1
        out.append(step if m else -1)
        previous = m
    return out
