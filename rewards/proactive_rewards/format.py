"""Optional shaping reward on the state-token format (docs/spec.md §2, §7)."""

from __future__ import annotations

from proactive_rewards.parsing import MALFORMED, parse_turns


def state_format_reward(completion, times=None, *, components: bool = False):
    """Fraction of assistant turns that are exactly one state token at the start (docs/spec.md §7); 0 with no turns.

    A turn is well formed when it is ``</Silence>`` alone or ``</Response>`` followed by non-empty content
    with no further state token.

    Args:
        completion: one completion in any form :func:`~proactive_rewards.parsing.parse_turns` reads.
        times (`list[float]`, *optional*): unused for the score; accepted so every trajectory reward takes it.
        components (`bool`, *optional*, defaults to `False`): return ``{"overall", "turns", "malformed"}``.

    Example:

    >>> state_format_reward(["</Silence>", "</Response> 2", "</Response>", "Silence"])
    0.5
    """
    turns = parse_turns(completion, times)
    malformed = sum(t.state == MALFORMED for t in turns)
    overall = (len(turns) - malformed) / len(turns) if turns else 0.0
    return {"overall": overall, "turns": len(turns), "malformed": malformed} if components else overall
