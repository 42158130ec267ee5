"""The two small records every scorer meets at (docs/spec.md §4 symbols).

A *response* is a non-silent model output ``(t_j, ŷ_j)``; a *target* is a ground-truth
response ``(τ_i, y_i)``, optionally with a window ``[a_i, b_i]``. Scorers also accept plain
``(time, text)`` pairs and ``{"time": ..., "text": ...}`` dicts; :func:`as_response` and
:func:`as_target` normalise them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Response:
    """A non-silent model output.

    Args:
        time (`float`): seconds from the start of the stream.
        text (`str`): the content, with the state token stripped.
        malformed (`bool`, *optional*, defaults to `False`): the output broke the state-token protocol
            (docs/spec.md §13): it counts as an output (in ``|O_i|``, in ``M``) but no content scorer credits it.
    """

    time: float
    text: str
    malformed: bool = False


@dataclass(frozen=True)
class Target:
    """A ground-truth response (docs/spec.md §1, §4).

    Args:
        time (`float`): the reference time ``τ`` in seconds.
        text (`str`): the reference content.
        window (`tuple[float, float]`, *optional*): ``[a, b]``; distance is 0 inside it.
        related (`tuple[float, float]`, *optional*): the PAUC related span (docs/spec.md §5).
    """

    time: float
    text: str
    window: tuple[float, float] | None = None
    related: tuple[float, float] | None = None


def as_response(item) -> Response:
    """Normalise a `Response`, a ``(time, text)`` pair or a ``{"time", "text"[, "malformed"]}`` dict."""
    if isinstance(item, Response):
        return item
    if isinstance(item, dict):
        return Response(float(item["time"]), str(item.get("text", "")), item.get("malformed") is True)
    time, text = item
    return Response(float(time), str(text))


def as_target(item) -> Target:
    """Normalise a `Target`, a ``(time, text[, window])`` tuple or a dict with ``time``, ``text``, ``window``."""
    if isinstance(item, Target):
        return item
    if isinstance(item, dict):
        window = item.get("window")
        related = item.get("related")
        return Target(
            float(item["time"]),
            str(item.get("text", "")),
            tuple(float(x) for x in window) if window is not None else None,
            tuple(float(x) for x in related) if related is not None else None,
        )
    time, text, *rest = item
    window = tuple(float(x) for x in rest[0]) if rest and rest[0] is not None else None
    return Target(float(time), str(text), window)
