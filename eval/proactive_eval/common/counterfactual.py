"""Frame counterfactuals: play an episode with frames that are not its own (docs/spec.md §14).

- ``swap``: each episode is played with the frames of another evaluated episode of the same task, time-aligned
  (at each of the episode's own frame times, the partner's latest frame at or before it), cut at the episode's end
  and padded with the partner's last frame when the partner is shorter. The partner is a seeded derangement within
  the task (`swap_partners`), so no episode keeps its frames and the pairing is the same on every run and rank.
- ``freeze``: the episode's first frame, repeated at every one of its frame times.

Nothing else changes: the instruction, the scheduled user turns, the targets, the frame times and the scoring are
the episode's own. A model that looks at its frames answers differently; ``vision_gain_<metric> = metric -
<metric>_swap``. A counterfactual's outputs are stored under the episode id with a ``#swap`` / ``#freeze`` suffix
(`counterfactual_id`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Sequence
from typing import Any

COUNTERFACTUALS = ("swap", "freeze")
SEPARATOR = "#"
_EPS = 1e-6

FrameSource = Callable[[Any], Iterable[tuple[float, Any]]]


class NoPartner(LookupError):
    """`swap` for an episode whose task has no other evaluated episode: it is not played."""


def check_counterfactuals(value, where: str, allowed: Sequence[str] = COUNTERFACTUALS) -> list[str]:
    """The validated ``counterfactual`` option: a name or a list of names out of `allowed` (``None``: none)."""
    if value is None:
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or any(n not in allowed for n in names):
        raise ValueError(f"{where}: expected a list out of {', '.join(allowed)}, got {value!r}")
    return list(dict.fromkeys(names))


def counterfactual_id(episode_id: str, kind: str) -> str:
    return f"{episode_id}{SEPARATOR}{kind}"


def split_counterfactual_id(record_id: str) -> tuple[str, str | None]:
    """``(episode id, kind)`` of a stored record id; kind is `None` for the episode's own run."""
    base, sep, kind = str(record_id).rpartition(SEPARATOR)
    return (base, kind) if sep and kind in COUNTERFACTUALS else (str(record_id), None)


def swap_partners(items: Sequence, seed: int = 0, group: Callable[[Any], str] | None = None) -> dict[str, str]:
    """Item id → the id of the item whose frames (or images) it is played with.

    Within each group (an episode's task by default), the items in their order are permuted by Sattolo's
    algorithm seeded with `seed`: one cycle through the group, so no item is its own partner. A group of one has
    no partner.

    >>> from types import SimpleNamespace as E
    >>> swap_partners([E(id="a", task="t"), E(id="b", task="t"), E(id="c", task="u")])
    {'a': 'b', 'b': 'a'}
    """
    group = group or (lambda item: item.task)
    by_group: dict[str, list[str]] = {}
    for item in items:
        by_group.setdefault(group(item), []).append(item.id)
    partners = {}
    for name, ids in by_group.items():
        if len(ids) < 2:
            continue
        order = list(range(len(ids)))
        rng = random.Random(f"{seed}:{name}")
        for i in range(len(order) - 1, 0, -1):  # Sattolo: j < i, a single cycle
            j = rng.randrange(i)
            order[i], order[j] = order[j], order[i]
        partners.update({ids[i]: ids[order[i]] for i in range(len(ids))})
    return partners


def aligned_frames(times: Sequence[float], frames: Sequence[tuple[float, Any]]) -> list[tuple[float, Any]]:
    """At each of `times`, the latest of `frames` at or before it (the first before any; the last after all).

    >>> aligned_frames([0.0, 1.0, 2.0, 3.0], [(0.0, "a"), (1.5, "b")])
    [(0.0, 'a'), (1.0, 'a'), (2.0, 'b'), (3.0, 'b')]
    """
    if not frames:
        return []
    out, j = [], 0
    for t in times:
        while j + 1 < len(frames) and frames[j + 1][0] <= t + _EPS:
            j += 1
        out.append((float(t), frames[j][1]))
    return out


def counterfactual_source(kind: str, items: Sequence, frame_source: FrameSource, seed: int = 0) -> FrameSource:
    """The frame source of counterfactual `kind` for the episodes of `items` (all the evaluated episodes, so that a
    shard of them finds its partners): ``episode -> [(time, frame)]`` at the episode's own frame times.

    Raises (when called):
        `NoPartner` for a ``swap`` of an episode with no partner.
    """
    if kind not in COUNTERFACTUALS:
        raise ValueError(f"unknown counterfactual {kind!r}; expected one of {', '.join(COUNTERFACTUALS)}")
    by_id = {item.id: item for item in items}
    partners = swap_partners(items, seed) if kind == "swap" else {}

    def source(episode) -> list[tuple[float, Any]]:
        if kind == "swap" and episode.id not in partners:
            raise NoPartner(f"episode {episode.id!r}: no other episode of task {episode.task!r} to swap frames with")
        own = list(frame_source(episode))
        if kind == "freeze":
            return [(t, own[0][1]) for t, _ in own] if own else []
        partner = list(frame_source(by_id[partners[episode.id]]))
        return aligned_frames([t for t, _ in own], partner)

    source.partners = partners  # type: ignore[attr-defined]
    return source


def with_vision_gain(counterfactual: dict, own: dict, keys: Sequence[str]) -> dict:
    """A counterfactual's summary rows (``overall``, ``groups``) with ``vision_gain`` = own − counterfactual for
    each of `keys`, overall and per group (both summaries over the same episodes).

    >>> row = lambda v: {"overall": {"prs_b": v}, "groups": {"atomic": {"prs_b": v}}}
    >>> with_vision_gain(row(40.0), row(60.0), ["prs_b"])["vision_gain"]
    {'overall': {'prs_b': 20.0}, 'groups': {'atomic': {'prs_b': 20.0}}}
    """

    def diff(a: dict, b: dict) -> dict:
        return {k: round(a[k] - b[k], 4) for k in keys if a.get(k) is not None and b.get(k) is not None}

    groups = {
        g: diff(r, counterfactual["groups"][g]) for g, r in own["groups"].items() if g in counterfactual["groups"]
    }
    gain = {"overall": diff(own["overall"], counterfactual["overall"]), "groups": groups}
    return {"overall": counterfactual["overall"], "groups": counterfactual["groups"], "vision_gain": gain}
